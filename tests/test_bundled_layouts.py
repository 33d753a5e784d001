"""Every bundled config parses, and its per-layer layout is pinned (hand-read from config.json)."""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.sources.bundled import bundled_models

# alias -> (layers, {kind: count}, kv heads of attention layers, head dim, window, bytes/token (auto),
#           state bytes/sequence)
EXPECTED = {
    # 28 layers · 2 (K,V) · 2 KV heads · 128 · 2 B (bf16) = 28,672
    "qwen2.5-1.5b": (28, {"full": 28}, 2, 128, None, 28_672, 0),
    # 80 · 2 · 8 · 128 · 2 = 327,680 (use_sliding_window false: sliding_window 131072 ignored)
    "qwen2.5-72b": (80, {"full": 80}, 8, 128, None, 327_680, 0),
    # 28 · 2 · 4 · 128 · 2 = 57,344
    "qwen2.5-7b": (28, {"full": 28}, 4, 128, None, 57_344, 0),
    # explicit head_dim 128 although hidden/heads = 1024/16 = 64: 28 · 2 · 8 · 128 · 2 = 114,688
    "qwen3-0.6b": (28, {"full": 28}, 8, 128, None, 114_688, 0),
    "qwen3-1.7b": (28, {"full": 28}, 8, 128, None, 114_688, 0),
    # 94 · 2 · 4 · 128 · 2 = 192,512
    "qwen3-235b-a22b": (94, {"full": 94}, 4, 128, None, 192_512, 0),
    # 48 · 2 · 4 · 128 · 2 = 98,304
    "qwen3-30b-a3b": (48, {"full": 48}, 4, 128, None, 98_304, 0),
    # 64 · 2 · 8 · 128 · 2 = 262,144
    "qwen3-32b": (64, {"full": 64}, 8, 128, None, 262_144, 0),
    # 36 · 2 · 8 · 128 · 2 = 147,456
    "qwen3-8b": (36, {"full": 36}, 8, 128, None, 147_456, 0),
    # 12 full (every 4th) · 2 · 2 · 256 · 2 = 24,576; 36 Gated DeltaNet layers ·
    # (conv 3·8,192·2 = 49,152 + state 32·128·128·2 = 1,048,576) = 36 · 1,097,728 = 39,518,208
    "qwen3-next-80b-a3b-thinking": (48, {"recurrent": 36, "full": 12}, 2, 256, None, 24_576, 39_518_208),
    # MQA: multi_query → 1 KV head, head 2048/16 = 128, no torch_dtype → served in bf16:
    # 24 · 2 · 1 · 128 · 2 = 12,288
    "gpt_bigcode-santacoder": (24, {"full": 24}, 1, 128, None, 12_288, 0),
    # MLA: 61 · (512 + 64) · 2 = 70,272
    "deepseek-v3": (61, {"mla": 61}, 1, 576, None, 70_272, 0),
    "kimi-k2-instruct": (61, {"mla": 61}, 1, 576, None, 70_272, 0),
    # sparse MLA: latent (512 + 64) · 2 = 1,152 B + indexer keys 128 + 128/128 · 4 = 132 B;
    # 78 · 1,284 = 100,152
    "glm-5": (78, {"mla": 78}, 1, 576, None, 100_152, 0),
    # Gemma 2: even layers slide (window 4096); 42 · 2 · 8 · 256 · 2 = 344,064
    "gemma-2-9b-it": (42, {"sliding": 21, "full": 21}, 8, 256, 4096, 344_064, 0),
    # Gemma 3: pattern 6 → layers 5, 11, 17, 23 full, 22 sliding (512); 26 · 2 · 1 · 256 · 2 = 26,624
    "gemma-3-1b-it": (26, {"sliding": 22, "full": 4}, 1, 256, 512, 26_624, 0),
    # MHA fp16: 40 · 2 · 40 · 128 · 2 = 819,200
    "llama-2-13b-hf": (40, {"full": 40}, 40, 128, None, 819_200, 0),
    # GQA-8: 80 · 2 · 8 · 128 · 2 = 327,680
    "llama-2-70b-hf": (80, {"full": 80}, 8, 128, None, 327_680, 0),
    # 32 · 2 · 32 · 128 · 2 = 524,288
    "llama-2-7b-hf": (32, {"full": 32}, 32, 128, None, 524_288, 0),
    # 126 · 2 · 8 · 128 · 2 = 516,096
    "llama-3.1-405b": (126, {"full": 126}, 8, 128, None, 516_096, 0),
    "llama-3.1-70b": (80, {"full": 80}, 8, 128, None, 327_680, 0),
    # 32 · 2 · 8 · 128 · 2 = 131,072
    "llama-3.1-8b": (32, {"full": 32}, 8, 128, None, 131_072, 0),
    # explicit head_dim 64: 16 · 2 · 8 · 64 · 2 = 32,768
    "llama-3.2-1b-instruct": (16, {"full": 16}, 8, 64, None, 32_768, 0),
    # an EAGLE-3 head: one Llama layer, 1 · 2 · 8 · 128 · 2 = 4,096
    "sglang-eagle3-llama3.1-instruct-8b": (1, {"full": 1}, 8, 128, None, 4_096, 0),
    # text_config; no_rope_layers absent → every 4th layer full: 36 chunked (8192) + 12 full;
    # 48 · 2 · 8 · 128 · 2 = 196,608
    "llama-4-scout-17b-16e-instruct": (48, {"chunked": 36, "full": 12}, 8, 128, 8192, 196_608, 0),
    # plain sliding_window 4096 on every layer: 32 · 2 · 8 · 128 · 2 = 131,072
    "mistral-7b-v0.1": (32, {"sliding": 32}, 8, 128, 4096, 131_072, 0),
    "mixtral-8x7b-v0.1": (32, {"full": 32}, 8, 128, None, 131_072, 0),
    # Nemotron-H: 6 '*' attention (2 KV heads × 128), 23 'M' Mamba2, 23 'E' MoE without cache;
    # 6 · 2 · 2 · 128 · 2 = 6,144; Mamba2: conv 3 · (64·64 + 2·8·128 = 6,144) · 2 = 36,864,
    # SSM 64 · 64 · 128 · 4 (fp32) = 2,097,152 → 23 · 2,134,016 = 49,082,368
    "nvidia-nemotron-3-nano-30b-a3b-bf16": (
        52, {"recurrent": 23, "none": 23, "full": 6}, 2, 128, None, 6_144, 49_082_368,
    ),
    # layer_types alternate sliding(128)/full; no torch_dtype → bf16: 36 · 2 · 8 · 64 · 2 = 73,728
    "gpt-oss-120b": (36, {"sliding": 18, "full": 18}, 8, 64, 128, 73_728, 0),
    # 24 · 2 · 8 · 64 · 2 = 49,152
    "gpt-oss-20b": (24, {"sliding": 12, "full": 12}, 8, 64, 128, 49_152, 0),
    # MHA, no torch_dtype → served in bf16: 12 · 2 · 12 · 64 · 2 = 36,864
    "gpt2": (12, {"full": 12}, 12, 64, None, 36_864, 0),
    # Qwen3.5 (text_config): every 4th layer full, 10 · 2 · 2 · 256 · 2 = 20,480; 30 Gated DeltaNet
    # layers · (conv 3 · (2·16·128 + 32·128 = 8,192) · 2 = 49,152 + fp32 state 32 · 128 · 128 · 4 =
    # 2,097,152) = 30 · 2,146,304 = 64,389,120
    "qwen3.5-35b-a3b": (40, {"recurrent": 30, "full": 10}, 2, 256, None, 20_480, 64_389_120),
    # 12 · 2 · 2 · 256 · 2 = 24,576; 36 · (3 · (4,096 + 8,192) · 2 = 73,728 + 64 · 128 · 128 · 4 =
    # 4,194,304) = 36 · 4,268,032 = 153,649,152
    "qwen3.5-122b-a10b": (48, {"recurrent": 36, "full": 12}, 2, 256, None, 24_576, 153_649_152),
    # Gemma 4: every 6th layer global; sliding (1,024) 50 · 2 · 16 · 256 · 2 = 819,200 + global
    # 10 · 2 · 4 · 512 · 2 = 81,920 → 901,120 (in the model dtype; vLLM's auto is fp8 here)
    "gemma-4-31b-it-nvfp4": (60, {"sliding": 50, "full": 10}, {16, 4}, {256, 512}, 1024, 901_120, 0),
    # text_config: 36 · 2 · 8 · 128 · 2 = 147,456
    "qwen3-vl-8b-instruct": (36, {"full": 36}, 8, 128, None, 147_456, 0),
}  # fmt: skip


