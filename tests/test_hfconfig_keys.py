"""Each config key variant kvcalc must read, on small configs shaped like real ones."""

from __future__ import annotations

import pytest

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import families, parse_config
from kvcalc.hfconfig.family import Family

#: The generic reader's key variants (Falcon, ChatGLM, OpenELM, GPT-2 spellings...) are tested through
#: a family that accounts for all of them; real families account only for their own keys.
GENERIC = Family(
    name="generic-test",
    model_types={"kvcalc_generic_test"},
    architectures=set(),
    keys={
        "n_head_kv", "num_kv_heads", "multi_query_group_num", "multi_query", "kv_channels", "layer_types", "sliding_window",
        "sliding_window_pattern", "use_sliding_window", "max_window_layers", "attention_chunk_size",
        "no_rope_layers", "full_attention_interval", "linear_num_key_heads", "linear_num_value_heads",
        "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
    },
    layer_types={"full_attention", "sliding_attention", "chunked_attention", "linear_attention"},
)  # fmt: skip


@pytest.fixture(autouse=True)
def generic_family(monkeypatch):
    registered = families.all_families()
    monkeypatch.setattr(families, "all_families", lambda: (*registered, GENERIC))


def cfg(**keys):
    base = {
        "model_type": "kvcalc_generic_test",
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "hidden_size": 1024,
        "torch_dtype": "bfloat16",
    }
    base.update(keys)
    return base


def parse(raw):
    return parse_config(raw, name="test")


def kv_heads(shape):
    return [lay.num_kv_heads for lay in shape.layers]


@pytest.mark.parametrize(
    "keys, expected",
    [
        ({}, 8),  # no KV key: MHA, num_attention_heads
        ({"num_key_value_heads": 2}, 2),
        ({"num_kv_heads": 4}, 4),
        ({"n_head_kv": 1}, 1),  # Falcon-7B style
        ({"multi_query_group_num": 2}, 2),  # ChatGLM
        # GPT-BigCode (Falcon's multi_query and new_decoder_architecture are read by
        # families/falcon.py as vLLM's falcon.py reads them: test_vllm_registry_families.py)
        ({"multi_query": True}, 1),
        ({"n_head_kv": 2, "num_key_value_heads": 4}, 2),  # vLLM's order: n_head_kv first
    ],
)
def test_kv_head_keys(keys, expected):
    assert set(kv_heads(parse(cfg(**keys)))) == {expected}


def test_explicit_head_dim_beats_hidden_over_heads():
    # Qwen3-0.6B style: head_dim 128 while 1024 / 8 = 128... use a clear case: 1024/8 = 128 vs 64
    assert parse(cfg(head_dim=64)).layers[0].head_dim_k == 64
    assert parse(cfg()).layers[0].head_dim_k == 1024 // 8


def test_chatglm_kv_channels():
    shape = parse(
        cfg(multi_query_group_num=2, kv_channels=128, hidden_size=4096, num_attention_heads=32)
    )
    assert (shape.layers[0].num_kv_heads, shape.layers[0].head_dim_k) == (2, 128)


