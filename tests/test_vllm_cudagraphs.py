"""Which CUDA graphs vLLM captures: kvcalc's rules against what vLLM 0.33.0's own code computed.

``fixtures/vllm_0_33/cudagraph_captures.json`` holds, per scenario, the capture sizes vLLM's config
wrote back, the graph mode its attention backends resolved to, and every descriptor runner V1
(``CudagraphDispatcher``) and runner V2 (``CudaGraphManager``) would capture (its ``_source`` says
how it was recorded).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bundled_shape
from hypothesis import assume, given
from hypothesis import strategies as st

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.engines.vllm.cudagraphs import (
    GraphMode,
    GraphSupport,
    capture_sizes,
    descriptors,
    model_max_size,
    parse_graph_mode,
    resolve_mode,
    spec_decode_sizes,
    vllm_cudagraph_captures,
)
from kvcalc.engines.vllm.graph_defaults import default_runner_v2, graph_support
from kvcalc.errors import InputError
from kvcalc.model.gpus import get_gpu
from kvcalc.units import GIB

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "cudagraph_captures.json"
SCENARIOS = json.loads(FIXTURE.read_text())["scenarios"]
V033 = (0, 33)
ARCHITECTURES = {"openai/gpt-oss-20b": ("GptOssForCausalLM",)}


def _ids(sc):
    return sc["name"]


def _inputs(sc):
    """The numbers kvcalc is given: vLLM's resolved batch sizes, the user's graph settings."""
    given_ = sc["given"]
    cfg = sc.get("config", {})
    mode = given_.get("cudagraph_mode")
    sizes, max_size = (
        given_.get("cudagraph_capture_sizes"),
        given_.get("max_cudagraph_capture_size"),
    )
    return dict(
        model_max=model_max_size(ARCHITECTURES.get(sc["model"], ())),  # the gpt-oss hook
        max_num_seqs=cfg.get("max_num_seqs", given_.get("max_num_seqs", 1024)),
        max_num_batched_tokens=cfg.get("max_num_batched_tokens",
                                       given_.get("max_num_batched_tokens", 8192)),
        blackwell=sc["compute_capability"][0] == 10,
        enforce_eager=given_.get("enforce_eager", False),
        num_speculative_tokens=given_.get("num_speculative_tokens", 0),
        sizes=sizes,
        max_size=max_size,
        mode=GraphMode(mode) if mode else None,
    )  # fmt: skip


def test_fixture_covers_the_brief():
    """Default H100/A100/L4/B200, max_num_seqs 1/8/100/256/1024, sizes, modes, speculation, eager."""
    names = {s["name"] for s in SCENARIOS}
    assert len(SCENARIOS) >= 20
    for gpu in ("h100", "a100", "l4", "b200"):
        assert f"{gpu}-default-api" in names
        assert {f"{gpu}-seqs{n}" for n in (1, 8, 100, 256, 1024)} <= names
    assert {"h100-eager", "h100-sizes-explicit", "h100-max-size-64", "h100-ngram3",
            "h100-mode-FULL_DECODE_ONLY", "b200-llama4-scout"} <= names  # fmt: skip


@pytest.mark.parametrize("sc", [s for s in SCENARIOS if "config" in s], ids=_ids)
def test_capture_sizes_equal_vllm(sc):
    """``_set_cudagraph_sizes``: the list vLLM's config wrote back, element for element."""
    inputs = _inputs(sc)
    cfg = sc["config"]
    if inputs["enforce_eager"] or cfg["cudagraph_mode"] == "NONE":
        assert cfg["cudagraph_capture_sizes"] == []
        return
    sizes = capture_sizes(
        V033, max_num_seqs=inputs["max_num_seqs"],
        max_num_batched_tokens=inputs["max_num_batched_tokens"],
        decode_query_len=cfg["uniform_decode_query_len"], blackwell=inputs["blackwell"],
        sizes=inputs["sizes"], max_size=inputs["max_size"], model_max=inputs["model_max"],
    )  # fmt: skip
    assert list(sizes) == cfg["cudagraph_capture_sizes"]
    assert sizes[-1] == cfg["max_cudagraph_capture_size"]