def test_every_bundled_model_is_pinned():
    assert sorted(m.alias for m in bundled_models()) == sorted(EXPECTED)


@pytest.mark.parametrize("alias", sorted(EXPECTED))
def test_bundled_layout(alias):
    layers, kinds, kv_heads, head_dim, window, per_token, state = EXPECTED[alias]
    shape = bundled_shape(alias)
    assert shape.num_layers == layers
    counts: dict[str, int] = {}
    for layer in shape.layers:
        counts[layer.kind] = counts.get(layer.kind, 0) + 1
    assert counts == kinds
    attention = [lay for lay in shape.layers if lay.kind in ("full", "sliding", "chunked", "mla")]
    assert {lay.num_kv_heads for lay in attention} == (
        kv_heads if isinstance(kv_heads, set) else {kv_heads}
    )
    assert {lay.head_dim_k for lay in attention} == (
        head_dim if isinstance(head_dim, set) else {head_dim}
    )
    windows = {lay.window for lay in attention if lay.window is not None}
    assert windows == ({window} if window else set())
    assert shape.bytes_per_token == per_token
    assert shape.state_bytes_per_sequence == state


def test_which_layers_slide_gemma3():
    shape = bundled_shape("gemma-3-1b-it")
    full = [i for i, lay in enumerate(shape.layers) if lay.kind == "full"]
    assert full == [5, 11, 17, 23]


