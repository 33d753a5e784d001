"""Jamba, Bamba, Granite-4.0-H, Falcon-H1, LFM2, Kimi-Linear, MiniMax-01: layouts and vLLM sizing by hand.

The configs are the ones in ``fixtures/vllm_0_33/hybrid_families.json`` (sources there); the vLLM
figures below are hand-computed and equal what vLLM 0.33.0's own code printed for them.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import ConfigError, InputError
from kvcalc.hfconfig import parse_config
from kvcalc.model.dtypes import BF16, FP32
from kvcalc.model.recurrent_layouts import (
    KimiDeltaState,
    Mamba1State,
    ParallelHybrid,
    ShortConvState,
)
from kvcalc.units import GIB

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "hybrid_families.json"
CONFIGS = {k[:-5]: v["config"] for k, v in json.loads(FIXTURE.read_text())["models"].items()}
H100 = {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_compute_capability": (9, 0)}  # fmt: skip


def shape(name: str, **overrides):
    return parse_config({**CONFIGS[name], **overrides}, name=name)


def plan(model, max_model_len=32768, engine="vllm", **kw):
    kw.setdefault("available_kv_bytes", 20 * GIB)
    return get_engine(engine).plan_kv_cache(
        EngineRequest(model=model, max_model_len=max_model_len, **H100, **kw)
    )


def kinds(model) -> Counter:
    return Counter(type(x).__name__ for x in model.layers)


# -- Jamba (Mamba1) ---------------------------------------------------------------------------
def test_jamba_layers_and_state():
    m = shape("ai21labs--AI21-Jamba-1.5-Mini")
    # attn_layer_period 8, offset 4: layers 4, 12, 20, 28 attend; the other 28 are Mamba1
    assert [i for i, x in enumerate(m.layers) if x.kind == "full"] == [4, 12, 20, 28]
    mamba = m.layers[0]
    assert isinstance(mamba, Mamba1State)
    # I = 2 · 4,096 = 8,192: conv (3, 8,192)·2 = 49,152; SSM (8,192, 16)·2 = 262,144 → 311,296
    assert [t.shape for t in mamba.state_tensors()] == [(3, 8192), (8192, 16)]
    assert mamba.state_bytes == 311_296
    # attention: 8 KV heads × 4,096 / 32 = 128 wide: 4 layers · 2 · 8 · 128 · 2 = 16,384 B/token
    assert m.bytes_per_token == 16_384


def test_jamba_vllm():
    p = plan(shape("ai21labs--AI21-Jamba-1.5-Mini"))
    # no prefill checkpoints for Mamba1: block 16·cdiv(311,296, 16·4,096) = 16·5 = 80
    assert p.block_size == 80
    # 28 mamba + 4 attention → 7 mamba groups of 4 + 1 full group of 4; page 80 · 4,096 = 327,680
    # 20 GiB // (4 · 327,680) = 16,384 blocks; per request 7·2 + cdiv(32,768, 80) = 14 + 410 = 424
    assert p.num_blocks == 16_384
    assert sum(g.blocks_per_request for g in p.groups) == 424
    assert p.kv_cache_tokens == int(16_384 / 424 * 32_768) == 1_266_204
    # fp8 halves the attention page only (the states stay bf16): 16·cdiv(311,296, 32,768) = 160
    assert plan(shape("ai21labs--AI21-Jamba-1.5-Mini"), kv_cache_dtype="fp8").block_size == 160


def test_tp_must_divide_the_recurrent_state():
    base = CONFIGS["moonshotai--Kimi-Linear-48B-A3B-Instruct"]
    odd = parse_config(
        {**base, "linear_attn_config": {**base["linear_attn_config"], "num_heads": 36}}, name="odd"
    )
    # 32 attention heads split over 8 ranks, but vLLM's divide(36 KDA heads, 8) asserts
    with pytest.raises(InputError, match="KimiDeltaState heads 36 is not divisible") as err:
        plan(odd, tensor_parallel_size=8)
    assert err.value.code == "invalid-parallelism"


# -- Mamba2 hybrids ---------------------------------------------------------------------------
def test_bamba_reads_attn_layer_indices_and_vllm_refuses_it():
    m = shape("synthetic--bamba-defaults")
    # attention only at 9, 18, 27 (not 32 full-attention layers)
    assert [i for i, x in enumerate(m.layers) if x.kind == "full"] == [9, 18, 27]
    assert kinds(m) == {"Mamba2State": 29, "FullAttention": 3}
    # mamba_d_head "auto" = 2 · 4,096 / 128 = 64; conv (3, 8,192 + 2·1·256) bf16 = 52,224;
    # SSM (128, 64, 256) bf16 = 4,194,304 → 4,246,528 B
    assert m.layers[0].state_bytes == 4_246_528
    with pytest.raises(InputError) as err:
        plan(m)
    # vLLM 0.33 dropped BambaForCausalLM and its Transformers backend cannot run Mamba layers
    assert err.value.code == "unsupported-model"
    assert err.value.message.startswith(
        "vLLM 0.33 refuses to start: Layer 0 (linear_attention) does not dispatch"
    )
    assert "v0.23.0" in err.value.hint


def test_granite_hybrid_vllm():
    m = shape("synthetic--granite-4.0-h-defaults")
    assert kinds(m) == {"Mamba2State": 36, "FullAttention": 4}
    p = plan(m)
    # Mamba2 of 8,192 channels: conv (3, 8,192 + 512)·2 = 52,224 + SSM (128, 64, 256)·2 = 4,194,304
    # → 4,246,528; attention 2·8·128·2 = 4,096 B/token; block 16·cdiv(4,246,528, 65,536) = 1,040
    assert p.block_size == 1_040
    # 36 mamba + 4 attention → 9 mamba groups of 4, each 2 + 1 checkpoint = 3 blocks per request
    assert sorted(g.blocks_per_request for g in p.groups) == [3] * 9 + [32]  # cdiv(32,768, 1,040)
    assert p.num_blocks == 20 * GIB // (4 * 1_040 * 4_096) == 1_260


def test_granite_layers_block_type_is_layer_types():
    raw = dict(CONFIGS["synthetic--granite-4.0-h-defaults"])
    raw["layers_block_type"] = raw.pop("layer_types")  # transformers' attribute_map alias
    a = parse_config(raw, name="alias")
    b = shape("synthetic--granite-4.0-h-defaults")
    assert a.layers == b.layers


def test_falcon_h1_runs_attention_and_mamba_in_every_layer():
    m = shape("synthetic--falcon-h1-defaults")
    layer = m.layers[0]
    assert isinstance(layer, ParallelHybrid) and kinds(m) == {"ParallelHybrid": 32}
    # attention 2·8·128·2 = 4,096 B/token; Mamba2 (mamba_d_ssm 1,024): conv (3, 1,024 + 512)·2
    # = 9,216 + SSM (128, 8, 256)·2 = 524,288 → 533,504 B
    assert (layer.bytes_per_token, layer.state_bytes) == (4_096, 533_504)
    p = plan(m, 4096)
    # 32 attention + 32 mamba cache layers → two groups of 32; block 16·cdiv(533,504, 65,536) = 144
    assert p.block_size == 144
    assert sorted((g.kind, g.num_layers) for g in p.groups) == [("full", 32), ("recurrent", 32)]
    # 20 GiB // (32 · 144 · 4,096) = 1,137 blocks; per request cdiv(4,096, 144) + 3 = 29 + 3
    assert p.num_blocks == 1_137 and p.kv_cache_tokens == int(1_137 / 32 * 4096) == 145_536
    assert p.groups[0].layer_indices == tuple(range(32))
    with pytest.raises(InputError, match="pipeline parallelism"):
        plan(m, 4096, pipeline_parallel_size=2)


# -- LFM2, Kimi-Linear ----------------------------------------------------------------------
def test_lfm2_full_attn_idxs_and_tiny_conv_state():
    m = shape("LiquidAI--LFM2-1.2B")
    assert [i for i, x in enumerate(m.layers) if x.kind == "full"] == [2, 5, 8, 10, 12, 14]
    conv = m.layers[0]
    assert (
        isinstance(conv, ShortConvState) and conv.state_bytes == 2 * 2048 * 2
    )  # (L − 1, conv_dim)
    p = plan(m)
    # attention 2·8·64·2 = 2,048 B/token already ≥ the 8,192 B state at block 16: no raise,
    # the conv page is padded to 16·2,048 = 32,768; 10 conv + 6 attention → 2 conv groups of 5
    assert p.block_size == 16
    assert p.num_blocks == 20 * GIB // (6 * 32_768) == 109_226


def test_kimi_linear_is_one_based_and_keeps_a_float32_state():
    m = shape("moonshotai--Kimi-Linear-48B-A3B-Instruct")
    # kda_layers lists 1-based layer numbers: 4, 8, ..., 24, 27 (1-based) are MLA
    assert [i for i, x in enumerate(m.layers) if x.kind == "mla"] == [3, 7, 11, 15, 19, 23, 26]
    kda = m.layers[0]
    assert isinstance(kda, KimiDeltaState)
    # conv (3, 3·32·128)·2 = 73,728 (bf16); recurrent (32, 128, 128)·4 = 2,097,152 (float32)
    assert [(t.shape, t.dtype) for t in kda.state_tensors()] == [
        ((3, 12_288), BF16), ((32, 128, 128), FP32),
    ]  # fmt: skip
    p = plan(m)
    # MLA hybrid: blocks are multiples of 128; MLA 576·2 = 1,152 B/token; no FlashKDA (no bounded
    # gate) → no checkpoint: 128·cdiv(2,170,880, 128·1,152) = 128·15 = 1,920
    assert p.block_size == 1_920
    # 20 KDA + 7 MLA → 3 KDA groups (7, 7, 6 + 1 padding) + 1 MLA group of 7
    assert p.num_blocks == 20 * GIB // (7 * 1_920 * 1_152) == 1_387
    lower = {**CONFIGS["moonshotai--Kimi-Linear-48B-A3B-Instruct"]["linear_attn_config"],
             "gate_lower_bound": -5.0}  # fmt: skip
    # Kimi-Linear's KDA layers never export prefill checkpoints, even with a bounded gate
    # (vLLM 0.33 recorded: 2 blocks per KDA group); FlashKDA serves Kimi-K3's full-rank gate only
    bounded = shape("moonshotai--Kimi-Linear-48B-A3B-Instruct", linear_attn_config=lower)
    assert {g.blocks_per_request for g in plan(bounded).groups if g.kind == "recurrent"} == {2}
    k3 = shape(
        "moonshotai--Kimi-Linear-48B-A3B-Instruct",
        linear_attn_config={**lower, "use_full_rank_gate": True},
    )
    assert [g.blocks_per_request for g in plan(k3).groups if g.kind == "recurrent"] == [3, 3, 3]


def test_hybrid_manager_cannot_be_disabled_for_recurrent_models():
    with pytest.raises(InputError, match="needs the hybrid KV cache manager"):
        plan(shape("LiquidAI--LFM2-1.2B"), disable_hybrid_kv_cache_manager=True)


def test_minimax01_is_refused_by_name():
    with pytest.raises(ConfigError) as err:
        shape("synthetic--minimax-text-01-defaults")
    assert err.value.code == "config-unsupported"
    assert "lightning-attention" in err.value.message and "v0.23.0" in err.value.message


@pytest.mark.parametrize(
    ("engine", "name"),
    [
        (engine, name)
        for engine in ("hf", "sglang", "trtllm")
        for name in (
            "ai21labs--AI21-Jamba-1.5-Mini", "LiquidAI--LFM2-1.2B", "synthetic--falcon-h1-defaults"
        )
        # SGLang sizes LFM2 and Falcon-H1 (tests/test_sglang_hybrid.py); Jamba it cannot load;
        # llama.cpp sizes all three (tests/test_verify_llamacpp.py checks them against llama.cpp)
        if engine != "sglang" or "Jamba" in name
    ],
)  # fmt: skip
def test_other_engines_refuse_unmeasured_recurrent_state(engine, name):
    with pytest.raises(InputError) as err:
        plan(shape(name), 4096, engine=engine)
    assert err.value.code == "unsupported-model"


def test_weights_of_these_mixers_are_refused_not_guessed():
    # Kimi-Linear's KDA is counted with its low-rank gates; a full-rank gate (vLLM's other
    # in_proj layout, which transformers does not build) and RoPE'd MLA layers are refused
    name = "moonshotai--Kimi-Linear-48B-A3B-Instruct"
    kda = {**CONFIGS[name]["linear_attn_config"], "use_full_rank_gate": True}
    assert shape(name).weights.problem is None
    assert "full-rank KDA gate" in shape(name, linear_attn_config=kda).weights.problem
    assert "RoPE" in shape(name, mla_use_nope=False).weights.problem