@pytest.mark.parametrize("sc", [s for s in SCENARIOS if "config" in s], ids=_ids)
@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_captures_equal_vllm(sc, runner):
    """Mode, graph counts and largest descriptors per runner, as vLLM's dispatcher/manager hold them."""
    support = GraphSupport[sc.get("attention", {}).get("min_support", "UNIFORM_BATCH")]
    got = vllm_cudagraph_captures(V033, **_inputs(sc), support=support, runner_v2=runner == "v2")
    want = sc[runner]
    if want["mode"] == "NONE":  # eager: nothing; mode NONE: a record of no graphs
        assert (got is None) if sc["given"].get("enforce_eager") else (got.total_graphs == 0)
        return
    assert got is not None
    assert got.source.startswith(want["mode"])
    assert got.piecewise_graphs == len(want["PIECEWISE"])
    assert got.full_graphs == len(want["FULL"])
    assert got.largest_piecewise_tokens == max(want["PIECEWISE"], default=0)
    assert got.largest_full_tokens == max(want["FULL"], default=0)


@pytest.mark.parametrize("sc", [s for s in SCENARIOS if "config" in s and s["v2"]["mode"] != "NONE"],
                         ids=_ids)  # fmt: skip
@pytest.mark.parametrize("runner", ["v1", "v2"])
def test_descriptor_lists_equal_vllm(sc, runner):
    """Every descriptor's tokens, largest first: the order vLLM captures (and samples) them."""
    cfg, want = sc["config"], sc[runner]
    q = cfg["uniform_decode_query_len"]
    sizes = cfg["cudagraph_capture_sizes"]
    mode = GraphMode(want["mode"])
    if runner == "v1" and mode.full_decode and q > 1:
        sizes = spec_decode_sizes(sizes, q)
    pw, full = descriptors(mode, sizes, max_num_seqs=cfg["max_num_seqs"], decode_query_len=q,
                           runner_v2=runner == "v2")  # fmt: skip
    assert list(pw) == want["PIECEWISE"]
    assert list(full) == want["FULL"]


@pytest.mark.parametrize("sc", [s for s in SCENARIOS if "refused" in s], ids=_ids)
def test_vllm_refusals_are_refused(sc):
    """Sizes and a different maximum, both given: vLLM's config refuses; so does kvcalc."""
    with pytest.raises(InputError) as err:
        vllm_cudagraph_captures(V033, **_inputs(sc))
    assert err.value.code == "invalid-cudagraph-setting"


@pytest.mark.parametrize("sc", [s for s in SCENARIOS if "attention" in s], ids=_ids)
def test_resolved_mode_equals_vllm(sc):
    """``resolve_cudagraph_mode_and_sizes`` with the recorded backend support (both runners agree)."""
    mode = GraphMode(sc["config"]["cudagraph_mode"])
    support = GraphSupport[sc["attention"]["min_support"]]
    got, _ = resolve_mode(mode, support, sc["config"]["uniform_decode_query_len"])
    assert got.value == sc["v1"]["mode"] == sc["v2"]["mode"]


# -- hand-computed -------------------------------------------------------------------------------
def test_default_h100_0_19_is_51_sizes():
    # H100 default max_num_seqs 1,024: ceiling min(1024·1·2, 512) = 512, 8,192 tokens > 512 so not
    # appended; [1, 2, 4] + 8..248 step 8 (31) + 256..512 step 16 (17) = 3 + 31 + 17 = 51 sizes.
    sizes = capture_sizes((0, 19), max_num_seqs=1024, max_num_batched_tokens=8192)
    assert len(sizes) == 51 and sizes[:4] == (1, 2, 4, 8) and sizes[-1] == 512
    got = vllm_cudagraph_captures((0, 19), max_num_seqs=1024, max_num_batched_tokens=8192,
                                  runner_v2=False)  # fmt: skip
    # FULL_AND_PIECEWISE: 51 PIECEWISE graphs, and a FULL decode graph for each size ≤ 1,024 · 1
    assert got is not None
    assert (got.piecewise_graphs, got.full_graphs) == (51, 51)
    assert (got.largest_piecewise_tokens, got.largest_full_tokens) == (512, 512)


