"""The registry of verified architecture families: what kvcalc knows, and the refusal of the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import families, parse_config
from kvcalc.hfconfig.family import cache_relevant_keys
from kvcalc.sources.bundled import bundled_models

LLAMA_LIKE = {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
              "hidden_size": 512, "intermediate_size": 1024, "vocab_size": 1000,
              "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}  # fmt: skip


def test_every_bundled_model_is_a_registered_family():
    models = bundled_models()
    assert len(models) >= 29
    for model in models:
        shape = parse_config(model.load(), name=model.hf_id)
        assert shape.layout_validated and shape.family, model.hf_id


def test_each_model_type_has_one_family():
    owners: dict[str, str] = {}
    for family in families.all_families():
        for model_type in family.model_types:
            assert model_type not in owners, (model_type, owners.get(model_type), family.name)
            owners[model_type] = family.name
        assert family.architectures or family.model_types, family.name


def test_the_index_names_the_module_of_every_model_type():
    # the static index the registry imports through must equal what the modules declare
    from kvcalc.hfconfig.families._index import MODULE_OF_MODEL_TYPE

    declared = {mt: f.module for f in families.all_families() for mt in f.model_types}
    assert MODULE_OF_MODEL_TYPE == declared


def test_reading_a_config_imports_only_its_family_module():
    code = (
        "import json, sys\n"
        "from kvcalc.hfconfig import parse_config\n"
        f"parse_config({dict(LLAMA_LIKE, model_type='llama')!r}, name='t')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kvcalc.hfconfig.families.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
    assert json.loads(done.stdout) == [
        "kvcalc.hfconfig.families._index",
        "kvcalc.hfconfig.families.llama",
    ]


def _refusal(raw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, name="t")
    assert info.value.code == "config-unverified"
    return info.value


def test_unknown_model_type_is_refused_by_name():
    err = _refusal({**LLAMA_LIKE, "model_type": "foobar", "architectures": ["FooForCausalLM"]})
    assert "'foobar'" in err.message and "FooForCausalLM" in err.message
    assert "--trust-layout" in (err.hint or "")


def test_no_model_type_is_refused():
    assert "no model_type" in _refusal(LLAMA_LIKE).message


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"num_kv_shared_layers": 2}, "num_kv_shared_layers"),  # Gemma-3n KV sharing
        ({"attn_layer_indices": [1]}, "attn_layer_indices"),  # Bamba
        (
            {"hybrid_layer_pattern": [0, 1, 0, 1], "swa_head_dim": 64},
            "hybrid_layer_pattern",
        ),  # MiMo-V2
        ({"swa_num_key_value_heads": 4}, "swa_num_key_value_heads"),
        ({"index_topk": 2048}, "index_topk"),  # DeepSeek-V3.2 indexer
        ({"mamba_d_state": 16}, "mamba_d_state"),
    ],
)
def test_unread_cache_keys_refuse_a_known_family(extra, key):
    err = _refusal({**LLAMA_LIKE, "model_type": "llama", **extra})
    assert key in err.message and "'llama'" in err.message
    assert key in err.keys


def test_foreign_architecture_refuses_a_known_model_type():
    err = _refusal(
        {**LLAMA_LIKE, "model_type": "llama", "architectures": ["Step3p7FlashForCausalLM"]}
    )
    assert "Step3p7FlashForCausalLM" in err.message


def test_unknown_layer_types_value_is_refused():
    cfg = {**LLAMA_LIKE, "model_type": "gpt_oss", "sliding_window": 128, "head_dim": 64,
           "layer_types": ["sliding_attention", "full_attention", "chunked_attention", "full_attention"]}  # fmt: skip
    assert "chunked_attention" in _refusal(cfg).message


def test_trust_layout_plans_plain_attention():
    raw = {**LLAMA_LIKE, "model_type": "foobar", "sliding_window": 128}
    shape = parse_config(raw, name="t", trust_layout=True)
    assert not shape.layout_validated and shape.family is None
    assert {layer.kind for layer in shape.layers} == {"full"}  # the window is not guessed at
    # 4 layers · 2 (K, V) · 2 heads · 64 · 2 B = 2,048 B/token
    assert shape.bytes_per_token == 2_048


def test_cache_relevant_keys_ignore_routing_and_generic_defaults():
    found = cache_relevant_keys({"norm_topk_prob": True, "topk_group": 1, "add_cross_attention": False,
                                 "chunk_size_feed_forward": 0, "kv_lora_rank": 512, "sliding_window": None})  # fmt: skip
    assert found == {"kv_lora_rank": "latent rank"}


# -- CLI ---------------------------------------------------------------------------------------
@pytest.fixture
def foobar(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_LIKE, "model_type": "foobar"}))
    return str(tmp_path)


def test_cli_refuses_unverified(cli, foobar):
    for command in (["inspect", foobar], ["plan", foobar, "--gpu", "H100-80GB"]):
        result = cli(*command)
        assert result.exit_code == 2
        assert (
            result.stderr.startswith("error[config-unverified]: ") and "'foobar'" in result.stderr
        )


def test_cli_trust_layout_warns_and_marks_json(cli, foobar):
    table = cli("plan", foobar, "--gpu", "H100-80GB", "--trust-layout", "--no-throughput")
    assert table.exit_code == 0, table.stderr
    assert table.stdout.splitlines()[0].startswith("warning: ")
    data = cli("plan", foobar, "--gpu", "H100-80GB", "--trust-layout", "--json").json
    assert data["layout_validated"] is False
    inspected = cli("inspect", foobar, "--trust-layout", "--json").json
    assert inspected["layout_validated"] is False and inspected["unverified_keys"] == []
    assert inspected["family"] is None


def test_cli_json_says_validated(cli):
    assert (
        cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--json").json["layout_validated"] is True
    )
    data = cli("inspect", "llama-3.1-8b", "--json").json
    assert data["layout_validated"] is True and data["family"] == "llama"


def test_inspect_explain_lists_read_and_ignored_keys(cli):
    out = cli("inspect", "llama-3.1-8b", "--explain").stdout
    assert "read" in out and "ignored" in out
    data = cli("inspect", "llama-3.1-8b", "--json").json
    assert "num_key_value_heads" in data["config_keys"]
    assert (
        "vocab_size" in data["ignored_keys"] and "num_key_value_heads" not in data["ignored_keys"]
    )


def test_vllm_refusal_beats_config_unverified(cli, tmp_path):
    """Step-3.7-Flash is no registered family, and vLLM 0.33 itself refuses its architecture: planning
    it with vLLM gives vLLM's reason; other engines get config-unverified."""
    raw = {**LLAMA_LIKE, "model_type": "step3p7", "architectures": ["Step3p7FlashForCausalLM"]}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    result = cli("plan", str(tmp_path), "--gpu", "H100-80GB")
    assert result.exit_code == 2 and result.stderr.startswith("error[unsupported-model]: ")
    assert "['Step3p7FlashForCausalLM'] are not supported for now" in result.stderr
    other = cli("plan", str(tmp_path), "--gpu", "H100-80GB", "--engine", "sglang")
    assert other.stderr.startswith("error[config-unverified]: ")
