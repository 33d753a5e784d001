"""Gemma 4 (sliding layers 16 KV heads × 256, global layers 4 × 512) and KV sharing, vLLM 0.33.

Figures hand-computed from the published Gemma-4-31B config and checked against vLLM 0.33.0's own
sizing code (emulated H100 and B200, 20 GiB of KV memory per GPU, API-server defaults).
"""

from __future__ import annotations

import pytest
from helpers import fixture_config, fixture_shape
from verify_helpers import needs_torch

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.hfconfig import parse_config
from kvcalc.model.attention_layouts import SharedKV
from kvcalc.units import GIB

H100 = {
    "gpu_memory_bytes": 80 * GIB,
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_compute_capability": (9, 0),
}
B200 = {"gpu_memory_bytes": 180 * GIB, "gpu_name": "NVIDIA B200", "gpu_compute_capability": (10, 0)}
VLLM = get_engine("vllm")
NAME = "nvidia--Gemma-4-31B-IT-NVFP4"


@pytest.fixture(scope="module")
def gemma4():
    return fixture_shape(NAME)


def plan(model, gpu=H100, **kw):
    kw.setdefault("available_kv_bytes", 20 * GIB)
    kw.setdefault("max_model_len", 32768)
    return VLLM.plan_kv_cache(EngineRequest(model=model, **gpu, **kw))


def test_sliding_and_global_layers_differ(gemma4):
    kinds = [x.kind for x in gemma4.layers]
    assert kinds.count("sliding") == 50 and kinds.count("full") == 10
    sliding, full = gemma4.layers[0], gemma4.layers[5]
    # sliding: 16 KV heads × (256 + 256) × 2 B = 16,384 B; global: 4 × (512 + 512) × 2 B = 8,192 B
    assert (sliding.kv_heads, sliding.k_dim, sliding.window, sliding.bytes_per_token) == (
        16,
        256,
        1024,
        16384,
    )
    assert (full.kv_heads, full.k_dim, full.v_dim, full.bytes_per_token) == (4, 512, 512, 8192)
    assert gemma4.mm_prefix_attention  # use_bidirectional_attention = "vision"


def test_bf16_h100_doubles_the_global_block(gemma4):
    p = plan(gemma4, kv_cache_dtype="bfloat16")
    # pages at block 16: sliding 16·16·512·2 = 262,144 B, global 16·4·1,024·2 = 131,072 B → global
    # block 32; 5 sliding groups + 1 global group of 10 layers: 10 · 262,144 = 2,621,440 B per block;
    # 21,474,836,480 // 2,621,440 = 8,192 blocks
    assert p.block_size == 16
    assert [(g.kind, g.num_layers, g.block_size) for g in p.groups] == [("sliding", 10, 16)] * 5 + [
        ("full", 10, 32)
    ]
    assert p.num_blocks == 8192
    # at 32,768: sliding cdiv(min(1,023 + 2·8,192, 32,768), 16) + 1 = 1,089 per group, global
    # cdiv(32,768, 32) = 1,024: 5·1,089 + 1,024 = 6,469 blocks; 8,192 / 6,469 = 1.2663x → 41,495 tokens
    assert round(p.max_concurrency, 4) == round(8192 / 6469, 4)
    assert p.kv_cache_tokens == 41_495


def test_fp8_h100_block_64(gemma4):
    p = plan(gemma4, kv_cache_dtype="fp8")
    # FA4's FP8 kernel for 512-wide heads: block 64; sliding 64·16·512 = 524,288 B, global block 128;
    # 10 · 524,288 = 5,242,880 B per block → 4,096 blocks; per request 5·(cdiv(17,407, 64) + 1) +
    # cdiv(32,768, 128) = 5·273 + 256 = 1,621 → 2.5268x, 82,799 tokens
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (64, 4096, 82_799)
    assert "Setting kv cache block size to 64 for TRITON_FLASH_ATTN backend(s)." in p.log_lines


@pytest.mark.parametrize("dtype", ["fp8", "bfloat16"])
def test_b200_block_64_and_twice_the_batch(gemma4, dtype):
    p = plan(gemma4, gpu=B200, kv_cache_dtype=dtype, max_model_len=4096)
    # TRITON_FLASHINFER (SM 10, image-prefix attention): block 64 whatever the dtype
    assert p.block_size == 64
    assert p.max_num_batched_tokens == 16384


def test_b200_fp8_at_32k(gemma4):
    p = plan(gemma4, gpu=B200, kv_cache_dtype="fp8")
    # 2 · 16,384 tokens in flight: sliding cdiv(min(1,023 + 32,768, 32,768), 64) + 1 = 513 per group;
    # 5·513 + 256 = 2,821 blocks per request; 4,096 / 2,821 = 1.4520x → 47,578 tokens
    assert (p.num_blocks, p.kv_cache_tokens) == (4096, 47_578)


def test_kv_shared_layers_are_not_charged():
    raw = fixture_config(NAME)
    text = dict(raw["text_config"], num_kv_shared_layers=12)
    shape = parse_config(dict(raw, text_config=text), name="gemma4-shared")
    shared = [i for i, x in enumerate(shape.layers) if isinstance(x, SharedKV)]
    assert shared == list(range(48, 60))
    # layer 53 (global) reads layer 47's cache (the last global layer before 48), 52 reads 46
    assert shape.layers[53].source_layer == 47 and shape.layers[52].source_layer == 46
    # 48 layers left: 40 sliding · 16,384 + 8 global · 8,192 = 720,896 B per token
    assert shape.bytes_per_token == 40 * 16384 + 8 * 8192 == 720_896


@needs_torch
def test_hf_engine_matches_transformers_cache():
    """transformers' own DynamicCache for a 12-layer Gemma 4 (two of them sharing), 10 tokens: the
    bytes per token each layer holds equal the hf engine's layouts (16,384 sliding, 8,192 global, 0
    for the sharing layers)."""
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    text = dict(fixture_config(NAME)["text_config"])
    text.pop("model_type")
    text.update(
        num_hidden_layers=12, layer_types=text["layer_types"][:12], hidden_size=64,
        intermediate_size=64, vocab_size=512, vocab_size_per_layer_input=512,
        num_attention_heads=16, num_kv_shared_layers=2, hidden_size_per_layer_input=16,
    )  # fmt: skip
    config = Gemma4TextConfig(**text)
    config._attn_implementation = "eager"
    model = Gemma4ForCausalLM(config).to(torch.bfloat16).eval()
    with torch.no_grad():
        cache = model(torch.randint(0, 500, (1, 10)), use_cache=True).past_key_values
    measured = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        held = 0 if keys is None or not hasattr(keys, "numel") else (
            keys.numel() * keys.element_size() + values.numel() * values.element_size()
        )  # fmt: skip
        measured.append(held // 10)
    raw = {"architectures": ["Gemma4ForCausalLM"], **text, "model_type": "gemma4_text"}
    shape = parse_config(raw, name="g4")
    assert measured == [x.bytes_per_token for x in shape.layers]
    assert measured[-2:] == [0, 0] and measured[5] == 8192
