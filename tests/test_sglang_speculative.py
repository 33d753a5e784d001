"""kvcalc's SGLang engine against SGLang 0.5.23's own sizing under speculative decoding and DP
attention (``fixtures/sglang_0_5_23/speculative_dp_attention.json``, recorded with the SGLang
reference tool's ``run_scenario``, each entry's server arguments passed to ``ServerArgs``).

Every recorded number must come out equal: the pool configurator's cell (the draft's layers priced
at the target's per-layer bytes), ``max_total_num_tokens`` from 20 GiB, ``max_running_requests``
(48 under speculation, per DP rank), the resolved steps/topk/draft tokens, ``mem_fraction_static``
with DP attention's graph reserve and ``chunked_prefill_size // dp``. What SGLang refuses is
refused in its words; what kvcalc does not model is refused by name.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, KvCachePlan
from kvcalc.engines.sglang.defaults import memory_defaults
from kvcalc.engines.sglang.speculative import read_speculative, resolved_params
from kvcalc.errors import InputError
from kvcalc.sources.bundled import find_bundled
from kvcalc.units import GIB, MIB

FIXTURE = json.loads(
    (
        Path(__file__).parent / "fixtures" / "sglang_0_5_23" / "speculative_dp_attention.json"
    ).read_text()
)
H100_BYTES = FIXTURE["gpu"]["total_mib"] * MIB
CASES = [pytest.param(e, id=e["scenario"]) for e in FIXTURE["entries"]]
SGLANG = get_engine("sglang")


def _reference(name: str) -> str:
    """``meta-llama--Llama-3.1-8B.json`` → ``meta-llama/Llama-3.1-8B``, checked to be the bundled
    config the entry was recorded from."""
    ref = name.removesuffix(".json").replace("--", "/", 1)
    bundled = find_bundled(ref)
    assert bundled is not None, ref
    return ref


def _sha(ref: str) -> str:
    bundled = find_bundled(ref)
    assert bundled is not None
    return hashlib.sha256(bundled.path.read_bytes()).hexdigest()


def _plan(entry: dict) -> KvCachePlan:
    target = bundled_shape(_reference(entry["config"]))
    args = entry["server_args"]
    draft_ref = _reference(entry["draft"]["config"]) if "draft" in entry else None
    spec = read_speculative(
        args.get("speculative_algorithm"), draft_ref, args.get("speculative_num_steps"),
        args.get("speculative_eagle_topk"), args.get("speculative_num_draft_tokens"),
    )  # fmt: skip
    draft = None
    if spec is not None:
        from dataclasses import replace

        spec = replace(spec, draft=bundled_shape(draft_ref) if draft_ref else None)
        draft = SGLANG.speculative_draft(target, spec, tensor_parallel_size=entry["tp"],
                                         pipeline_parallel_size=1)  # fmt: skip
    return SGLANG.plan_kv_cache(
        EngineRequest(
            model=target, max_model_len=entry["context_len"],
            kv_cache_dtype="auto" if entry["kv_cache_dtype"] == "auto" else "fp8_e4m3",
            tensor_parallel_size=entry["tp"], available_kv_bytes=int(entry["kv_memory_gib"] * GIB),
            gpu_memory_bytes=H100_BYTES, gpu_compute_capability=tuple(FIXTURE["gpu"]["cap"]),
            attention_data_parallel_size=args.get("dp_size", 1) if args.get("enable_dp_attention") else 1,
            max_num_seqs=args.get("max_running_requests"), speculative=draft,
        )
    )  # fmt: skip


def test_fixture_covers_the_items() -> None:
    algorithms = {e["server_args"].get("speculative_algorithm") for e in FIXTURE["entries"]}
    assert {"NEXTN", "EAGLE3", "STANDALONE", "NGRAM"} <= algorithms
    assert any(e["attn_dp_size"] > 1 for e in FIXTURE["entries"])
    for e in FIXTURE["entries"]:  # each recorded from the config kvcalc bundles
        assert _sha(_reference(e["config"])) == e["config_sha256"], e["scenario"]
        if "draft" in e:
            assert _sha(_reference(e["draft"]["config"])) == e["draft"]["config_sha256"]


@pytest.mark.parametrize("entry", CASES)
def test_pool_equals_sglang(entry: dict) -> None:
    plan = _plan(entry)
    # DeepSeek-V3 NEXTN: 70,272 + int(70,272 · 1 / 61) = 71,424 B; Llama-3.1-8B + EAGLE3 head:
    # 131,072 + int(131,072 / 32) = 135,168; + Llama-3.2-1B STANDALONE: 131,072 · (1 + 16/32)
    assert plan.kv_bytes_per_token == entry["cell_size_bytes"]
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"]  # 20 GiB // cell
    assert plan.max_num_seqs == entry["max_running_requests"]  # 48, // dp under DP attention
    assert plan.block_size == entry["page_size"]
    chunk = [x for x in plan.log_lines if x.startswith("max_total_num_tokens=")][0]
    assert f"chunked_prefill_size={entry['chunked_prefill_size']}," in chunk


@pytest.mark.parametrize("entry", CASES)
def test_memory_fraction_equals_sglang(entry: dict) -> None:
    """DP attention's graph reserve: DeepSeek-V3 TP 8, DP 8 on 81,559 MiB: 512 + 8,192·1.5 + 1,024
    + 512·2 + 1,536 (MLA prefill graphs) + 512·8·3 + 512·8·1.5 = 34,816 MiB → 0.573."""
    args = entry["server_args"]
    dp = args.get("dp_size", 1) if args.get("enable_dp_attention") else 1
    target = bundled_shape(_reference(entry["config"]))
    # a given --max-running-requests caps the decode graphs first (Llama-3.1-8B at 128: 0.833)
    fraction = memory_defaults("latest", H100_BYTES, entry["tp"], 1, target, dp,
                               args.get("max_running_requests")).mem_fraction_static  # fmt: skip
    assert fraction == entry["mem_fraction_static"]


@pytest.mark.parametrize("entry", [c for c in CASES if c.values[0]["speculative_algorithm"]])
def test_resolved_params_equal_sglang(entry: dict) -> None:
    args = entry["server_args"]
    target = bundled_shape(_reference(entry["config"]))
    spec = read_speculative(args["speculative_algorithm"], args.get("speculative_draft_model_path"),
                            args.get("speculative_num_steps"), args.get("speculative_eagle_topk"),
                            args.get("speculative_num_draft_tokens"))  # fmt: skip
    assert spec is not None
    assert resolved_params(spec, target) == (
        entry["speculative_num_steps"], entry["speculative_eagle_topk"],
        entry["speculative_num_draft_tokens"],
    )  # fmt: skip


def _request(model_ref: str, **kw) -> EngineRequest:
    return EngineRequest(model=bundled_shape(model_ref), max_model_len=4096,
                         available_kv_bytes=20 * GIB, gpu_memory_bytes=H100_BYTES, **kw)  # fmt: skip


@pytest.mark.parametrize(
    ("algorithm", "code"),
    [("DFLASH", "speculative-not-modelled"), ("FROZEN_KV_MTP", "speculative-not-modelled"),
     ("MEDUSA", "invalid-speculative-config")],
)  # fmt: skip
def test_other_algorithms_refused_by_name(algorithm: str, code: str) -> None:
    with pytest.raises(InputError) as exc:
        read_speculative(algorithm, None, None, None, None)
    assert exc.value.code == code and algorithm in exc.value.message


def test_hybrid_target_nextn_is_its_own_mtp_layer() -> None:
    """Qwen3-Next NEXTN without a draft path: SGLang's draft worker reads the target's own
    checkpoint as its MTP form (one layer), which the target's pool does not price; the state split
    is checked in test_sglang_speculative_hybrid."""
    target = bundled_shape("Qwen/Qwen3-Next-80B-A3B-Thinking")
    spec = read_speculative("NEXTN", None, None, None, None)
    assert spec is not None
    draft = SGLANG.speculative_draft(target, spec, tensor_parallel_size=4, pipeline_parallel_size=1)
    assert (draft.num_layers, draft.pool_layers, draft.num_draft_tokens) == (1, 0, 4)


def test_nextn_needs_a_draft_path_outside_sglangs_list() -> None:
    """``_handle_eagle_family`` names the draft for DeepSeek/GLM/...; Llama has no MTP layers."""
    spec = read_speculative("NEXTN", None, None, None, None)
    assert spec is not None
    with pytest.raises(InputError, match="_handle_eagle_family") as exc:
        SGLANG.speculative_draft(bundled_shape("meta-llama/Llama-3.1-8B"), spec,
                                 tensor_parallel_size=1, pipeline_parallel_size=1)  # fmt: skip
    assert "--speculative-draft-model-path" in (exc.value.hint or "")


def test_topk_without_steps_is_sglangs_assertion() -> None:
    spec = read_speculative("EAGLE3", "x", None, 4, None)
    assert spec is not None
    with pytest.raises(InputError, match="assertion"):
        resolved_params(spec, bundled_shape("meta-llama/Llama-3.1-8B"))


def test_dp_attention_refusals_in_sglangs_words() -> None:
    with pytest.raises(InputError, match="must be divisible by attn_dp_size"):
        SGLANG.plan_kv_cache(_request("meta-llama/Llama-3.1-70B", tensor_parallel_size=8,
                                      attention_data_parallel_size=3))  # fmt: skip
    target = bundled_shape("deepseek-ai/DeepSeek-V3")
    spec = read_speculative("NGRAM", None, None, None, None)
    assert spec is not None
    draft = SGLANG.speculative_draft(target, spec, tensor_parallel_size=8, pipeline_parallel_size=1)
    with pytest.raises(
        InputError, match="ngram speculative decoding does not support dp attention"
    ):
        SGLANG.plan_kv_cache(_request("deepseek-ai/DeepSeek-V3", tensor_parallel_size=8,
                                      attention_data_parallel_size=8, speculative=draft))  # fmt: skip


def test_ngram_adds_no_draft_kv_and_caps_at_48() -> None:
    """NGRAM: no draft model; 20 GiB / 131,072 B = 163,840 tokens (recorded), 48 running."""
    target = bundled_shape("meta-llama/Llama-3.1-8B")
    spec = read_speculative("NGRAM", None, None, None, None)
    assert spec is not None
    draft = SGLANG.speculative_draft(target, spec, tensor_parallel_size=1, pipeline_parallel_size=1)
    assert draft.num_layers == 0 and draft.lookahead_tokens == 0
    plan = SGLANG.plan_kv_cache(_request("meta-llama/Llama-3.1-8B", speculative=draft))
    assert (plan.kv_cache_tokens, plan.max_num_seqs, plan.draft_kv_bytes_per_token) == (
        163840,
        48,
        0,
    )


def test_flags_command_and_deployment_file_agree(cli, tmp_path):
    """DeepSeek-V3 TP 8, DP attention 8, NEXTN at 20 GiB: 300,666 tokens per rank (recorded),
    48 // 8 = 6 running per rank, 8 pools; the same from flags, a command and a file."""
    command = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
               "--enable-dp-attention --dp 8 --speculative-algorithm NEXTN --context-length 32000")  # fmt: skip
    common = ("--gpu", "H200", "--kv-cache-memory", "20GiB", "--weights-memory", "80GiB", "--json",
              "--no-throughput")  # fmt: skip
    pasted = cli("plan", "--from-command", command, *common)
    # SGLang 0.5.23's own spelling: --attn-dp-size 8 is what the deprecated pair resolves to
    respelled = cli("plan", "--from-command",
                    command.replace("--enable-dp-attention --dp 8", "--attn-dp-size 8"), *common)  # fmt: skip
    typed = cli("plan", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "-tp", "8", "-dp", "8",
                "--enable-dp-attention", "--spec-method", "NEXTN", "--max-model-len", "32000",
                *common)  # fmt: skip
    spec = tmp_path / "d.yaml"
    spec.write_text(
        "deployments:\n  - model: deepseek-ai/DeepSeek-V3\n    engine: sglang\n    gpu: H200\n"
        "    tensor_parallel_size: 8\n    data_parallel_size: 8\n    enable_dp_attention: true\n"
        "    spec_method: NEXTN\n    max_model_len: 32000\n    kv_cache_memory: 20GiB\n"
        "    weights_memory: 80GiB\n"
    )
    filed = cli("check", str(spec), "--format", "json")
    assert pasted.exit_code == respelled.exit_code == typed.exit_code == filed.exit_code == 0
    for d in (pasted.json, respelled.json, typed.json, json.loads(filed.stdout)[0]):
        assert (d["kv_cache_tokens"], d["max_num_seqs"], d["data_parallel_replicas"]) == (
            300666,
            6,
            8,
        )
        assert d["kv_bytes_per_token"] == 71424  # 70,272 + int(70,272 / 61)
        assert d["speculative"]["draft_layers"] == 1
        assert d["speculative"]["num_speculative_tokens"] == 3  # (3, 1, 4) for DeepSeek-V3


