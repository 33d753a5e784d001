"""Nemotron-NAS ``block_configs`` and Gemma-3n KV sharing, read as vLLM 0.33's model files read them;
engines not checked against these families refuse them by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_sized, bundled_shape, fixture_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import ConfigError, InputError
from kvcalc.hfconfig import parse_config
from kvcalc.model.attention_layouts import SharedKV
from kvcalc.units import GIB


def nas_config(blocks):
    return {
        "architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "torch_dtype": "bfloat16",
        "num_hidden_layers": len(blocks), "num_attention_heads": 64, "hidden_size": 8192,
        "max_position_embeddings": 131072,
        "block_configs": [
            {"attention": {"n_heads_in_group": g, "no_op": g is None, "replace_with_linear": False},
             "ffn": {"ffn_mult": 5.25, "no_op": False}}
            for g in blocks
        ],
    }  # fmt: skip


def test_nas_per_block_heads_and_no_op_blocks():
    shape = parse_config(nas_config([8, 8, None, 16, None]), name="nas")
    # 64 heads // 8 = 8 KV heads × (128 + 128) × 2 B = 4,096 B; // 16 = 4 heads → 2,048 B; no-op: 0
    assert [x.bytes_per_token for x in shape.layers] == [4096, 4096, 0, 2048, 0]
    assert shape.bytes_per_token == 10_240


def test_nas_vllm_one_uniform_type_group():
    shape = parse_config(nas_config([8, 8, None, 16, None]), name="nas")
    plan = get_engine("vllm").plan_kv_cache(
        EngineRequest(model=shape, max_model_len=4096, available_kv_bytes=GIB)
    )
    # one full-attention group with per-layer pages: 16 · (4,096 + 4,096 + 2,048) = 163,840 B per
    # block; 1,073,741,824 // 163,840 = 6,553 blocks
    assert len(plan.groups) == 1 and plan.groups[0].num_layers == 3
    assert plan.num_blocks == 6553


def test_nas_linear_replacement_refused():
    raw = nas_config([8])
    raw["block_configs"][0]["attention"]["replace_with_linear"] = True
    with pytest.raises(ConfigError) as err:
        parse_config(raw, name="nas")
    assert err.value.code == "config-unverified"


def gemma3n_config():
    types = (["sliding_attention"] * 4 + ["full_attention"]) * 6
    return {
        "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "gemma3n_text", "num_hidden_layers": 30, "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048, "sliding_window": 512,
            "layer_types": types, "num_kv_shared_layers": 10, "max_position_embeddings": 32768,
        },
    }  # fmt: skip


def test_gemma3n_shared_layers_are_not_charged():
    shape = parse_config(gemma3n_config(), name="gemma3n")
    shared = [i for i, x in enumerate(shape.layers) if isinstance(x, SharedKV)]
    assert shared == list(range(20, 30))
    # layer 24 (full) reads layer 19, layer 20 (sliding) reads layer 18, as vLLM's gemma3n.py does
    assert shape.layers[24].source_layer == 19 and shape.layers[20].source_layer == 18
    # 20 layers keep a cache: 2 × (256 + 256) × 2 B = 2,048 B each → 40,960 B per token
    assert shape.bytes_per_token == 20 * 2048


def test_gemma3n_vllm_groups_only_own_caches():
    shape = parse_config(gemma3n_config(), name="gemma3n")
    plan = get_engine("vllm").plan_kv_cache(
        EngineRequest(model=shape, max_model_len=4096, available_kv_bytes=GIB)
    )
    assert sum(g.num_layers - g.padding_layers for g in plan.groups) == 20


@pytest.mark.parametrize("engine", ["hf", "sglang", "llamacpp", "trtllm"])
def test_unchecked_engines_refuse_deepseek_v4(engine):
    shape = fixture_shape("deepseek-ai--DeepSeek-V4-Flash")
    with pytest.raises(InputError) as err:
        get_engine(engine).plan_kv_cache(
            EngineRequest(model=shape, max_model_len=4096, available_kv_bytes=GIB)
        )
    assert err.value.code == "unsupported-model"


def test_hf_refuses_sparse_mla_and_mimo_v2():
    for shape in (bundled_shape("glm-5"), fixture_shape("XiaomiMiMo--MiMo-V2-Flash")):
        with pytest.raises(InputError) as err:
            get_engine("hf").plan_kv_cache(
                EngineRequest(model=shape, max_model_len=4096, available_kv_bytes=GIB)
            )
        assert err.value.code == "unsupported-model"


def test_gemma3n_vllm_figures():
    """Checked against vLLM 0.33.0's own sizing code (Gemma3nForCausalLM, same text config, H100)."""
    shape = parse_config(gemma3n_config(), name="gemma3n")
    plan = get_engine("vllm").plan_kv_cache(
        EngineRequest(
            model=shape,
            max_model_len=32768,
            available_kv_bytes=20 * GIB,
            gpu_memory_bytes=80 * GIB,
            gpu_name="NVIDIA H100 80GB HBM3",
            gpu_compute_capability=(9, 0),
        )  # fmt: skip
    )
    # 20 own caches (16 sliding, 4 full), page 16 · 2 · 512 · 2 = 32,768 B: 5 groups of 4 layers,
    # 131,072 B per block → 163,840 blocks; per request 4 · (cdiv(511 + 16,384, 16) + 1) + 2,048
    # = 4 · 1,057 + 2,048 = 6,276 → 26.1058x, 855,434 tokens
    assert len(plan.groups) == 5 and plan.num_blocks == 163_840
    assert plan.kv_cache_tokens == 855_434


# -- against vLLM 0.33.0's own DeciLMForCausalLM ---------------------------------------------------
NAS_FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "vllm_0_33" / "nemotron_nas.json").read_text()
)
H100 = {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_compute_capability": (9, 0)}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "row"),
    [
        pytest.param(
            name,
            row,
            id=f"{name}-{row['kv_cache_dtype']}-tp{row['tensor_parallel_size']}"
            f"-{row['max_model_len'] or 'derived'}",
        )  # fmt: skip
        for name, m in NAS_FIXTURE["models"].items()
        for row in m["scenarios"]
    ],
)
def test_nas_matches_vllm(name, row):
    shape = parse_config(NAS_FIXTURE["models"][name]["config"], name=name)
    if row["max_model_len"] is None:
        assert shape.max_model_len == row["derived_max_model_len"]
    p = get_engine("vllm").plan_kv_cache(
        EngineRequest(model=shape, max_model_len=row["max_model_len"] or shape.max_model_len,
                      kv_cache_dtype=row["kv_cache_dtype"],
                      tensor_parallel_size=row["tensor_parallel_size"],
                      available_kv_bytes=row["available_kv_bytes"], **H100)
    )  # fmt: skip
    assert_sized(p, row)
    assert [g.num_layers for g in p.groups] == [g[1] for g in row["groups"]]
    assert p.log_lines[-1].endswith(row["log_line"])