def test_blackwell_ceiling_is_1024_from_0_28():
    # B200, 1,024 seqs: min(2048, 1024) = 1024 → 3 + 31 + (256..1024 step 16 = 49) = 83 sizes;
    # 0.27 capped every GPU at 512: 51.
    assert len(capture_sizes((0, 28), max_num_seqs=1024, max_num_batched_tokens=16384,
                             blackwell=True)) == 83  # fmt: skip
    assert len(capture_sizes((0, 27), max_num_seqs=1024, max_num_batched_tokens=16384,
                             blackwell=True)) == 51  # fmt: skip


def test_max_num_seqs_appended_from_0_31():
    # 100 seqs: ceiling 200 → [1, 2, 4] + 8..200 step 8 (25) = 28; 0.31 on adds 100 (off the
    # stride) as the widest decode batch: 29, and 100 FULL decode graphs would be 1..100: 16 sizes.
    old = capture_sizes((0, 30), max_num_seqs=100, max_num_batched_tokens=8192)
    new = capture_sizes((0, 31), max_num_seqs=100, max_num_batched_tokens=8192)
    assert (len(old), len(new)) == (28, 29) and 100 in new and 100 not in old
    got = vllm_cudagraph_captures((0, 31), max_num_seqs=100, max_num_batched_tokens=8192)
    assert got is not None and (got.piecewise_graphs, got.full_graphs) == (29, 16)


def test_max_num_batched_tokens_appended_from_0_21():
    # 512 seqs, 1,000 tokens, B200: ceiling min(1024, 1024, 1000) = 1000; grid to 992 is
    # 3 + 31 + 47 = 81, plus 1,000 itself (≤ the ceiling) = 82; before 0.21 not appended.
    assert len(capture_sizes((0, 33), max_num_seqs=512, max_num_batched_tokens=1000,
                             blackwell=True)) == 82  # fmt: skip
    assert len(capture_sizes((0, 20), max_num_seqs=300, max_num_batched_tokens=500)) == 3 + 31 + 16


def test_spec_decode_rounds_runner_v1_sizes():
    # q = 4: every size rounded up to a multiple of 4: 1, 2, 4 → 4; 8.. unchanged → 51 − 2 = 49
    sizes = capture_sizes(V033, max_num_seqs=128, max_num_batched_tokens=8192, decode_query_len=4)
    assert len(spec_decode_sizes(sizes, 4)) == 49
    v2 = vllm_cudagraph_captures(V033, max_num_seqs=128, max_num_batched_tokens=8192,
                                 num_speculative_tokens=3)  # fmt: skip
    # runner V2 keeps the 51 mixed sizes and rounds only the FULL decode ones: 49 (4..512)
    assert v2 is not None and (v2.piecewise_graphs, v2.full_graphs) == (51, 49)


def test_eager_and_none_capture_nothing():
    assert vllm_cudagraph_captures(V033, max_num_seqs=8, max_num_batched_tokens=8192,
                                   enforce_eager=True) is None  # fmt: skip
    none = vllm_cudagraph_captures(V033, max_num_seqs=8, max_num_batched_tokens=8192,
                                   mode=GraphMode.NONE)  # fmt: skip
    assert none is not None and none.total_graphs == 0 and none.source.startswith("NONE")


def test_chunked_local_attention_downgrades_to_piecewise():
    # Llama 4 (chunked local attention: NEVER) at 64 seqs: 19 PIECEWISE graphs (1..128), no FULL
    got = vllm_cudagraph_captures(V033, max_num_seqs=64, max_num_batched_tokens=8192,
                                  support=GraphSupport.NEVER)  # fmt: skip
    assert got is not None and (got.piecewise_graphs, got.full_graphs) == (19, 0)
    assert "FULL_AND_PIECEWISE given" in got.source
    with pytest.raises(InputError):
        vllm_cudagraph_captures(V033, max_num_seqs=64, max_num_batched_tokens=8192,
                                mode=GraphMode.FULL, support=GraphSupport.NEVER)  # fmt: skip


