"""vLLM 0.33's ``--mamba-cache-dtype`` / ``--mamba-ssm-cache-dtype``
(``kvcalc.engines.vllm.mamba_dtypes``) against vLLM's own sizing code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.planning.api import plan_reference
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
RECORDS = json.loads((ROOT / "tests/fixtures/vllm_0_33/mamba_dtypes.json").read_text())["records"]


REFERENCE = ROOT / "tests/fixtures/vllm_0_33/reference_configs.json"


def _plan(model: str, **kw):
    inputs = PlanInputs(gpu="H100-80GB", max_model_len=32768, kv_cache_memory_bytes=20 * GIB, **kw)
    if model.startswith("reference_configs.json:"):  # a config the reference fixtures carry
        name = model.partition(":")[2]
        m = json.loads(REFERENCE.read_text())["models"][name]
        shape = parse_config(m["config"], name=name, hf_quant_config=m.get("hf_quant_config"))
        return plan(shape, inputs, with_suggestions=False)
    return plan_reference(model, inputs, with_suggestions=False)


def test_fixture_has_a_flag_record_per_family():
    flagged = {r["model"] for r in RECORDS if r["engine_args"]}
    assert len(flagged) >= 2 and any("qwen3" in m.lower() for m in flagged)
    assert all("$VLLMENV" in r["command"] and "/work" not in r["command"] for r in RECORDS)


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r["name"])
def test_blocks_equal_vllms(rec):
    # the harness loads no weights (Qwen3-Next's 148 GiB would not fit one H100): give a small figure
    plan = _plan(rec["model"], weights_memory_bytes=GIB, **rec["engine_args"])
    assert plan.block_size == rec["block_size"]
    assert plan.num_blocks == rec["num_blocks"]
    assert plan.kv_cache_tokens == rec["gpu_kv_cache_size_tokens"]
    assert plan.log_lines[-1] == rec["capacity_log_line"]


def test_flag_wins_over_the_checkpoints_hook():
    # Qwen3.5's config says mamba_ssm_dtype float32; --mamba-ssm-cache-dtype bfloat16 wins (vLLM
    # warns and uses it): the state halves, so more blocks fit
    auto = _plan("qwen3.5-35b-a3b")
    bf16 = _plan("qwen3.5-35b-a3b", mamba_ssm_cache_dtype="bfloat16")
    assert bf16.num_blocks > auto.num_blocks
    assert any("state bf16" in n for n in bf16.notes)


def test_no_recurrent_layers_no_effect():
    plan = _plan("llama-3.1-8b", mamba_ssm_cache_dtype="bfloat16")
    assert plan.num_blocks == _plan("llama-3.1-8b").num_blocks
    assert any("no recurrent layers, no effect" in n for n in plan.notes)


def test_refusals():
    with pytest.raises(InputError) as err:
        _plan("qwen3.5-35b-a3b", mamba_ssm_cache_dtype="fp8")
    assert err.value.code == "invalid-input"
    with pytest.raises(InputError) as err:
        plan_reference("qwen3.5-35b-a3b", PlanInputs(gpu="H100-80GB", engine="sglang",
                                                     mamba_cache_dtype="float32"))  # fmt: skip
    assert err.value.code == "unmodelled-option"
