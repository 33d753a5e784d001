"""A config.json without ``num_key_value_heads`` or ``head_dim`` is read with its config class's
defaults, as vLLM builds it (``kvcalc/data/class_attention_defaults.json``, recorded from the
classes vLLM 0.33 uses: ``scripts/class_attention_defaults.py``).

``fixtures/vllm_0_33/class_default_keys.json``: published configs with the key removed, sized by
vLLM 0.33's own code (the reference harness, auto/fp8 × TP 1/8 × 4K/32K × 20 GiB).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_sized, harness_cases, harness_plan, refusal_class

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import parse_config
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.reader import ConfigReader

HERE = Path(__file__).parent
DATA = json.loads((HERE / "fixtures" / "vllm_0_33" / "class_default_keys.json").read_text())
TABLE = json.loads((HERE.parent / "kvcalc" / "data" / "class_attention_defaults.json").read_text())


def _layer(name: str):
    return parse_config(DATA["models"][name]["config"], name=name).layers[0]


def test_the_table_says_where_it_comes_from():
    p = TABLE["provenance"]
    assert p["kind"] == "engine-recording" and p["engine"].startswith("vLLM 0.33")
    assert p["transformers"] == "5.20.2"
    values = {v for e in TABLE["defaults"].values() for v in e.values()}
    assert all(v is None or v == "derived" or isinstance(v, int) and v > 0 for v in values)
    # the classes' own defaults, as their sources write them: MistralConfig(num_key_value_heads=8),
    # Qwen2Config(num_key_value_heads=32), Qwen3Config(head_dim=128), GemmaConfig(head_dim=256)
    d = TABLE["defaults"]
    assert (d["mistral"]["num_key_value_heads"], d["qwen2"]["num_key_value_heads"]) == (8, 32)
    assert (d["qwen3"]["head_dim"], d["gemma"]["head_dim"]) == (128, 256)
    # LlamaConfig fills the query heads where num_key_value_heads is None: not listed
    assert "llama" not in d


def test_a_missing_key_takes_the_class_default():
    # Mistral-7B-v0.1 without num_key_value_heads: MistralConfig's 8 (the 32 query heads before)
    assert _layer("mutant--mistral-7b-no-kv-heads.json").kv_heads == 8
    # Qwen3-0.6B without head_dim: Qwen3Config's 128, not 1,024 / 16 = 64
    assert _layer("mutant--qwen3-0.6b-no-head-dim.json").k_dim == 128
    # Gemma-2-9B without head_dim: Gemma2Config's 256, not 3,584 / 16 = 224
    assert _layer("mutant--gemma-2-9b-no-head-dim.json").k_dim == 256


@pytest.mark.parametrize(("name", "row"), harness_cases(DATA))
def test_matches_vllm(name, row):
    if "error" in row:
        # Qwen2.5-7B without num_key_value_heads: Qwen2Config's 32 KV heads do not divide its 28
        # query heads ("num_heads (28) is not divisible by num_kv_heads (32)"), or TP 8 its heads
        codes = {"unsupported-model": "heads", "invalid-parallelism": "heads",
                 "max-model-len-exceeded": "max-model-len"}  # fmt: skip
        got = refusal_class(lambda: harness_plan(DATA, name, row), codes)
        want = "max-model-len" if "max_model_len" in row["error"] else "heads"
        assert got == want, row["error"]
        return
    p = harness_plan(DATA, name, row)
    assert_sized(p, row)


def test_a_class_that_derives_the_key_is_refused(monkeypatch):
    from kvcalc.hfconfig import class_defaults

    monkeypatch.setattr(class_defaults, "_table", lambda: {"x": {"head_dim": "derived"}})
    with pytest.raises(ConfigError) as refused:
        class_default(ConfigReader({"model_type": "x"}, source="c"), "head_dim")
    assert refused.value.code == "config-missing-key" and "head_dim" in refused.value.message


FAMILY_READERS = [
    ("hybrid_families.json", "synthetic--bamba-defaults.json"),
    ("hybrid_families.json", "synthetic--falcon-h1-defaults.json"),
    ("registry_families_2026_12.json", "synthetic--hy-v3-vllm-moe-keys.json"),
    ("hybrid_families.json", "ai21labs--AI21-Jamba-1.5-Mini.json"),
    ("registry_families_2026_12.json", "synthetic--laguna-40-heads-full-window-2048.json"),
    ("hybrid_families.json", "LiquidAI--LFM2-1.2B.json"),
    ("hybrid_families.json", "synthetic--lfm2-moe-defaults.json"),
    ("hybrid_families.json", "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"),
]


@pytest.mark.parametrize(("fixture", "name"), FAMILY_READERS)
def test_the_family_readers_take_the_class_default_too(fixture, name):
    # recorded configs of the families that read their KV heads themselves, the key removed: the
    # class's default (Jamba, Bamba, Falcon-H1, Nemotron-H, HY V3, Laguna, LFM2: 8), not the heads
    config = json.loads((HERE / "fixtures" / "vllm_0_33" / fixture).read_text())["models"][name]
    config = json.loads(json.dumps(config["config"]))
    text = config.get("text_config", config)
    text.pop("num_key_value_heads", None)
    model_type = text.get("model_type", config["model_type"])
    want = TABLE["defaults"][model_type]["num_key_value_heads"]
    layers = parse_config(config, name=name).layers
    # Falcon-H1's layers hold their attention beside the mixer (ParallelHybrid.attention)
    heads = {getattr(getattr(x, "attention", x), "kv_heads", None) for x in layers}
    assert heads - {None} == {want}, (model_type, heads)
