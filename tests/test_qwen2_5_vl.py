"""Qwen2.5-VL (``qwen2_5_vl``): the Qwen2 text stack at the top level of config.json and a windowed
ViT tower, counted as transformers builds it and split per TP rank as vLLM 0.8.3 loads it
(``model_executor/models/qwen2_5_vl.py``). Configs: ``tests/fixtures/configs/SOURCES.md``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fixture_config, fixture_shape

from kvcalc.estimate.tensors import inventory
from kvcalc.estimate.weights import count_parameters, weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB

NAMES = ("Qwen--Qwen2.5-VL-7B-Instruct", "Qwen--Qwen2.5-VL-72B-Instruct")


def _block(inter: int) -> int:
    """One tower block: qkv 3,840 × 1,280 + 3,840, proj 1,280² + 1,280, gate and up 2 × (inter ×
    1,280 + inter), down 1,280 × inter + 1,280, two RMSNorms 2 × 1,280."""
    return (3_840 * 1_280 + 3_840) + (1_280**2 + 1_280) + 2 * (inter * 1_280 + inter) + (
        1_280 * inter + 1_280) + 2 * 1_280  # fmt: skip


def test_vision_towers_hand_counted():
    # 32 blocks; patch embedding 1,280 × 3·2·14·14 = 1,505,280 (no bias); merger ln_q 1,280,
    # mlp.0 5,120² + 5,120, mlp.2 out × 5,120 + out
    # 7B: intermediate 3,420, out 3,584 → 630,470,400 + 1,505,280 + 44,574,464
    # 72B: intermediate 3,456, out 8,192 → 634,896,384 + 1,505,280 + 68,172,032
    for name, inter, out, total in ((NAMES[0], 3_420, 3_584, 676_550_144),
                                    (NAMES[1], 3_456, 8_192, 704_573_696)):  # fmt: skip
        merger = 1_280 + 5_120**2 + 5_120 + out * 5_120 + out
        assert 32 * _block(inter) + 1_505_280 + merger == total
        assert count_parameters(fixture_shape(name).weights).vision == total


def test_text_stack_is_qwen2():
    # 72B: 80 layers × 8 KV heads × 128 × (K + V) × 2 B = 327,680 B per token (320 KiB)
    model = fixture_shape(NAMES[1])
    assert len(model.layers) == 80
    assert {layer.kv_heads for layer in model.layers} == {8}
    assert sum(layer.bytes_per_token for layer in model.layers) == 80 * 8 * 128 * 2 * 2 == 327_680


def test_tower_per_rank_as_vllm_shards_it():
    # TP 4, per block: qkv 960 × 1,280 + 960 (column), proj 1,280 × 320 + 1,280 (row, bias whole),
    # gate/up 2 × (864 × 1,280 + 864), down 1,280 × 864 + 1,280, norms 2 × 1,280 → 4,963,968;
    # × 32 + patch 1,505,280 (whole) + ln_q 1,280 + mlp.0 1,280 × 5,120 + 1,280 + mlp.2 8,192 ×
    # 1,280 + 8,192 → 177,402,368 parameters, 354,804,736 B (0.33 GiB) per rank in bf16
    w = fixture_shape(NAMES[1]).weights
    per_rank = 0
    for t in inventory(w):
        if t.vision:
            rows, cols = t.shape_per_rank(4)
            per_rank += rows * cols * t.copies
    assert per_rank == 32 * 4_963_968 + 1_505_280 + 1_280 + 6_554_880 + 10_493_952 == 177_402_368


def test_72b_tp4_weights_per_gpu_against_the_log():
    # vllm-16570 (0.8.3, TP 4): "Model loading took 34.4340 GiB". kvcalc (vLLM 0.33's build, equal
    # to its meta build below): 34.31 GiB (text 33.86, tower 0.33, the MRoPE cache 128,000 × 4 ×
    # 128 × 2 B, the tower's RoPE 655,360 B); 0.12 GiB below the 0.8.3 log, not explained yet
    w = weight_bytes(fixture_shape(NAMES[1]), tensor_parallel_size=4)
    got = (w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu) / GIB
    assert round(got, 2) == 34.31
    assert 34.434 - got == pytest.approx(0.12, abs=0.01)


WEIGHTS = json.loads(
    (Path(__file__).parent / "fixtures/vllm_0_33/qwen2_5_vl_weights.json").read_text()
)["records"]


@pytest.mark.parametrize(
    "rec", WEIGHTS, ids=lambda r: f"{r['config'][5:-5]}-tp{r['tensor_parallel_size']}"
)
def test_weights_per_rank_equal_vllms_meta_build(rec):
    # vLLM 0.33's parameters and buffers per rank (deploy_probe.py), to the byte
    w = weight_bytes(
        fixture_shape(rec["config"][:-5]), tensor_parallel_size=rec["tensor_parallel_size"]
    )
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == rec["target_param_bytes_per_rank"]


def test_the_rope_caches_by_hand():
    # the published rope_scaling {"type": "mrope", "mrope_section": [16, 24, 24]}: vLLM's
    # MRotaryEmbedding caches 4 × max_position_embeddings rows (get_rope's default
    # mrope_positions_factor), 128,000 × 4 × 128 × 2 B = 131,072,000 B; the tower's get_rope(80,
    # max_position=8192, partial 0.5): 8,192 × 40 × 2 B = 655,360 B; the 28 attention layers'
    # four fp32 scales (_k/_v/_q/_prob_scale): 28 × 4 × 4 B = 448 B (vLLM's float32 bytes)
    shape = fixture_shape(NAMES[0])
    assert (shape.weights.rope_cache_positions, shape.weights.rotary_dim) == (128_000 * 4, 128)
    w = weight_bytes(shape, tensor_parallel_size=1)
    assert w.buffers_bytes_per_gpu == 128_000 * 4 * 128 * 2 + 8_192 * 40 * 2 + 448 == 131_727_808
    assert WEIGHTS[0]["target_by_dtype"]["torch.float32"] == 448
    # without mrope_section (a plain default RoPE) there is one row a position
    raw = fixture_config(NAMES[0])
    plain = parse_config(dict(raw, rope_scaling={"rope_type": "default"}), name="plain").weights
    assert plain.rope_cache_positions == 128_000


def test_vision_config_with_model_type_and_in_channels():
    # transformers 5 writes vision_config.model_type "qwen2_5_vl" and in_channels for in_chans
    raw = fixture_config(NAMES[0])
    vision = dict(raw["vision_config"], model_type="qwen2_5_vl", in_channels=3)
    del vision["in_chans"]
    shape = parse_config(dict(raw, vision_config=vision), name="qwen2.5-vl-7b").weights
    assert count_parameters(shape).vision == 676_550_144


@pytest.mark.torch
@pytest.mark.parametrize("name", NAMES)
def test_count_equals_transformers_meta_build(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = fixture_config(name)
    cls = transformers.Qwen2_5_VLForConditionalGeneration
    with torch.device("meta"):
        model = cls._from_config(cls.config_class.from_dict(raw))
    params = dict(model.named_parameters())
    vision = sum(p.numel() for k, p in params.items() if "visual" in k)
    count = count_parameters(fixture_shape(name).weights)
    assert (count.total, count.vision) == (sum(p.numel() for p in params.values()), vision)
