"""``engines/sglang/mamba.py``: the survivors of a mutation run (docs/testing.md, "Mutation
testing") killed with SGLang 0.5.23's own state split, recorded in
``tests/fixtures/sglang_0_5_23/mamba_edges.json``: the SSM state dtype a config names
(``mamba2_state_dtype``: ``text_config.mamba_ssm_dtype``, then the top level, float32 when
absent), and the budgets where no slot, or too few slots for one request, fit (SGLang's two
``RuntimeError`` texts); beside them vLLM 0.33's reading of the same Qwen3-Next configs
(``tests/fixtures/vllm_0_33/qwen3_next_ssm_dtype.json``: no config hook, the model dtype).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import config_folder

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.hfconfig.families import all_families
from kvcalc.model.layouts import LayerKind
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB, MIB

HERE = Path(__file__).parent / "fixtures"
EDGES = json.loads((HERE / "sglang_0_5_23" / "mamba_edges.json").read_text())
VLLM = json.loads((HERE / "vllm_0_33" / "qwen3_next_ssm_dtype.json").read_text())
SHARED = Path(__file__).resolve().parents[1] / "model_configs"
H100_BYTES = EDGES["gpu"]["total_mib"] * MIB


def _config(name: str) -> dict:
    if name in EDGES["configs"]:
        return EDGES["configs"][name]
    return json.loads((SHARED / name).read_text())


def _sglang(entry: dict, **request):
    return get_engine("sglang").plan_kv_cache(
        EngineRequest(
            model=parse_config(_config(entry["config"]), name=entry["config"]),
            max_model_len=4096, tensor_parallel_size=entry["tp"],
            available_kv_bytes=int(entry["kv_memory_gib"] * GIB), gpu_memory_bytes=H100_BYTES,
            gpu_compute_capability=tuple(EDGES["gpu"]["cap"]), **request,
        )
    )  # fmt: skip


@pytest.mark.parametrize(
    "entry", EDGES["entries"], ids=lambda e: f"{e['config'][:-5]}-{e['kv_memory_gib']}GiB"
)
def test_the_state_split_equals_sglang(entry):
    plan = _sglang(entry)
    if entry["status"] == "ok":
        assert plan.refusal is None
        assert plan.kv_cache_tokens == entry["max_total_num_tokens"]
        assert plan.max_num_seqs == entry["max_running_requests"]
        state = next(g for g in plan.groups if g.kind is LayerKind.RECURRENT)
        assert state.num_blocks == entry["max_mamba_cache_size"]
        assert state.page_bytes * state.num_layers == entry["mamba_cache_per_req_bytes"]
        # a slot per request-block, its bytes spread over the recurrent layers (whole bytes)
        assert state.block_size == 1 and isinstance(state.page_bytes, int)
        assert state.page_bytes == entry["mamba_cache_per_req_bytes"] // state.num_layers
    else:
        # SGLang's RuntimeError, up to its advice ("Try: ...")
        assert plan.refusal == entry["error"].removeprefix("RuntimeError: ")
        assert not plan.fits


def test_a_bfloat16_state_halves_the_slot():
    # Qwen3.5-35B-A3B's 30 Gated DeltaNet layers: conv (2 · 16 · 128 + 32 · 128) · 3 · 2 B =
    # 49,152 B and state 32 heads · 128 · 128 · 4 B = 2,097,152 B (float32, published) a layer;
    # text_config.mamba_ssm_dtype bfloat16 (and float16) halves the state: 49,152 + 1,048,576 =
    # 1,097,728 B, × 30 = 32,931,840 B a slot (recorded); 20 GiB then holds 306 slots, 61 requests
    (bf16, fp16) = (e for e in EDGES["entries"] if e["config"].startswith("synthetic--qwen3.5"))
    assert (
        bf16["mamba_cache_per_req_bytes"]
        == fp16["mamba_cache_per_req_bytes"]
        == 30 * (49_152 + 32 * 128 * 128 * 2)
    )
    assert (bf16["max_mamba_cache_size"], bf16["max_running_requests"]) == (306, 61)


def test_one_request_fits_at_five_slots():
    # Qwen3-Next at 1 GiB: 1,073,741,824 · 0.9 / 1.9 = 508,616,127 B for the state; K =
    # int((508,616,127 − 77,266,944) // 77,266,944) = 5; 5 // (3 + 2) = 1 request; the KV pool
    # gets 1,073,741,824 − 6 · 77,266,944 = 610,140,160 B // 24,576 = 24,826 tokens (recorded)
    (entry,) = [e for e in EDGES["entries"] if e["kv_memory_gib"] == 1.0]
    assert entry["kv_budget_bytes"] == (1 << 30) - 6 * 77_266_944
    plan = _sglang(entry)
    assert (plan.max_num_seqs, plan.kv_cache_tokens) == (1, 24_826)


@pytest.mark.parametrize("entry", VLLM["entries"], ids=lambda e: e["config"][:-5])
def test_vllm_keeps_the_model_dtype_for_qwen3_next(entry):
    plan = plan_reference(
        config_folder(_config(entry["config"]), "kvcalc-qwen3-next-"),
        PlanInputs(gpu="H100-80GB", max_model_len=entry["max_model_len"],
                   kv_cache_memory_bytes=entry["kv_memory_gib"] * GIB),
    )  # fmt: skip
    assert (plan.block_size, plan.num_blocks, plan.kv_cache_tokens) == (
        entry["block_size"], entry["num_blocks"], entry["gpu_kv_cache_size_tokens"],
    )  # fmt: skip


def test_every_family_that_declares_mamba_ssm_dtype_reads_it():
    """SGLang's state dtype comes from ``config_keys``: a family that accepted the key without
    reading it would be planned in float32 whatever the config says."""
    declaring = [f for f in all_families() if "mamba_ssm_dtype" in f.keys]
    assert {f.name for f in declaring} == {"qwen3.5", "qwen3-next", "qwen4-exp"}
    # Qwen4-Exp (vLLM only): its Gated DeltaNet state in the config's float32 (recorded,
    # registry_families_2026_12c.json)
    later = json.loads((HERE / "vllm_0_33" / "registry_families_2026_12c.json").read_text())
    name = "synthetic--qwen4-exp-text-every-2nd-4-kv-fp32-ssm.json"
    model = parse_config(later["models"][name]["config"], name=name)
    assert model.config_keys.get("mamba_ssm_dtype") == "float32"
    assert {x.ssm_dtype.name for x in model.layers if hasattr(x, "ssm_dtype")} == {"fp32"}
    for name in ("synthetic--qwen3.5-35b-a3b-ssm-bfloat16.json",
                 "synthetic--qwen3-next-ssm-bfloat16.json"):  # fmt: skip
        keys = parse_config(_config(name), name=name).config_keys
        assert "bfloat16" in (keys.get("text_config.mamba_ssm_dtype"), keys.get("mamba_ssm_dtype"))


def test_hybrids_sglang_is_not_checked_for_are_refused():
    # a Qwen3-Next config without architectures: SGLang picks its model class by architecture,
    # and kvcalc checked the state split only for the classes named in SERVED_ARCHS
    config = {k: v for k, v in _config("Qwen--Qwen3-Next-80B-A3B-Thinking.json").items()
              if k != "architectures"}  # fmt: skip
    EDGES["configs"]["no-architectures"] = config
    try:
        with pytest.raises(InputError) as caught:
            _sglang({"config": "no-architectures", "tp": 1, "kv_memory_gib": 20})
    finally:
        del EDGES["configs"]["no-architectures"]
    assert caught.value.code == "unsupported-model"
    assert "(no architectures) is not checked against SGLang's sizing code" in caught.value.message


def test_the_state_split_under_pipeline_parallelism_is_refused():
    entry = next(e for e in EDGES["entries"] if e["config"].startswith("Qwen--Qwen3-Next"))
    with pytest.raises(InputError) as caught:
        _sglang(entry, pipeline_parallel_size=2)
    assert caught.value.code == "unsupported-model"
    assert "under pipeline parallelism" in caught.value.message


def test_one_slot_is_too_small_to_serve_a_request():
    # Qwen3-Next at 0.375 GiB: 402,653,184 · 0.9 / 1.9 = 190,730,455 B for the state; K =
    # int((190,730,455 − 77,266,944) // 77,266,944) = 1 slot, 1 // 5 = 0 requests: SGLang's
    # resolve_max_num_reqs raises its "too small to serve any requests" error (a slot exists;
    # mem_cache/kv_cache_configurator.py), not the "Not enough GPU memory" one (no slot)
    entry = {"config": "Qwen--Qwen3-Next-80B-A3B-Thinking.json", "tp": 1, "kv_memory_gib": 0.375}
    plan = _sglang(entry)
    assert plan.refusal == (
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        "max_mamba_cache_size=1, mamba_ratio=5, resulting max_num_reqs=0."
    )