def test_gpt2_style_names():
    shape = parse(
        {"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 256, "torch_dtype": "float16"}
    )
    assert shape.num_layers == 2 and shape.layers[0].head_dim_k == 64
    # 2 layers · 2 · 4 heads · 64 · 2 B
    assert shape.bytes_per_token == 2 * 2 * 4 * 64 * 2


def test_text_config_nesting():
    raw = {
        "model_type": "gemma3",
        "torch_dtype": "bfloat16",
        "text_config": cfg(num_key_value_heads=4),
    }
    shape = parse(raw)
    assert shape.num_layers == 4 and set(kv_heads(shape)) == {4}
    assert "text_config.num_key_value_heads" in shape.config_keys


def test_layer_types():
    shape = parse(cfg(sliding_window=64, layer_types=["sliding_attention", "full_attention"] * 2))
    assert [lay.kind for lay in shape.layers] == ["sliding", "full", "sliding", "full"]
    assert shape.layers[0].window == 64


def test_unknown_layer_type_is_named():
    with pytest.raises(ConfigError) as info:
        parse(
            cfg(
                layer_types=["full_attention", "warp_attention", "full_attention", "full_attention"]
            )
        )
    assert "warp_attention" in info.value.message
    assert info.value.code == "config-unverified"


def test_layer_types_wrong_length():
    with pytest.raises(ConfigError, match="3 entries for 4 layers"):
        parse(cfg(layer_types=["full_attention"] * 3))


def test_sliding_window_pattern():
    shape = parse(cfg(num_hidden_layers=12, sliding_window=512, sliding_window_pattern=6))
    assert [i for i, lay in enumerate(shape.layers) if lay.kind == "full"] == [5, 11]


def test_gemma2_alternation():
    shape = parse(cfg(model_type="gemma2", sliding_window=4096))
    assert [lay.kind for lay in shape.layers] == ["sliding", "full", "sliding", "full"]


def test_qwen2_max_window_layers():
    shape = parse(cfg(sliding_window=1024, use_sliding_window=True, max_window_layers=2))
    assert [lay.kind for lay in shape.layers] == ["full", "full", "sliding", "sliding"]
    off = parse(cfg(sliding_window=1024, use_sliding_window=False, max_window_layers=2))
    assert {lay.kind for lay in off.layers} == {"full"}


def test_plain_sliding_window_applies_to_all():
    shape = parse(cfg(model_type="mistral", sliding_window=4096))
    assert {lay.kind for lay in shape.layers} == {"sliding"}


def test_llama4_chunks_with_explicit_no_rope_layers():
    shape = parse(
        cfg(model_type="llama4_text", attention_chunk_size=8192, no_rope_layers=[1, 1, 0, 1])
    )
    assert [lay.kind for lay in shape.layers] == ["chunked", "chunked", "full", "chunked"]
    assert shape.layers[0].window == 8192


def test_full_attention_interval():
    raw = cfg(
        model_type="qwen3_next", num_hidden_layers=8, full_attention_interval=4, num_key_value_heads=2,
        head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4,
    )  # fmt: skip
    shape = parse(raw)
    assert [lay.kind for lay in shape.layers] == (["recurrent"] * 3 + ["full"]) * 2


def test_per_layer_kv_heads_list():
    # OpenELM-style per-layer head counts
    shape = parse(cfg(num_key_value_heads=[1, 2, 3, 4], head_dim=64))
    assert kv_heads(shape) == [1, 2, 3, 4]
    # Σ 2 · heads · 64 · 2 = 256 · (1+2+3+4) = 2,560
    assert shape.bytes_per_token == 2_560


def test_falcon_multi_query_with_n_head():
    shape = parse(
        {
            "model_type": "kvcalc_generic_test",
            "n_layer": 2,
            "n_head": 71,
            "hidden_size": 4544,
            "multi_query": True,
            "torch_dtype": "bfloat16",
        }
    )
    assert set(kv_heads(shape)) == {1} and shape.layers[0].head_dim_k == 64


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (
            {"model_type": "kvcalc_generic_test", "num_attention_heads": 8, "hidden_size": 1024},
            "num_hidden_layers",
        ),
        (cfg(num_key_value_heads="eight"), "num_key_value_heads"),
        (cfg(num_key_value_heads=-1), "num_key_value_heads"),
        (cfg(num_hidden_layers=True), "num_hidden_layers"),
        (cfg(hidden_size=1000, num_attention_heads=3), "not divisible"),
        (cfg(torch_dtype="float13"), "float13"),
        (cfg(attn_layer_period=8), "attn_layer_period"),
        (cfg(layer_types="full"), "layer_types"),
        ([1, 2, 3], "JSON object"),
    ],
)
def test_bad_configs_name_the_key(raw, fragment):
    with pytest.raises(ConfigError) as info:
        parse(raw)
    assert fragment in info.value.message


def test_provenance_records_sources():
    shape = parse(cfg(num_key_value_heads=2))
    assert shape.provenance["num_kv_heads"] == "num_key_value_heads = 2"
    assert shape.provenance["head_dim"] == "hidden_size / num_attention_heads = 1024 / 8 = 128"


@pytest.mark.parametrize(
    "keys, expected",
    [
        ({"max_position_embeddings": 4096}, 4096),
        ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 131072),
        # yarn: original 4096 × factor 40 = 163,840 (DeepSeek-V3)
        ({"max_position_embeddings": 163840,
          "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}}, 163840),
        ({"max_position_embeddings": 4096, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, 8192),
        ({"n_positions": 1024, "max_position_embeddings": 2048}, 1024),  # the smallest key wins
        ({}, 2048),
    ],
)  # fmt: skip
def test_default_max_model_len(keys, expected):
    assert parse(cfg(**keys)).max_model_len == expected