def test_dp_attention_needs_the_weights(cli):
    r = cli("plan", "deepseek-ai/DeepSeek-V3", "--engine", "sglang", "-tp", "8", "-dp", "8",
            "--enable-dp-attention", "--gpu", "H200")  # fmt: skip
    assert r.exit_code == 2 and "unsupported-parallelism" in r.stderr
    assert "--weights-memory" in r.stderr


@pytest.mark.parametrize(
    ("target", "method", "draft"),
    [("meta-llama/Llama-4-Scout-17B-16E-Instruct", "STANDALONE", "llama-3.2-1b-instruct"),
     ("openai/gpt-oss-20b", "NGRAM", None)],
)  # fmt: skip
def test_drafts_on_windowed_targets_refused(cli, target: str, method: str, draft) -> None:
    """Llama 4's chunked layers and gpt-oss's sliding ones are hybrid-SWA pools in SGLang, which
    sizes a draft's layers in both pools; kvcalc does not model that split (the harness builds no
    draft worker), so it refuses rather than price the draft as full attention."""
    args = ["plan", target, "--engine", "sglang", "--gpu", "H100-80GB", "--tensor-parallel-size",
            "8", "--spec-method", method, "--kv-cache-memory", "20GiB"]  # fmt: skip
    r = cli(*args, *(["--spec-model", draft] if draft else []))
    assert r.exit_code == 2
    assert "error[speculative-not-modelled]" in r.stderr and "chunked-attention" in r.stderr
