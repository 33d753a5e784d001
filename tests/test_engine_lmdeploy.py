"""LMDeploy (TurboMind): blocks of every layer, int4/int8 with per-token per-head scale and zero point.

Figures by hand from TurboMind's ``block::Layout`` and ``BlockManager::GetBlockCount`` (the engine
module's docstring says what is from source and what is unconfirmed; no real LMDeploy log exists in
the reference records, so the printed lines are checked against the format strings only).
"""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.engines.lmdeploy import default_max_batch_size
from kvcalc.errors import InputError
from kvcalc.units import GIB

LMD = get_engine("lmdeploy")


def plan(name="llama-3.1-8b", dtype="auto", available=int(20 * GIB * 0.8), **kw):
    extra = kw.pop("extra", {})
    return LMD.plan_kv_cache(EngineRequest(model=bundled_shape(name), kv_cache_dtype=dtype, max_model_len=kw.pop("L", 8192),
                                           available_kv_bytes=available, extra=extra, **kw))  # fmt: skip


def test_int4_worked_example():
    p = plan(dtype="int4")
    # 32 layers · 8 heads · 2 (K, V) · (128 · 4/8 + 2 · 2 B scale and zero) = 34,816 B a token
    assert p.kv_bytes_per_token == 34_816 and p.block_size == 64
    # a block of 64 tokens: 2,228,224 B; size_t(20 GiB · 0.8) / 2,228,224 = 7,710 blocks
    assert p.num_blocks == 7_710 and p.kv_cache_tokens == 493_440
    assert p.kv_cache_dtype == "turbomind_int4"
    assert p.log_lines == (
        "[BlockManager] block_size = 2 MB",  # 2,228,224 >> 20
        "[BlockManager] max_block_count = 7710",
        "[BlockManager] chunk_size = 7710",  # cache_chunk_size −1: one chunk
    )
    assert p.max_concurrency == pytest.approx(7_710 / 128)  # 8,192 tokens = 128 blocks


def test_int8_and_unquantized():
    assert plan(dtype="int8").kv_bytes_per_token == 32 * 8 * 2 * (128 + 4)  # 67,584
    bf16 = plan()
    assert bf16.kv_bytes_per_token == 131_072 and bf16.kv_cache_dtype == "bf16"  # no scale, no zero
    assert bf16.log_lines[0] == "[BlockManager] block_size = 8 MB"  # 64 · 131,072 B
    assert plan(extra={"quant_policy": 8}).kv_cache_dtype == "turbomind_int8"


def test_block_count_and_budget():
    assert plan(dtype="int4", extra={"cache_max_entry_count": 1000}).num_blocks == 1000
    assert (
        plan(dtype="int4", extra={"cache_block_seq_len": 128}).num_blocks == 3_855
    )  # 4,456,448 B a block
    # 0.8 of the memory free after the weights and the CUDA context
    assert LMD.available_kv_bytes(MemoryInputs(
        gpu_memory_bytes=80 * GIB, weights_bytes=16 * GIB, activation_bytes=2 * GIB, non_torch_bytes=GIB,
    )) == int(63 * GIB * 0.8)  # fmt: skip
    assert LMD.default_gpu_memory_utilization(MemoryInputs()) == 0.8
    tight = plan(dtype="int4", available=100 * 2_228_224, L=8192)
    assert not tight.fits and tight.estimated_max_model_len == 6_400  # 100 blocks of 64


def test_dtype_and_batch_defaults():
    gpt2 = plan("gpt2", L=1024)  # no torch_dtype: bf16 where the GPU runs it
    assert gpt2.kv_cache_dtype == "bf16"
    assert plan("gpt2", L=1024, gpu_compute_capability=(7, 5)).kv_cache_dtype == "fp16"
    assert default_max_batch_size("NVIDIA H100 80GB HBM3") == 1024
    assert default_max_batch_size("NVIDIA A100-SXM4-80GB") == 384
    assert default_max_batch_size("L40S") == 128
    assert plan(tensor_parallel_size=2).kv_bytes_per_token == 65_536  # 4 heads a rank


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"dtype": "fp8"}, "unsupported-dtype"),  # TurboMind refuses fp8 KV
        ({"extra": {"quant_policy": 16}}, "invalid-input"),
        ({"dtype": "int4", "extra": {"quant_policy": 8}}, "conflicting-options"),
        ({"name": "deepseek-v3"}, "unsupported-model"),  # MLA (head_dim 576) not modelled
        ({"name": "qwen3-next-80b-a3b-thinking"}, "unsupported-model"),  # linear attention
        ({"pipeline_parallel_size": 2}, "invalid-parallelism"),
        ({"tensor_parallel_size": 16}, "invalid-parallelism"),  # 8 KV heads
        ({"engine_version": "0.9"}, "unknown-engine-version"),
    ],
)
def test_refusals(kw, code):
    with pytest.raises(InputError) as err:
        plan(**kw)
    assert err.value.code == code
