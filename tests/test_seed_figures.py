"""The seed figures of the core issue, hand-computed."""

from __future__ import annotations

from helpers import bundled_shape

from kvcalc.model.dtypes import FP8, parse_cache_dtype
from kvcalc.units import GIB


def test_llama2_13b_fp16():
    shape = bundled_shape("llama-2-13b-hf")
    # 2 (K,V) · 40 layers · 40 heads · 128 · 2 B (fp16) = 819,200 B per token
    assert shape.dtype.name == "fp16"
    assert shape.bytes_per_token == 819_200
    # 4,096 tokens: 819,200 · 4,096 = 3,355,443,200 B ≈ 3.36 GB (3.125 GiB), the "≈ 3.2 GB" figure
    assert shape.bytes_for(4096) == 3_355_443_200


def test_llama2_70b_gqa():
    shape = bundled_shape("llama-2-70b-hf")
    # 2 · 80 · 8 · 128 · 2 = 327,680 B (320 KiB); 4k: 1,342,177,280 B ≈ 1.3 GB
    assert shape.bytes_per_token == 327_680
    assert shape.bytes_for(4096) == 1_342_177_280


def test_qwen3_17b():
    # 2 · 28 · 8 · 128 · 2 = 114,688
    assert bundled_shape("qwen3-1.7b").bytes_per_token == 114_688


def test_llama31_70b_at_128k_is_40_gib():
    shape = bundled_shape("llama-3.1-70b")
    # 327,680 · 131,072 = 42,949,672,960 B = 40 GiB exactly
    assert shape.bytes_for(131_072) == 40 * GIB


def test_deepseek_v3_latent_vs_mha_equivalent():
    shape = bundled_shape("deepseek-v3")
    # 61 · 576 · 2 = 70,272
    assert shape.bytes_per_token == 61 * 576 * 2 == 70_272
    # the MHA equivalent caches 128 heads · (192 K + 128 V) · 2 B per layer: 61 · 81,920 = 4,997,120
    layer = shape.layers[0]
    mha = (
        shape.num_layers
        * layer.num_heads
        * (layer.qk_nope_dim + layer.rope_dim + layer.v_head_dim)
        * 2
    )
    assert mha == 4_997_120
    assert mha / shape.bytes_per_token > 71


def test_mqa_one_kv_head():
    shape = bundled_shape("gpt_bigcode-santacoder")
    assert {lay.num_kv_heads for lay in shape.layers} == {1}
    assert shape.attention_kind == "MQA"


def test_llama31_8b():
    shape = bundled_shape("llama-3.1-8b")
    assert shape.bytes_per_token == 131_072
    # fp8 halves it: 32 · 2 · 8 · 128 · 1 = 65,536
    assert shape.with_cache_dtype(FP8).bytes_per_token == 65_536
    # int8 with per-token-head fp32 scales: 32 · 8 · 2 · (128 + 4) = 67,584
    assert (
        shape.with_cache_dtype(parse_cache_dtype("int8_per_token_head")).bytes_per_token == 67_584
    )
    # nvfp4: 32 · 8 · 2 · (64 + 8) = 36,864
    assert shape.with_cache_dtype(parse_cache_dtype("nvfp4")).bytes_per_token == 36_864
    # llama.cpp q8_0: 32 · 8 · 2 · (4 blocks · 34 B) = 69,632; q4_0: 32 · 8 · 2 · 4 · 18 = 36,864
    assert shape.with_cache_dtype(parse_cache_dtype("q8_0")).bytes_per_token == 69_632
    assert shape.with_cache_dtype(parse_cache_dtype("q4_0")).bytes_per_token == 36_864


def test_windows_cap_per_sequence():
    shape = bundled_shape("gemma-3-1b-it")
    # at 32,768 tokens: 4 full layers hold all, 22 sliding hold 512; per layer 2·1·256·2 = 1,024 B
    # 4 · 32,768 · 1,024 + 22 · 512 · 1,024 = 134,217,728 + 11,534,336 = 145,752,064
    assert shape.bytes_for(32_768) == 145_752_064
    # below the window every layer holds every token
    assert shape.bytes_for(100) == 26 * 100 * 1_024


def test_recurrent_state_is_constant_per_sequence():
    shape = bundled_shape("qwen3-next-80b-a3b-thinking")
    # 12 full layers · 2 · 2 · 256 · 2 = 24,576 B/token; + 36 · 1,097,728 B state
    assert shape.bytes_for(1) == 24_576 + 39_518_208
    assert shape.bytes_for(1000) == 1000 * 24_576 + 39_518_208
    assert shape.bytes_for(0) == 0