# -- properties and refusals ---------------------------------------------------------------------
@given(seqs=st.integers(1, 4096), tokens=st.integers(1, 65536), blackwell=st.booleans(),
       v2=st.booleans())  # fmt: skip
def test_counts_monotone_in_max_num_seqs(seqs, tokens, blackwell, v2):
    """Without speculative decoding and with a batch wider than the ceiling (the usual case), more
    sequences never mean fewer graphs before 0.31. From 0.31 an off-stride max_num_seqs is itself
    captured, so the next, on-stride one has one graph fewer at most (next test: vLLM's own)."""
    assume(tokens >= 2 * (seqs + 1))

    def total(version, n):
        got = vllm_cudagraph_captures(version, max_num_seqs=n, max_num_batched_tokens=tokens,
                                      blackwell=blackwell, runner_v2=v2)  # fmt: skip
        assert got is not None
        assert max(got.largest_piecewise_tokens, got.largest_full_tokens) <= tokens
        return got.piecewise_graphs, got.full_graphs

    low, high = total((0, 30), seqs), total((0, 30), seqs + 1)
    assert low[0] <= high[0] and low[1] <= high[1]
    low, high = total(V033, seqs), total(V033, seqs + 1)
    assert low[0] - 1 <= high[0] and low[1] - 1 <= high[1]


def test_counts_are_not_monotone_in_vllm_either():
    # q = 1, 447 → 448 seqs: 51 grid sizes to 512 plus 447 (off the 16-stride) = 52, then 51
    assert len(capture_sizes(V033, max_num_seqs=447, max_num_batched_tokens=8192)) == 52
    assert len(capture_sizes(V033, max_num_seqs=448, max_num_batched_tokens=8192)) == 51
    # q = 1, 4 tokens: 3 seqs append 3 (the widest decode batch, ≤ its ceiling 6) beside 1, 2, 4;
    # 4 seqs append 4, already there: 4 sizes → 3
    rec = {s["name"]: s for s in SCENARIOS}
    assert rec["h100-seqs3-tokens4"]["config"]["cudagraph_capture_sizes"] == [1, 2, 3, 4]
    assert rec["h100-seqs4-tokens4"]["config"]["cudagraph_capture_sizes"] == [1, 2, 4]
    # q = 4, 16 tokens: 3 seqs add the decode size 3·4 = 12 (the request grid ends at 3), 4 seqs
    # add 4, 8, 16, all on the grid: 6 sizes → 5 (vLLM's own lists, in the fixture)
    three, four = rec["h100-ngram3-seqs3-tokens16"], rec["h100-ngram3-seqs4-tokens16"]
    assert three["config"]["cudagraph_capture_sizes"] == [1, 2, 4, 8, 12, 16]
    assert four["config"]["cudagraph_capture_sizes"] == [1, 2, 4, 8, 16]
    for sc, pw in ((three, 6), (four, 5)):
        got = vllm_cudagraph_captures(V033, **_inputs(sc), support=GraphSupport.ALWAYS)
        assert got is not None and got.piecewise_graphs == pw == len(sc["v2"]["PIECEWISE"])


@given(sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=30), tokens=st.integers(1, 8192))
def test_given_sizes_are_kept_up_to_the_batch(sizes, tokens):
    got = capture_sizes(V033, max_num_seqs=256, max_num_batched_tokens=tokens, sizes=sizes)
    assert list(got) == sorted({s for s in sizes if s <= tokens})


@pytest.mark.parametrize("kwargs", [
    {"sizes": []}, {"sizes": [0, 8]}, {"sizes": [8, -1]}, {"sizes": [1.5]}, {"sizes": [True]},
    {"max_size": 0}, {"max_size": -4}, {"sizes": [1, 8, 64], "max_size": 32},
])  # fmt: skip
def test_bad_graph_settings_are_refused(kwargs):
    with pytest.raises(InputError) as err:
        vllm_cudagraph_captures(V033, max_num_seqs=64, max_num_batched_tokens=8192, **kwargs)
    assert err.value.code == "invalid-cudagraph-setting" and err.value.hint


