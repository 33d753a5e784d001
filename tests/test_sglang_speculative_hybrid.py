"""SGLang 0.5.23's Mamba-state split under speculative decoding, against SGLang's own sizing.

``fixtures/sglang_0_5_23/speculative_hybrid.json`` was recorded with the SGLang reference tool (its
``run_scenario``, each entry's speculative server arguments passed to ``ServerArgs`` and the
runner's ``spec_algorithm`` set from them): ``_handle_max_mamba_cache``'s ``memory_budget_spec``
path, which reserves the intermediate SSM state of every draft token before the KV pool, over
Qwen3-Next and Qwen3.5 × NEXTN/EAGLE × steps 1–3 × topk 1/4 × TP 1/2 × 20/40 GiB, a draft path
given (``@DIR``: the target's own checkpoint), ``--max-running-requests``,
``--max-mamba-cache-size`` and ``--disable-radix-cache``. kvcalc's plan through the public
planning API must equal every entry SGLang sizes: the slots, their bytes, the cell,
``max_total_num_tokens`` and ``max_running_requests``; what SGLang refuses, in its words.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import KvCacheGroup
from kvcalc.engines.sglang import mamba, multimodal
from kvcalc.engines.sglang.speculative import read_speculative
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.result import CapacityPlan
from kvcalc.sources.bundled import find_bundled
from kvcalc.units import GIB, MIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "sglang_0_5_23" / "speculative_hybrid.json").read_text()
)
SIZED = [e for e in FIXTURE["entries"] if "max_mamba_cache_size" in e]
REFUSED = [e for e in FIXTURE["entries"] if "max_mamba_cache_size" not in e]
#: the emulated H100 80GB the entries were recorded on
H100_BYTES = 81_559 * MIB


def _id(e: dict) -> str:
    args = e["server_args"]
    more = "-".join(f"{k}={v}" for k, v in args.items() if not k.startswith("speculative_"))
    path = "-path" if "speculative_draft_model_path" in args else ""
    steps = (f"s{args['speculative_num_steps']}-k{args['speculative_eagle_topk']}"
             if "speculative_num_steps" in args else "auto")  # fmt: skip
    return (f"{e['config'][6:-5]}-{args['speculative_algorithm']}{path}-{steps}-tp{e['tp']}-"
            f"{e['kv_memory_gib']:g}{'-' + more if more else ''}")  # fmt: skip


def _reference(name: str) -> str:
    """``Qwen--Qwen3.5-35B-A3B.json`` → ``Qwen/Qwen3.5-35B-A3B``, checked to be the bundled config
    the entry was recorded from."""
    ref = name.removesuffix(".json").replace("--", "/", 1)
    bundled = find_bundled(ref)
    assert bundled is not None, ref
    assert json.loads(bundled.path.read_text()) == FIXTURE["configs"][name]
    return ref


def _inputs(entry: dict) -> PlanInputs:
    args: dict[str, Any] = dict(entry["server_args"])
    ref = _reference(entry["config"])
    options = [(k, args[k]) for k in ("speculative_eagle_topk", "speculative_num_draft_tokens",
                                      "max_mamba_cache_size", "disable_radix_cache") if k in args]  # fmt: skip
    return PlanInputs(
        engine="sglang", gpu="H100-80GB", tensor_parallel_size=entry["tp"],
        kv_cache_memory_bytes=int(entry["kv_memory_gib"] * GIB),
        spec_method=args["speculative_algorithm"],
        spec_model=ref if "speculative_draft_model_path" in args else None,
        spec_tokens=args.get("speculative_num_steps"), engine_options=tuple(options),
        max_num_seqs=args.get("max_running_requests"),
    )  # fmt: skip


def _plan(entry: dict) -> CapacityPlan:
    return plan_reference(_reference(entry["config"]), _inputs(entry), with_suggestions=False)


def _state(groups: tuple[KvCacheGroup, ...]) -> KvCacheGroup:
    return next(g for g in groups if g.kind is LayerKind.RECURRENT)


def test_fixture_covers_the_grid() -> None:
    entries = FIXTURE["entries"]
    assert {e["config"] for e in SIZED} == set(FIXTURE["configs"]) and len(SIZED) >= 24
    args = [e["server_args"] for e in SIZED]
    assert {a["speculative_algorithm"] for a in args} == {"NEXTN", "EAGLE", "NGRAM"}
    assert {a.get("speculative_num_steps") for a in args} == {1, 2, 3, None}
    assert {a.get("speculative_eagle_topk") for a in args} == {1, 4, None}
    assert {e["tp"] for e in SIZED} == {1, 2} and {e["kv_memory_gib"] for e in SIZED} == {20, 40}
    for key in ("speculative_draft_model_path", "max_running_requests", "max_mamba_cache_size",
                "disable_radix_cache"):  # fmt: skip
        assert any(key in a for a in args), key
    assert REFUSED and all(e["failed_stage"] == "resolve_memory_pool_config" for e in REFUSED)
    # sized entries stop only after sizing, building the real pools on the meta device
    assert all(e["failed_stage"] == "init_pools" for e in SIZED)
    assert len(entries) == len(SIZED) + len(REFUSED)


@pytest.mark.parametrize("entry", [pytest.param(e, id=_id(e)) for e in SIZED])
def test_plan_equals_sglang(entry: dict) -> None:
    plan = _plan(entry)
    state = _state(plan.groups)
    assert state.num_blocks == entry["max_mamba_cache_size"]
    assert state.page_bytes * state.num_layers == entry["mamba_cache_per_req_bytes"]
    # the cell: no draft layer without a draft path, one (int(cell / full layers)) with one
    assert plan.kv_bytes_per_token == entry["pool_configurator_state"]["_cell_size"]
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"]
    assert plan.max_num_seqs == entry["max_running_requests"]
    ngram = entry["server_args"]["speculative_algorithm"] == "NGRAM"
    assert plan.speculative is not None and plan.speculative.method == ("ngram" if ngram else "mtp")


@pytest.mark.parametrize("entry", [pytest.param(e, id=_id(e)) for e in SIZED])
def test_split_matches_sglang(entry: dict) -> None:
    """The split alone: the KV budget ``config_from_budget`` saw, and the intermediate reserve."""
    model = parse_config(FIXTURE["configs"][entry["config"]], name=entry["config"])
    model = model.per_rank(entry["tp"])
    args, resolved = entry["server_args"], entry["resolved"]
    d = resolved["speculative_num_draft_tokens"]
    running = resolved["max_running_requests"]
    extra = {k: args[k] for k in ("max_mamba_cache_size", "disable_radix_cache") if k in args}
    # Qwen3.5 (a vision-language checkpoint): SGLang's multimodal reservation comes off first
    reserved = multimodal.reservation_bytes(model, H100_BYTES, (9, 0))
    rest = entry["kv_memory_gib"] - reserved / GIB
    s = mamba.split(model, rest, mamba.options(extra, running, d))
    assert s.slot_bytes == entry["mamba_cache_per_req_bytes"]
    assert s.slots == entry["max_mamba_cache_size"]
    capped = min(running, s.slots // s.slots_per_request)
    assert s.spec_state_bytes == s.slot_bytes * (capped + 1) * d
    assert s.kv_budget_bytes == entry["kv_budget_bytes_seen_by_config_from_budget"][0]


@pytest.mark.parametrize("entry", [pytest.param(e, id=_id(e)) for e in REFUSED])
def test_refusal_is_sglangs(entry: dict) -> None:
    plan = _plan(entry)
    sglang = entry["error"].split(": ", 1)[1].split(" Try:")[0]
    assert plan.verdict == "wont-start"
    assert f"sglang refuses to start: {sglang};" in plan.verdict_reason


def test_qwen3_next_nextn_tp1_20gib_by_hand() -> None:
    """Hand-checked (NEXTN, 3 steps, topk 1, D = 4, no draft path): a slot is p = 36 · (3 · 8,192
    · 2 + 32 · 128 · 128 · 4) = 77,266,944 B; the state budget 20 · 0.9 / 1.9 GiB =
    10,172,290,964.2 B; K = (budget − p · (1 + D)) // (p · (1 + D / 5)) = 9,785,956,244.2 //
    139,080,499.2 = 70 slots; min(48, 70 // 5) = 14 running; the intermediate reserve p · (14 + 1)
    · 4 = 4,636,016,640 B; the KV pool gets 20 GiB − 4,636,016,640 − 71 p = 11,352,866,816 B,
    // 24,576 B (12 full-attention layers · 2 KV heads · 256 · (K + V) · 2 B, no draft layer)
    = 461,949 tokens."""
    config = FIXTURE["configs"]["Qwen--Qwen3-Next-80B-A3B-Thinking.json"]
    s = mamba.split(parse_config(config, name="q3n"), 20.0, mamba.options({}, 48, 4))
    assert (s.slots, s.spec_state_bytes) == (70, 4_636_016_640)
    assert s.kv_budget_bytes // 24_576 == 461_949


def test_cli_plan_equals_sglang(cli) -> None:
    entry = next(e for e in SIZED if e["config"].startswith("Qwen--Qwen3-Next") and e["tp"] == 2
                 and e["kv_memory_gib"] == 20 and e["server_args"] == {
                     "speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                     "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4})  # fmt: skip
    command = ("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Thinking "
               "--tp 2 --speculative-algorithm NEXTN --speculative-num-steps 3 "
               "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4")  # fmt: skip
    out = cli("plan", "--gpu", "H100-80GB", "--kv-cache-memory", "20", "--from-command", command,
              "--json")  # fmt: skip
    # exit 1: it ran, and 80B of weights do not fit two GPUs beside the KV cache given
    assert out.exit_code in (0, 1), out.stderr
    plan = out.json
    assert plan["engine"] == "sglang"
    assert plan["kv_cache_tokens"] == entry["max_total_num_tokens"]
    assert plan["max_num_seqs"] == entry["max_running_requests"]
    state = next(g for g in plan["groups"] if g["kind"] == "recurrent")
    assert state["num_blocks"] == entry["max_mamba_cache_size"]
    assert state["page_bytes"] * state["num_layers"] == entry["mamba_cache_per_req_bytes"]


@pytest.mark.parametrize(
    ("reference", "method", "match"),
    [("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "NEXTN", "Qwen3-Next and Qwen3.5 only"),
     ("Qwen/Qwen3-Next-80B-A3B-Thinking", "STANDALONE", "only its own MTP layer"),
     ("Qwen/Qwen3-Next-80B-A3B-Thinking", "EAGLE3", "only its own MTP layer")],
)  # fmt: skip
def test_unrecorded_hybrid_drafts_refused_by_name(reference: str, method: str, match: str) -> None:
    spec = read_speculative(method, None if method == "NEXTN" else "a-draft", None, None, None)
    assert spec is not None
    with pytest.raises(InputError, match=match) as exc:
        get_engine("sglang").speculative_draft(bundled_shape(reference), spec,
                                               tensor_parallel_size=1, pipeline_parallel_size=1)  # fmt: skip
    assert exc.value.code == "speculative-not-modelled"
