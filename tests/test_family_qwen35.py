"""Qwen3.5 / Qwen3.6 (Gated DeltaNet + full attention under ``text_config``) and Qwen3-Next.

Figures are hand-computed below; the vLLM ones were also produced by vLLM 0.33.0's own sizing code
(the reference harness, emulated H100, 20 GiB of KV memory per GPU).
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers import bundled_config

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB

H100 = {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_compute_capability": (9, 0)}  # fmt: skip
VLLM = get_engine("vllm")
CONFIGS = Path(__file__).parent / "fixtures" / "configs"


def fixture_shape(name: str):
    return parse_config(json.loads((CONFIGS / f"{name}.json").read_text()), name=name)


def plan(model, max_model_len, **kw):
    kw.setdefault("available_kv_bytes", 20 * GIB)
    return VLLM.plan_kv_cache(EngineRequest(model=model, max_model_len=max_model_len, **H100, **kw))


def test_qwen35_moe_layout_reads_text_config_and_the_fp32_state():
    m = fixture_shape("Qwen--Qwen3.5-35B-A3B")
    kinds = [x.kind for x in m.layers]
    assert kinds == (["recurrent"] * 3 + ["full"]) * 10
    gdn = m.layers[0]
    # text_config.mamba_ssm_dtype = float32 → the recurrent state is fp32, the conv state bf16:
    # conv_dim = 128·16·2 + 128·32 = 8,192; conv (3, 8,192)·2 = 49,152; state (32, 128, 128)·4
    # = 2,097,152; 2,146,304 B per sequence per layer
    assert [(t.shape, t.dtype.name) for t in gdn.state_tensors()] == [
        ((3, 8192), "bf16"), ((32, 128, 128), "fp32"),
    ]  # fmt: skip
    assert gdn.state_bytes == 2_146_304
    assert m.state_bytes_per_sequence == 30 * 2_146_304
    # 10 full layers · 2 (K, V) · 2 KV heads · 256 · 2 B
    assert m.bytes_per_token == 10 * 2 * 2 * 256 * 2
    assert "mamba_ssm_dtype" in m.provenance["gated_deltanet"]


def test_qwen35_vllm_block_groups_and_capacity():
    p = plan(fixture_shape("Qwen--Qwen3.5-35B-A3B"), 32768)
    # attention page per token 2·2·256·2 = 2,048 B; align mode with FlashInfer GDN prefill on SM 9:
    # blocks are multiples of lcm(16, 64) = 64 → 64·cdiv(2,146,304, 64·2,048) = 64·17 = 1,088
    assert p.block_size == 1_088
    page = 1_088 * 2_048  # 2,228,224 B; the mamba page is padded up to it
    assert [(g.kind, g.num_layers, g.page_bytes) for g in p.groups] == [
        ("recurrent", 10, page)
    ] * 3 + [("full", 10, page)]
    # 20 GiB // (10 · 2,228,224) = 963 blocks; a request needs 3·(2 + 1 checkpoint) + cdiv(32,768,
    # 1,088) = 9 + 31 = 40 → 963 / 40 = 24.075x, int(24.075 · 32,768) = 788,889 tokens
    assert p.num_blocks == 963
    assert [g.blocks_per_request for g in p.groups] == [3, 3, 3, 31]
    assert p.kv_cache_tokens == 788_889
    assert p.log_lines[-1] == (
        "GPU KV cache size: 788,889 tokens, Maximum concurrency for 32,768 tokens per request: 24.07x"
    )


def test_qwen35_122b_block():
    p = plan(fixture_shape("Qwen--Qwen3.5-122B-A10B"), 32768)
    # 64 value heads: conv_dim = 128·16·2 + 128·64 = 12,288 → conv 3·12,288·2 = 73,728; state
    # 64·128·128·4 = 4,194,304 → 4,268,032 B; block 64·cdiv(4,268,032, 131,072) = 64·33 = 2,112
    assert p.block_size == 2_112
    # 12 full + 36 GDN layers → 3 mamba groups + 1 full group of 12; 20 GiB // (12·2,112·2,048)
    assert p.num_blocks == 20 * GIB // (12 * 2_112 * 2_048) == 413


def test_qwen35_tp8_splits_the_state():
    p = plan(fixture_shape("Qwen--Qwen3.5-35B-A3B"), 32768, tensor_parallel_size=8)
    # TP 8: conv (3, 1,024)·2 = 6,144; state (4, 128, 128)·4 = 262,144 → 268,288 B; the 2 KV heads
    # are replicated (one per rank): 1·256·2·2 = 1,024 B per token → 64·cdiv(268,288, 65,536) = 320
    assert p.block_size == 320


def test_qwen3_next_keeps_the_model_dtype_for_its_state():
    raw = bundled_config("qwen3-next-80b-a3b-thinking")
    # vLLM 0.33 has no config hook for Qwen3-Next: a mamba_ssm_cache_dtype key changes nothing
    for extra in ({}, {"mamba_ssm_cache_dtype": "float32"}):
        m = parse_config({**raw, **extra}, name="qwen3-next")
        assert {t.dtype.name for t in m.layers[0].state_tensors()} == {"bf16"}
        assert plan(m, 32768).block_size == 576


def test_qwen35_on_b200_uses_flashinfer_gdn_too():
    # SM 10.0 with 128-wide keys (CUDA 13, as the vLLM 0.33 wheel): FlashInfer GDN prefill, so the
    # same 64-token alignment and checkpoint block as on the H100 → 1,088; at 4,096 tokens a
    # request needs 3·3 + cdiv(4,096, 1,088) = 9 + 4 = 13 of 963 blocks = 74.08x
    p = VLLM.plan_kv_cache(
        EngineRequest(model=fixture_shape("Qwen--Qwen3.5-35B-A3B"), max_model_len=4096,
                      available_kv_bytes=20 * GIB, gpu_memory_bytes=180 * 10**9,
                      gpu_name="NVIDIA B200", gpu_compute_capability=(10, 0))
    )  # fmt: skip
    assert (p.block_size, p.num_blocks) == (1_088, 963)
    assert round(p.max_concurrency, 3) == 74.077
