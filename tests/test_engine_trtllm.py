"""TensorRT-LLM engine: 32-token blocks from 90 % of free memory (§5; block details unconfirmed)."""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.errors import InputError
from kvcalc.units import GIB

TRT = get_engine("trtllm")


def plan(model, max_model_len=8192, **kw):
    kw.setdefault("available_kv_bytes", 10 * GIB)
    return TRT.plan_kv_cache(EngineRequest(model=model, max_model_len=max_model_len, **kw))


def test_llama_blocks():
    p = plan(bundled_shape("llama-3.1-8b"))
    # 32 tokens · 131,072 B = 4 MiB per block; 10 GiB → 2,560 blocks = 81,920 tokens; 8,192 / 32 = 256
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (32, 2_560, 81_920)
    assert p.max_concurrency == 10.0 and p.fits
    assert any("unconfirmed" in n for n in p.notes)


def test_fp8_and_max_tokens():
    model = bundled_shape("llama-3.1-8b")
    assert plan(model, kv_cache_dtype="fp8").num_blocks == 5_120
    assert plan(model, extra={"max_tokens": 40_000}).num_blocks == 1_250  # 40,000 // 32


def test_does_not_fit_and_estimate():
    p = plan(bundled_shape("llama-3.1-8b"), 131072)
    # 4,096 blocks per request > 2,560; the longest: 2,560 · 32 = 81,920 tokens
    assert not p.fits and p.estimated_max_model_len == 81_920


def test_mla_latent_and_pp():
    p = plan(bundled_shape("deepseek-v3"), pipeline_parallel_size=2)
    # 61 layers over 2 stages: 31 + 30; the first stage holds 31 · 1,152 = 35,712 B per token
    assert p.kv_bytes_per_token == 35_712


def test_free_memory_fraction():
    assert TRT.default_gpu_memory_utilization(MemoryInputs()) == 0.9
    budget = TRT.available_kv_bytes(MemoryInputs(
        gpu_memory_bytes=80 * GIB, weights_bytes=16 * GIB, activation_bytes=2 * GIB,
        non_torch_bytes=GIB, cudagraph_bytes=GIB,
    ))  # fmt: skip
    assert budget == int(60 * GIB * 0.9)  # 90 % of the 60 GiB left after loading


def test_refusals():
    with pytest.raises(InputError) as err:
        plan(bundled_shape("llama-3.1-8b"), extra={"tokens_per_block": 48})
    assert err.value.code == "invalid-input"
    with pytest.raises(InputError) as err:
        plan(bundled_shape("llama-3.1-8b"), kv_cache_dtype="q4_0")
    assert err.value.code == "unsupported-dtype"


def test_nvfp4_and_int8():
    model = bundled_shape("llama-3.1-8b")
    blackwell = plan(model, kv_cache_dtype="nvfp4", gpu_compute_capability=(10, 0))
    # per head and side 128/2 B of fp4 + 128/16 fp8 block scales = 72 B; 32 · 8 · 2 · 72 = 36,864
    assert blackwell.kv_bytes_per_token == 36_864 and blackwell.kv_cache_dtype == "nvfp4"
    assert blackwell.num_blocks == 10 * GIB // (32 * 36_864)  # 9,102
    with pytest.raises(InputError) as err:  # NVFP4 KV is Blackwell-only
        plan(model, kv_cache_dtype="nvfp4", gpu_compute_capability=(9, 0))
    assert err.value.code == "unsupported-dtype"
    int8 = plan(model, kv_cache_dtype="int8")  # TensorRT-engine INT8 KV: per-tensor scales only
    assert int8.kv_cache_dtype == "int8_per_tensor" and int8.kv_bytes_per_token == 65_536
    assert any("TensorRT-engine backend only" in n for n in int8.notes)
    with pytest.raises(InputError) as err:
        plan(bundled_shape("deepseek-v3"), kv_cache_dtype="nvfp4")
    assert err.value.code == "unsupported-dtype"