@pytest.mark.parametrize("kwargs", [{"max_num_seqs": 0}, {"max_num_batched_tokens": -1},
                                    {"num_speculative_tokens": -1}])  # fmt: skip
def test_bad_numbers_are_refused(kwargs):
    args = {"max_num_seqs": 8, "max_num_batched_tokens": 8192, **kwargs}
    with pytest.raises(InputError):
        vllm_cudagraph_captures(V033, **args)


def test_modes_parse_as_vllm_spells_them():
    assert parse_graph_mode("full_and_piecewise") is GraphMode.FULL_AND_PIECEWISE
    assert parse_graph_mode(" Piecewise ") is GraphMode.PIECEWISE
    with pytest.raises(InputError) as err:
        parse_graph_mode("FULL_ONLY")
    assert err.value.code == "invalid-cudagraph-setting" and "FULL_DECODE_ONLY" in err.value.hint


# -- the engine: a plan's request → its graphs --------------------------------------------------
CATALOG = {"h100": "H100-80GB", "h200": "H200", "a100": "A100-80GB", "a100_40": "A100-40GB",
           "l4": "L4", "b200": "B200"}  # fmt: skip
VLLM = get_engine("vllm")


def _request(sc, **kw):
    gpu = get_gpu(CATALOG[sc["gpu"]])
    major, _, minor = gpu.compute_capability.partition(".")
    given_ = sc["given"]
    extra = {"usage_context": "llm"} if sc["usage_context"] == "llm" else {}
    sizes = given_.get("cudagraph_capture_sizes")
    tokens = given_.get("max_num_batched_tokens")
    cfg = sc.get("config", {})
    if tokens is None and cfg and cfg["max_num_batched_tokens"] == cfg["max_num_seqs"] * 4096:
        # vLLM (0.12 on) caps its default at max_num_seqs × max_model_len; kvcalc's batch
        # defaults do not yet, so the capped value is given as vLLM resolved it
        tokens = cfg["max_num_batched_tokens"]
    fields = dict(
        model=bundled_shape(sc["model"]), max_model_len=4096, available_kv_bytes=20 * GIB,
        gpu_memory_bytes=gpu.memory_bytes, gpu_name=gpu.device_name,
        gpu_compute_capability=(int(major), int(minor)), extra=extra,
        max_num_seqs=given_.get("max_num_seqs"),
        max_num_batched_tokens=tokens,
        enforce_eager=given_.get("enforce_eager", False),
        cudagraph_capture_sizes=tuple(sizes) if sizes else None,
        max_cudagraph_capture_size=given_.get("max_cudagraph_capture_size"),
        cudagraph_mode=given_.get("cudagraph_mode"),
    )  # fmt: skip
    return EngineRequest(**{**fields, **kw})


ENGINE_CASES = [s for s in SCENARIOS if "num_speculative_tokens" not in s["given"]]


@pytest.mark.parametrize("sc", ENGINE_CASES, ids=_ids)
def test_engine_captures_equal_vllm(sc):
    """From the plan's settings: vLLM's batch defaults for the GPU, the backends' support for the
    model, the gpt-oss hook and runner V2 (0.33's default) — as vLLM 0.33.0 built them."""
    request = _request(sc)
    if "refused" in sc:
        with pytest.raises(InputError):
            VLLM.cudagraph_captures(request)
        return
    cfg, want = sc["config"], sc["v2"]
    assert cfg["use_v2_model_runner"]
    assert VLLM.scheduler_defaults(request) == (cfg["max_num_batched_tokens"], cfg["max_num_seqs"])
    got = VLLM.cudagraph_captures(request)
    if want["mode"] == "NONE":
        assert (got is None) if request.enforce_eager else (got.total_graphs == 0)
        return
    assert got is not None and got.runner_v2
    assert got.source.startswith(want["mode"])
    assert (got.piecewise_graphs, got.full_graphs) == (len(want["PIECEWISE"]), len(want["FULL"]))
    assert got.largest_piecewise_tokens == max(want["PIECEWISE"], default=0)
    assert got.largest_full_tokens == max(want["FULL"], default=0)
    if "attention" in sc:
        support, _ = graph_support(request.model, request.gpu_compute_capability)
        assert support.name == sc["attention"]["min_support"]