def test_which_layers_slide_gemma2():
    shape = bundled_shape("gemma-2-9b-it")
    sliding = [i for i, lay in enumerate(shape.layers) if lay.kind == "sliding"]
    assert sliding == list(range(0, 42, 2))


@pytest.mark.parametrize("alias", ["gpt-oss-20b", "gpt-oss-120b"])
def test_which_layers_slide_gpt_oss(alias):
    shape = bundled_shape(alias)
    assert [lay.kind for lay in shape.layers[:4]] == ["sliding", "full", "sliding", "full"]


def test_llama4_chunked_layers():
    shape = bundled_shape("llama-4-scout-17b-16e-instruct")
    full = [i for i, lay in enumerate(shape.layers) if lay.kind == "full"]
    assert full == list(range(3, 48, 4))


def test_qwen3_next_recurrent_layers_and_state():
    shape = bundled_shape("qwen3-next-80b-a3b-thinking")
    full = [i for i, lay in enumerate(shape.layers) if lay.kind == "full"]
    assert full == list(range(3, 48, 4))
    gdn = shape.layers[0]
    shapes = {t.name: (t.shape, t.dtype.name) for t in gdn.state_tensors()}
    # conv_dim = 128·16·2 + 128·32 = 8,192; kernel 4 keeps 3 columns
    assert shapes == {"conv": ((3, 8192), "bf16"), "ssm": ((32, 128, 128), "bf16")}
    assert gdn.state_bytes == 1_097_728


def test_nemotron_recurrent_layers_and_state():
    shape = bundled_shape("nvidia-nemotron-3-nano-30b-a3b-bf16")
    pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
    kinds = {"M": "recurrent", "E": "none", "*": "full"}
    assert [lay.kind for lay in shape.layers] == [kinds[c] for c in pattern]
    mamba = shape.layers[0]
    shapes = {t.name: (t.shape, t.dtype.name) for t in mamba.state_tensors()}
    assert shapes == {"conv": ((3, 6144), "bf16"), "ssm": ((64, 64, 128), "fp32")}
    assert mamba.state_bytes == 3 * 6144 * 2 + 64 * 64 * 128 * 4 == 2_134_016


@pytest.mark.parametrize("alias", ["deepseek-v3", "kimi-k2-instruct"])
def test_mla_models(alias):
    shape = bundled_shape(alias)
    assert shape.is_mla and shape.attention_kind == "MLA"
    layer = shape.layers[0]
    assert (layer.kv_lora_rank, layer.rope_dim) == (512, 64)
    # no separate K and V: one 576-wide latent per token per layer
    assert layer.bytes_per_token == 576 * 2
