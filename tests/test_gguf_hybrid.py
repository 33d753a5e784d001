"""Hybrid (attention beside recurrent layers) and Llama 4 GGUFs: the layers as llama.cpp's loader
reads them, the state from the ``ssm.*`` keys, and missing or bad keys refused by name."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from gguf_helpers import write_gguf

from kvcalc.errors import ConfigError
from kvcalc.model.layouts import LayerKind
from kvcalc.model.recurrent_layouts import (
    GatedDeltaNetState,
    Mamba1State,
    Mamba2State,
    ParallelHybrid,
    ShortConvState,
)
from kvcalc.sources.gguf.model import parse_gguf

F, R, C, N = LayerKind.FULL, LayerKind.RECURRENT, LayerKind.CHUNKED, LayerKind.NONE
MAMBA2 = {"ssm.conv_kernel": 4, "ssm.inner_size": 512, "ssm.state_size": 16,
          "ssm.time_step_rank": 8, "ssm.group_count": 1}  # fmt: skip


def keys(arch: str, layers: int, kv_heads, **more) -> dict:
    base = {"block_count": layers, "context_length": 8192, "embedding_length": 256,
            "attention.head_count": 4, "attention.head_count_kv": kv_heads,
            "attention.key_length": 64, "attention.value_length": 64, **more}  # fmt: skip
    return {f"{arch}.{k}": v for k, v in base.items()}


def read(tmp_path: Path, arch: str, k: dict):
    from kvcalc.sources.gguf.files import read_local

    model = read_local(write_gguf(tmp_path / f"{arch}.gguf", arch, k))
    return parse_gguf(model.metadata, name=arch, where=model.where)


def kinds(shape) -> list[LayerKind]:
    return [x.kind for x in shape.layers]


def test_granitehybrid_recurrent_where_no_kv_heads(tmp_path):
    shape = read(tmp_path, "granitehybrid", keys("granitehybrid", 4, [0, 2, 0, 0], **MAMBA2))
    assert kinds(shape) == [R, F, R, R]
    assert shape.layers[0] == Mamba2State(dtype=shape.layers[0].dtype, ssm_dtype=shape.layers[0].ssm_dtype,
                                          conv_kernel=4, intermediate_size=512, n_groups=1,
                                          state_size=16, num_heads=8, head_dim=64)  # fmt: skip
    # one attention layer: 2 KV heads · (64 + 64) · 2 B = 512 B per token; state in float32:
    # conv 3 · (512 + 2 · 16) · 4 = 6,528 B, SSM 8 · 64 · 16 · 4 = 32,768 B, three layers
    assert shape.bytes_per_token == 512
    assert shape.state_bytes_per_sequence == 3 * (6_528 + 32_768)


def test_nemotron_h_mlp_layers_cache_nothing(tmp_path):
    k = keys("nemotron_h", 4, [0, 0, 2, 0], feed_forward_length=[0, 64, 0, 0], **MAMBA2)
    assert kinds(read(tmp_path, "nemotron_h", k)) == [R, N, F, R]


def test_jamba_mamba1_without_groups(tmp_path):
    k = keys("jamba", 4, [0, 2, 0, 0], **MAMBA2)
    del k["jamba.ssm.group_count"]  # the jamba loader reads none
    shape = read(tmp_path, "jamba", k)
    assert kinds(shape) == [R, F, R, R] and isinstance(shape.layers[0], Mamba1State)
    # conv 3 · 512 · 4 = 6,144 B, SSM 512 · 16 · 4 = 32,768 B per layer
    assert shape.state_bytes_per_sequence == 3 * (6_144 + 32_768)


def test_falcon_h1_both_caches_in_every_layer(tmp_path):
    shape = read(tmp_path, "falcon-h1", keys("falcon-h1", 3, 2, **MAMBA2))
    assert all(isinstance(x, ParallelHybrid) for x in shape.layers)
    assert shape.bytes_per_token == 3 * 512 and shape.state_bytes_per_sequence == 3 * 39_296


def test_lfm2_short_convolutions_as_wide_as_the_embedding(tmp_path):
    shape = read(tmp_path, "lfm2", keys("lfm2", 3, [0, 0, 2], **{"shortconv.l_cache": 3}))
    assert kinds(shape) == [R, R, F]
    assert shape.layers[0] == replace(shape.layers[0], conv_dim=256, conv_kernel=3)
    assert isinstance(shape.layers[0], ShortConvState)
    assert shape.state_bytes_per_sequence == 2 * (2 * 256 * 4)  # (3 − 1) · 256 f32 per layer


def test_lfm2_with_a_sliding_window_is_refused(tmp_path):
    k = keys("lfm2", 3, [0, 0, 2], **{"shortconv.l_cache": 3, "attention.sliding_window": 512})
    with pytest.raises(ConfigError) as err:
        read(tmp_path, "lfm2", k)
    assert (
        err.value.code == "config-unsupported"
        and "lfm2.attention.sliding_window" in err.value.message
    )


GDN = {"ssm.conv_kernel": 4, "ssm.inner_size": 4096, "ssm.state_size": 128,
       "ssm.time_step_rank": 32, "ssm.group_count": 16}  # fmt: skip


@pytest.mark.parametrize("arch", ["qwen3next", "qwen35", "qwen35moe"])
def test_gated_deltanet_every_fourth_layer_attends(tmp_path, arch):
    shape = read(tmp_path, arch, keys(arch, 8, 2, **GDN))
    assert kinds(shape) == [R, R, R, F] * 2
    assert shape.layers[0] == GatedDeltaNetState(dtype=shape.layers[0].dtype, ssm_dtype=shape.layers[0].ssm_dtype,
                                                 conv_kernel=4, num_k_heads=16, num_v_heads=32,
                                                 head_k_dim=128, head_v_dim=128)  # fmt: skip


def test_gated_deltanet_interval_and_explicit_layers(tmp_path):
    shape = read(tmp_path, "qwen3next", keys("qwen3next", 4, 2, full_attention_interval=2, **GDN))
    assert kinds(shape) == [R, F, R, F]
    flags = [True, False, False, True]  # attention.recurrent_layers wins over the interval
    k = keys(
        "qwen3next", 4, 2, full_attention_interval=2, **GDN, **{"attention.recurrent_layers": flags}
    )
    assert kinds(read(tmp_path, "qwen3next", k)) == [R, F, F, R]


def test_llama4_chunks_are_llama_cpp_s(tmp_path):
    shape = read(tmp_path, "llama4", keys("llama4", 8, 2))
    assert kinds(shape) == [C, C, C, F] * 2 and {x.window for x in shape.layers} == {8192, None}
    k = keys(
        "llama4", 4, 2, **{"attention.sliding_window": 1024, "attention.sliding_window_pattern": 2}
    )
    shape = read(tmp_path, "llama4", k)  # llama.cpp's chunk, the file's period
    assert kinds(shape) == [C, F, C, F] and shape.layers[0].window == 8192
    assert (
        kinds(read(tmp_path, "llama4", keys("llama4", 4, 2, **{"attention.sliding_window": 0})))
        == [F] * 4
    )


@pytest.mark.parametrize(
    ("arch", "k", "named"),
    [
        ("granitehybrid", keys("granitehybrid", 2, [0, 2], **MAMBA2), "ssm.state_size"),
        ("jamba", keys("jamba", 2, [0, 2], **MAMBA2), "ssm.conv_kernel"),
        ("falcon-h1", keys("falcon-h1", 2, 2, **MAMBA2), "ssm.group_count"),
        ("lfm2", keys("lfm2", 2, [0, 2], **{"shortconv.l_cache": 3}), "shortconv.l_cache"),
        ("qwen35", keys("qwen35", 4, 2, **GDN), "ssm.inner_size"),
    ],
)
def test_a_missing_recurrent_key_is_one_error_naming_it(tmp_path, cli, arch, k, named):
    k = dict(k)  # the parameters are shared by reruns in one process (mutation runs)
    del k[f"{arch}.{named}"]
    result = cli("inspect", str(write_gguf(tmp_path / "m.gguf", arch, k)))
    assert result.exit_code == 2 and result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert first.startswith("error[config-missing-key]: ") and f"{arch}.{named} is missing" in first


@pytest.mark.parametrize(
    ("arch", "k", "named"),
    [
        (
            "qwen3next",
            keys("qwen3next", 4, 2, **{**GDN, "ssm.time_step_rank": 30}),
            "ssm.time_step_rank",
        ),
        (
            "qwen3next",
            keys("qwen3next", 4, 2, **GDN, **{"attention.recurrent_layers": [True] * 3}),
            "attention.recurrent_layers",
        ),  # fmt: skip
        ("qwen3next", keys("qwen3next", 4, 0, **GDN), "attention.head_count_kv"),
        (
            "granitehybrid",
            keys("granitehybrid", 2, [0, 2], **{**MAMBA2, "ssm.state_size": -1}),
            "ssm.state_size",
        ),
        (
            "llama4",
            keys("llama4", 4, 2, **{"attention.sliding_window_pattern": [True]}),
            "attention.sliding_window_pattern",
        ),  # fmt: skip
    ],
)
def test_a_bad_value_is_refused_by_name(tmp_path, arch, k, named):
    if arch == "granitehybrid":  # the helper writes ints as uint32: an int32 array is the negative
        k[f"{arch}.{named}"] = ("int32[]", [-1])
    with pytest.raises(ConfigError) as err:
        read(tmp_path, arch, k)
    assert err.value.code == "config-invalid" and f"{arch}.{named}" in err.value.message


# -- the same figures as the config path ---------------------------------------------------
def _config(tmp_path: Path, name: str, **changes) -> Path:
    from test_family_hybrids import CONFIGS

    (tmp_path / "config.json").write_text(json.dumps({**CONFIGS[name], **changes}))
    return tmp_path


CASES = {
    "granitehybrid": (
        "synthetic--granite-4.0-h-defaults",
        {
            "hidden_size": 512,
            "mamba_n_heads": 16,
            "num_hidden_layers": 4,
            "layer_types": ["mamba", "attention", "mamba", "mamba"],
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
        },
        None,
    ),  # fmt: skip
    "jamba": (
        "ai21labs--AI21-Jamba-1.5-Mini",
        {
            "hidden_size": 256,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "num_hidden_layers": 4,
            "attn_layer_offset": 1,
            "attn_layer_period": 4,
            "num_experts": 1,
            "mamba_dt_rank": 16,
        },
        None,
    ),  # fmt: skip
    "falcon-h1": ("synthetic--falcon-h1-defaults", {}, 2),
    "lfm2": (
        "LiquidAI--LFM2-1.2B",
        {
            "hidden_size": 256,
            "conv_dim": 256,
            "conv_dim_out": 256,
            "block_dim": 256,
            "num_attention_heads": 4,
            "num_heads": 4,
            "num_key_value_heads": 2,
            "num_hidden_layers": 4,
            "full_attn_idxs": [2],
        },
        None,
    ),  # fmt: skip
    "nemotron_h": ("nvidia-nemotron-3-nano-30b-a3b-bf16", None, 6),
    "qwen3next": ("qwen3-next-80b-a3b-thinking", None, 4),
    "qwen35moe": ("qwen3.5-35b-a3b", None, 4),
    "llama4": ("llama-4-scout-17b-16e-instruct", None, 4),
}
COMPARED = (
    "kv_cache_bytes",
    "kv_cache_tokens",
    "kv_bytes_per_token",
    "engine_kv_bytes_per_request",
)


@pytest.mark.parametrize("arch", sorted(CASES))
@pytest.mark.parametrize("extra", [{}, {"n_seq_max": 3, "kv_unified": False}])
def test_plan_on_the_gguf_equals_the_config_path(tmp_path, cli, arch, extra):
    from helpers import assert_clean, bundled_shape

    from kvcalc.hfconfig import parse_config
    from kvcalc.verify.llamacpp.gguf import spec_for, write_model
    from kvcalc.verify.llamacpp.spec import GgufWidths

    name, changes, layers = CASES[arch]
    if changes is None:
        shape = bundled_shape(name)
    else:
        shape = parse_config(json.loads(_config(tmp_path, name, **changes).joinpath("config.json").read_text()),
                             name=name)  # fmt: skip
    shape = replace(shape, layers=shape.layers[:layers] if layers else shape.layers)
    spec = spec_for(shape, GgufWidths())
    assert spec.arch == arch
    gguf = write_model(spec, tmp_path / "m.gguf")
    options = [a for k, v in extra.items() for a in ("-E", f"{k}={str(v).lower()}")]
    args = (
        "--engine",
        "llamacpp",
        "--gpu-memory",
        "80GiB",
        "--max-model-len",
        "16384",
        *options,
        "--json",
    )
    from_gguf = cli("plan", str(gguf), *args)
    assert_clean(from_gguf, json_output=True)
    from_config = _plan_json(shape, extra)
    assert {k: from_gguf.json[k] for k in COMPARED} == {k: from_config[k] for k in COMPARED}
    cache = [
        x
        for x in from_gguf.json["log_lines"]
        if x.startswith(("llama_kv_cache", "llama_memory_recurrent"))
    ]
    assert cache and cache == [
        x
        for x in from_config["log_lines"]
        if x.startswith(("llama_kv_cache", "llama_memory_recurrent"))
    ]


def _plan_json(shape, extra: dict) -> dict:
    """The config side: the same inputs, planned from the model read from ``config.json``."""
    from kvcalc.engines.names import EngineName
    from kvcalc.planning.core import plan
    from kvcalc.planning.inputs import PlanInputs

    inputs = PlanInputs(engine=EngineName.LLAMACPP, gpu_memory_bytes=80 << 30, max_model_len=16384,
                        engine_options=tuple(extra.items()))  # fmt: skip
    return plan(shape, inputs).to_dict()
