"""MiMo-V2-Flash (per-type heads, K and V widths that differ) and DeepSeek-V4 (compressed, indexer and
sliding caches), vLLM 0.33.

Figures hand-computed and checked against vLLM 0.33.0's own sizing code (emulated H100 and B200,
20 GiB of KV memory per GPU, API-server defaults). The MiMo-V2-Flash config is reconstructed from
public copies (``tests/fixtures/configs/SOURCES.md``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fixture_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import ConfigError, InputError
from kvcalc.hfconfig import parse_config
from kvcalc.model.attention_layouts import CompressedSparseAttention
from kvcalc.units import GIB

H100 = {
    "gpu_memory_bytes": 80 * GIB,
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_compute_capability": (9, 0),
}
B200 = {"gpu_memory_bytes": 180 * GIB, "gpu_name": "NVIDIA B200", "gpu_compute_capability": (10, 0)}
VLLM = get_engine("vllm")
MIMO = Path(__file__).parent / "fixtures" / "configs" / "XiaomiMiMo--MiMo-V2-Flash.json"


def plan(model, gpu=H100, **kw):
    kw.setdefault("available_kv_bytes", 20 * GIB)
    kw.setdefault("max_model_len", 32768)
    return VLLM.plan_kv_cache(EngineRequest(model=model, **gpu, **kw))


@pytest.fixture(scope="module")
def mimo():
    return parse_config(json.loads(MIMO.read_text()), name="MiMo-V2-Flash")


@pytest.fixture(scope="module")
def dsv4():
    return fixture_shape("deepseek-ai--DeepSeek-V4-Flash")


def test_mimo_layers(mimo):
    full = [i for i, x in enumerate(mimo.layers) if x.kind == "full"]
    assert full == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    swa, ga = mimo.layers[1], mimo.layers[0]
    # sliding: 8 × (192 + 128) × 2 B = 5,120 B over 128 tokens; full: 4 × 320 × 2 B = 2,560 B
    assert (swa.kv_heads, swa.k_dim, swa.v_dim, swa.window, swa.bytes_per_token) == (
        8,
        192,
        128,
        128,
        5120,
    )
    assert (ga.kv_heads, ga.k_dim, ga.v_dim, ga.bytes_per_token) == (4, 192, 128, 2560)


def test_mimo_vllm_h100(mimo):
    p = plan(mimo)
    # pages at block 16: sliding 16·8·320·2 = 81,920 B, full 40,960 B → full block 32; group size 9
    # (9 full, 39 sliding → 5 groups, padded to 9): 9 · 81,920 = 737,280 B per block;
    # 21,474,836,480 // 737,280 = 29,127 blocks; per request 5·(cdiv(127 + 16,384, 16) + 1) +
    # cdiv(32,768, 32) = 5·1,033 + 1,024 = 6,189 → 4.7063x, 154,214 tokens
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (16, 29127, 154_214)
    assert round(p.max_concurrency, 4) == round(29127 / 6189, 4)


def test_mimo_vllm_tp8_replicates_heads(mimo):
    p = plan(mimo, tensor_parallel_size=8, kv_cache_dtype="fp8")
    # 8 and 4 KV heads on 8 ranks: 1 head each; pages 16·1·320 = 5,120 B for both → block 16 for
    # both; 9 · 5,120 = 46,080 B per block → 466,033 blocks
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (16, 466_033, 2_117_145)


def test_dsv4_layers(dsv4):
    assert dsv4.num_layers == 43
    ratios = [x.compress_ratio for x in dsv4.layers]
    assert (ratios.count(0), ratios.count(4), ratios.count(128)) == (2, 21, 20)
    layer = dsv4.layers[2].with_dtype(dsv4.dtype)
    assert isinstance(layer, CompressedSparseAttention)
    # float32 compressor states: KV + score, doubled by the overlap of ratio 4: 2·2·512 and 2·2·128
    assert layer.compressor_state_dims == (2048, 512)


@pytest.mark.parametrize(
    ("gpu", "length", "tokens", "per_request"),
    [
        # 16,384 in flight: 259 + 259 (sliding latents, block 64) + 128 (compressed, block 256) +
        # 4,099 (ratio-4 compressor states, block 4, window 8) + 2,065 (ratio-128, block 8, window 128)
        (H100, 32768, 103_096, 6810),
        # 32,768 in flight (B200): 513 + 513 + 128 + 8,193 + 4,097
        (B200, 32768, 52_223, 13_444),
        # 65 + 65 + 16 + 1,025 + 513
        (H100, 4096, 52_114, 1684),
    ],
)
def test_dsv4_vllm(dsv4, gpu, length, tokens, per_request):
    p = plan(dsv4, gpu=gpu, max_model_len=length)
    # one block = max group page = 21·8,640 + 21·37,440 + 20·1,728 = 1,002,240 B (pages rounded up
    # to 576 B); 21,474,836,480 // 1,002,240 = 21,426 blocks; 167 cache layers in 5 groups
    assert p.block_size == 4
    assert p.num_blocks == 21426
    assert sum(g.blocks_per_request for g in p.groups) == per_request
    assert p.kv_cache_tokens == tokens
    assert sum(len(g.layer_indices) for g in p.groups) == 167
    assert p.kv_cache_dtype == "fp8_ds_mla"


def test_dsv4_other_dtypes_refused(dsv4):
    with pytest.raises(InputError) as err:
        plan(dsv4, kv_cache_dtype="bfloat16")
    assert err.value.code == "unsupported-dtype"


def test_mimo_fp8_refused_on_b200(mimo):
    # vLLM 0.33 on SM 10.x: FLASH_ATTN_DIFFKV → "FlashAttention does not support fp8 kv-cache on this
    # device." (NotImplementedError when the model is built); auto is sized as usual
    with pytest.raises(InputError) as err:
        plan(mimo, gpu=B200, kv_cache_dtype="fp8")
    assert err.value.code == "unsupported-dtype"
    # bf16 with 2 · 16,384 tokens in flight: 5·(cdiv(min(127 + 32,768, 32,768), 16) + 1) + 1,024
    # = 5·2,049 + 1,024 = 11,269 blocks per request → 29,127 / 11,269 = 2.5847x → 84,695 tokens
    assert plan(mimo, gpu=B200).kv_cache_tokens == 84_695


def test_vllm_refuses_step_3p7_flash():
    raw = {
        "architectures": ["Step3p7FlashForCausalLM"], "model_type": "step3p7",
        "num_hidden_layers": 4, "hidden_size": 4096, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 65536,
        "torch_dtype": "bfloat16",
    }  # fmt: skip
    with pytest.raises(InputError) as err:
        plan(parse_config(raw, name="step", trust_layout=True), max_model_len=4096)
    assert err.value.code == "unsupported-model"
    assert "['Step3p7FlashForCausalLM'] are not supported for now" in err.value.message


def test_mimo_needs_sliding_window_size():
    # vLLM's MiMoV2FlashDecoderLayer reads config.sliding_window_size; sliding_window is not a
    # stand-in (transformers sets it to sliding_window_size + 1)
    raw = json.loads(MIMO.read_text())
    del raw["sliding_window_size"]
    with pytest.raises(ConfigError) as err:
        parse_config(raw, name="mimo")
    assert err.value.code == "config-missing-key"
