"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of the 2026 attention families.

``fixtures/vllm_0_33/attention_families.json`` was recorded with the vLLM reference harness (vLLM's
``create_engine_config``, model construction on the meta device, the CUDA backend selector for an
emulated H100 and B200, spec collection, grouping and capacity code) over auto/fp8 × TP 1/8 ×
4,096/32,768 tokens × 20 GiB per GPU. Each model carries its config and where it came from. Block
size, blocks and tokens must be equal, concurrency within 0.005, the capacity line equal, and every
refusal refused for vLLM's reason (its error text and kvcalc's error code mapped to one class).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import harness_cases, harness_plan

from kvcalc.errors import KvcalcError

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "attention_families.json"
DATA = json.loads(FIXTURE.read_text())
#: scenarios that need the checkpoint's quantization to decide ``auto`` (its kv_cache_scheme → fp8)
QUANT_AUTO = {"nvidia--Gemma-4-31B-IT-NVFP4.json"}
CASES = harness_cases(DATA)


def _plan(name: str, row: dict):
    return harness_plan(DATA, name, row)


def reason_of(error: str) -> str:
    """vLLM's refusal as a class (the texts the fixture holds)."""
    if "does not support fp8 kv-cache" in error:  # the attention backend's kv_cache_dtype check
        return "dtype"
    if "are not supported for now" in error:  # model_executor/models/registry.py
        return "architecture"
    raise AssertionError(f"a vLLM refusal this test does not class: {error}")


def test_every_family_is_recorded():
    types = {
        m["config"].get("text_config", m["config"])["model_type"] for m in DATA["models"].values()
    }
    assert {"gemma4_text", "glm_moe_dsa", "deepseek_v32", "deepseek_v4", "mimo_v2_flash",
            "gemma3n_text", "step3p7", "kimi_k2", "minimax_m2", "qwen3_vl_text",
            "llama4_text"} <= types  # fmt: skip
    assert all(m["source"] for m in DATA["models"].values())


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if "error" in row:
        if "max seq len" in row["error"]:  # the fit check: kvcalc plans it and says it does not fit
            assert not _plan(name, row).fits
            return
        with pytest.raises(KvcalcError) as refused:
            _plan(name, row)
        # refused for vLLM's reason: its error text and kvcalc's code map to the same class
        assert (reason_of(row["error"]), refused.value.code) in {
            ("dtype", "unsupported-dtype"),  # "FlashAttention does not support fp8 kv-cache"
            ("architecture", "config-unverified"),  # "Model architectures [...] are not supported"
        }, (row["error"], refused.value.code)
        return
    if name in QUANT_AUTO and row["kv_cache_dtype"] == "auto":
        row = dict(row, kv_cache_dtype="fp8")  # the checkpoint's kv_cache_scheme makes auto fp8
    p = _plan(name, row)
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
        row["block_size"], row["num_blocks"], row["kv_cache_tokens"],
    )  # fmt: skip
    assert abs(p.max_concurrency - row["max_concurrency"]) < 0.005
    assert sorted(g.blocks_per_request for g in p.groups) == sorted(g[3] for g in row["groups"])
    assert row["log_line"] in p.log_lines
