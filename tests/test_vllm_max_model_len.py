"""vLLM 0.33's derived max_model_len and its refusal, quoted with its detail, on real configs.

``fixtures/vllm_0_33/max_model_len.json`` was recorded with the vLLM reference harness: bundled
configs with a RoPE scaling or ``model_max_length`` set, max_model_len unset (vLLM derives it) and
1,000,000 (vLLM refuses: ``_get_and_verify_max_len``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bundled_config

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "vllm_0_33" / "max_model_len.json").read_text()
)
H100 = {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_compute_capability": (9, 0)}  # fmt: skip


def model(name: str):
    m = FIXTURE["models"][name]
    alias = m["base_config"][:-5].split("--", 1)[1].lower()
    return parse_config({**bundled_config(alias), **m["set"]}, name=name)


def plan(shape, length: int):
    return get_engine("vllm").plan_kv_cache(
        EngineRequest(model=shape, max_model_len=length, available_kv_bytes=20 * GIB, **H100)
    )


@pytest.mark.parametrize("name", sorted(FIXTURE["models"]))
def test_derived_length_and_refusal_equal_vllms(name):
    m = FIXTURE["models"][name]
    shape = model(name)
    assert shape.max_model_len == m["derived_max_model_len"]
    p = plan(shape, m["refused_max_model_len"])
    assert p.refusal is not None and p.refusal.startswith(m["refusal"])
    assert not plan(shape, m["derived_max_model_len"]).refusal


def test_yarn_is_not_scaled_again():
    # Qwen3-8B with YaRN factor 4 over 32,768: vLLM 0.33 keeps max_position_embeddings 40,960
    # (older releases multiplied original_max_position_embeddings: 131,072)
    shape = model("qwen3-8b-yarn4")
    assert shape.max_model_len == 40_960
    assert plan(shape, 131_072).refusal


def test_the_detail_names_key_length_and_model_max_length():
    # Llama-2-7B: max_position_embeddings 4,096, shown as vLLM's float; no model_max_length
    p = plan(parse_config(bundled_config("llama-2-7b-hf"), name="llama-2-7b-hf"), 32_768)
    assert p.refusal.startswith(
        "User-specified max_model_len (32768) is greater than the derived max_model_len "
        "(max_position_embeddings=4096.0 or model_max_length=None in model's config.json). "
        "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    )
    # GPT-2 spells it n_positions; its config class aliases it to max_position_embeddings
    gpt2 = plan(parse_config(bundled_config("gpt2"), name="gpt2"), 4_096)
    assert "(max_position_embeddings=1024.0 or model_max_length=None" in gpt2.refusal