def test_engine_default_h100_llama():
    # Llama-3.1-8B on an H100, vLLM 0.33 API server: 1,024 seqs, 8,192 tokens → 51 sizes 1-512,
    # FULL_AND_PIECEWISE: 51 PIECEWISE + 51 FULL decode graphs (all sizes ≤ 1,024 · 1)
    sc = next(s for s in SCENARIOS if s["name"] == "h100-default-api")
    got = VLLM.cudagraph_captures(_request(sc))
    assert got is not None and (got.piecewise_graphs, got.full_graphs) == (51, 51)
    assert got.source == "FULL_AND_PIECEWISE, model runner V2, 51 capture sizes 1-512"


@pytest.mark.parametrize(("version", "v2", "graphs"), [
    # 0.19: runner V1, 256 seqs on an A100 → ceiling 512: 51 sizes, 35 decode sizes ≤ 256
    ("0.19.0", False, (51, 35)),
    # 0.24: Llama on runner V2 (its architecture list), which estimates nothing before 0.29
    ("0.24.0", True, (51, 35)),
    # 0.11: step 8 to min(2 · 256, 512): 3 + 64 = 67 sizes, FULL_AND_PIECEWISE the default
    ("0.11.0", False, (67, 35)),
    # 0.10: 67 PIECEWISE graphs only (the 0.10.1.1 A100 records: "took 0.50 GiB")
    ("0.10.1", False, (67, 0)),
])  # fmt: skip
def test_engine_versions(version, v2, graphs):
    sc = next(s for s in SCENARIOS if s["name"] == "a100-default-api")
    got = VLLM.cudagraph_captures(_request(sc, engine_version=version))
    assert got is not None and got.runner_v2 is v2
    assert (got.piecewise_graphs, got.full_graphs) == graphs
    assert ("estimates no graph memory" in got.source) is (version == "0.24.0")


def test_engine_eager_v0_and_refusals():
    sc = next(s for s in SCENARIOS if s["name"] == "h100-default-api")
    assert VLLM.cudagraph_captures(_request(sc, engine_version="0.6")) is None
    with pytest.raises(InputError) as err:
        VLLM.cudagraph_captures(_request(sc, engine_version="0.11", max_cudagraph_capture_size=64))
    assert err.value.code == "invalid-cudagraph-setting" and "0.12" in err.value.message
    with pytest.raises(InputError):
        VLLM.cudagraph_captures(_request(sc, cudagraph_mode="FULL_ONLY"))


def test_runner_defaults_by_release():
    llama, qwen_moe = bundled_shape("llama-3.1-8b"), bundled_shape("qwen3-30b-a3b")
    nemotron = bundled_shape("nvidia-nemotron-3-nano-30b-a3b-bf16")
    assert [default_runner_v2(v, llama) for v in ((0, 21), (0, 22), (0, 23), (0, 25), (0, 29))] == [
        False, False, True, True, True]  # fmt: skip
    # an MoE off the lists stays on V1 until 0.29; a hybrid too
    assert not default_runner_v2((0, 28), qwen_moe) and default_runner_v2((0, 29), qwen_moe)
    assert not default_runner_v2((0, 26), nemotron) and default_runner_v2((0, 30), nemotron)


@pytest.mark.parametrize(("version", "sizes"), [
    # 0.12 on: gpt-oss's hook raises the maximum to 1024: 3 + 31 + (256..1024 by 16 = 49) = 83
    ("0.19.0", 83), ("0.33", 83),
    # 0.11: its hook writes 1, 2, 4, 8-248, 256-992 by 16: 3 + 31 + 47 = 81 ("from 67 to 81")
    ("0.11.0", 81),
])  # fmt: skip
def test_gpt_oss_hook(version, sizes):
    sc = next(s for s in SCENARIOS if s["name"] == "h100-default-api")
    request = _request(sc, model=bundled_shape("gpt-oss-20b"), engine_version=version)
    got = VLLM.cudagraph_captures(request)
    assert got is not None and got.piecewise_graphs == sizes
    assert "gpt-oss's maximum capture size" in got.source
