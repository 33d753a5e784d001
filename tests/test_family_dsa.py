"""DeepSeek Sparse Attention (GLM-5, DeepSeek-V3.2): MLA latent + fp8 indexer keys, vLLM 0.33.

Figures hand-computed from the published GLM-5 config (78 layers, kv_lora_rank 512,
qk_rope_head_dim 64, index_head_dim 128) and checked against vLLM 0.33.0's own sizing code on an
emulated H100 with 20 GiB of KV memory per GPU.
"""

from __future__ import annotations

import pytest
from helpers import bundled_shape, fixture_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.model.attention_layouts import SparseMLA
from kvcalc.units import GIB

H100 = {
    "gpu_memory_bytes": 80 * GIB,
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_compute_capability": (9, 0),
}
B200 = {"gpu_memory_bytes": 180 * GIB, "gpu_name": "NVIDIA B200", "gpu_compute_capability": (10, 0)}
VLLM = get_engine("vllm")


@pytest.fixture(scope="module")
def glm5():
    return bundled_shape("glm-5")


def plan(model, **kw):
    kw.setdefault("available_kv_bytes", 20 * GIB)
    kw.setdefault("max_model_len", 32768)
    return VLLM.plan_kv_cache(EngineRequest(model=model, **H100, **kw))


def test_every_layer_holds_latent_and_indexer_keys(glm5):
    assert glm5.num_layers == 78
    layer = glm5.layers[0]
    assert isinstance(layer, SparseMLA)
    # indexer: 128 fp8 values + 128 // 128 · 4 B of float32 scale = 132 B
    assert layer.indexer_bytes_per_token == 132
    # latent (512 + 64) · 2 B = 1,152 B; + 132 = 1,284 B per token per layer
    assert layer.bytes_per_token == 1284
    assert glm5.bytes_per_token == 78 * 1284 == 100_152


@pytest.mark.parametrize("tp", [1, 8])
def test_bf16_block_64_one_group(glm5, tp):
    p = plan(glm5, tensor_parallel_size=tp)
    # block 64 (the indexer backend supports only 64): 64 · 1,284 · 78 = 6,409,728 B per block,
    # the same on every TP rank (latent and indexer are replicated);
    # 21,474,836,480 // 6,409,728 = 3,350 blocks = 214,400 tokens; 3,350 / 512 = 6.54x at 32,768
    assert p.block_size == 64
    assert len(p.groups) == 1
    assert p.num_blocks == 3350
    assert p.kv_cache_tokens == 214_400
    assert round(p.max_concurrency, 4) == round(3350 / 512, 4)
    assert (
        "Setting kv cache block size to 64 for DEEPSEEK_V32_INDEXER/FLASH_ATTN_MLA_SPARSE backend(s)."
        in p.log_lines
    )


def test_fp8_is_served_as_fp8_ds_mla(glm5):
    p = plan(glm5, kv_cache_dtype="fp8", max_model_len=4096)
    # FLASHMLA_SPARSE: 656 B latent record + 132 B indexer = 788 B; 64 · 788 · 78 = 3,933,696 B
    # per block; 21,474,836,480 // 3,933,696 = 5,459 blocks = 349,376 tokens; 5,459 / 64 = 85.30x
    assert p.kv_cache_dtype == "fp8_ds_mla"
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (64, 5459, 349_376)
    assert round(p.max_concurrency, 4) == 85.2969


@pytest.mark.parametrize(
    ("gpu", "dtype", "blocks"),
    [
        # bf16: 64 · (1,152 + 132) · 61 = 5,012,736 B per block → 21,474,836,480 // it = 4,284
        ({**H100}, "auto", 4284),
        # fp8 on SM 9.x: fp8_ds_mla 64 · (656 + 132) · 61 = 3,076,352 B → 6,980 blocks
        ({**H100}, "fp8", 6980),
        # fp8 on SM 10.x: FLASHINFER_MLA_SPARSE keeps plain fp8: 64 · (576 + 132) · 61 = 2,764,032 B
        # → 7,769 blocks; DeepSeek-V3.2's auto stays bf16 there (GLM-5's does not)
        ({**B200}, "fp8", 7769),
        ({**B200}, "auto", 4284),
    ],
)
def test_deepseek_v32(gpu, dtype, blocks):
    shape = fixture_shape("deepseek-ai--DeepSeek-V3.2")
    p = VLLM.plan_kv_cache(
        EngineRequest(model=shape, kv_cache_dtype=dtype, max_model_len=4096,
                      available_kv_bytes=20 * GIB, **gpu)
    )  # fmt: skip
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (64, blocks, blocks * 64)


def test_glm5_auto_is_fp8_on_b200(glm5):
    p = VLLM.plan_kv_cache(
        EngineRequest(model=glm5, max_model_len=4096, available_kv_bytes=20 * GIB, **B200)
    )
    # GlmMoeDsaForCausalLM on SM 10.x: auto → fp8_e4m3: 64 · (576 + 132) · 78 = 3,534,336 B → 6,076
    assert (p.kv_cache_dtype, p.num_blocks) == ("fp8", 6076)
