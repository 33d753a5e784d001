"""Qwen2-family configs with ``use_sliding_window`` true, as vLLM 0.33 serves them, with and without
``--disable-sliding-window`` (``tests/fixtures/vllm_0_33/qwen_use_sliding_window.json``, recorded
with the reference harness):

- ``qwen2.py``'s ``Qwen2Model`` (Qwen2, Qwen3, MiMo and the VL/OCR models built on them) asserts
  that transformers' ``layer_types`` are one kind: ``max_window_layers`` below the layer count is
  refused ("Sliding window for some but all layers is not supported"), 0 slides every layer, the
  layer count none;
- Qwen3-MoE's config class has no ``layer_types`` (nor ``max_window_layers``), so
  ``CacheConfig.sliding_window`` makes every layer slide;
- ``--disable-sliding-window`` caps the length at the config's ``sliding_window`` whether the
  layers slide or not (4,096 taken, 8,192 refused), every layer full attention.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import config_folder

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "vllm_0_33" / "qwen_use_sliding_window.json").read_text()
)
CASES = [
    pytest.param(name, s, id=f"{name[11:-5]}-{s['max_model_len']}"
                 f"{'-disable-sliding-window' if s['disable_sliding_window'] else ''}")
    for name, m in FIXTURE["models"].items()
    for s in m["scenarios"]
]  # fmt: skip
KIND = {"FullAttentionSpec": "full", "SlidingWindowSpec": "sliding"}


def _plan(name: str, scenario: dict):
    folder = config_folder(FIXTURE["models"][name]["config"], "kvcalc-qwen-swa-")
    return plan_reference(
        folder,
        PlanInputs(gpu="H200", max_model_len=scenario["max_model_len"],  # weights fit: Qwen3-30B-A3B
                   kv_cache_memory_bytes=20 * GIB,
                   disable_sliding_window=scenario["disable_sliding_window"] or None),
    )  # fmt: skip


def test_the_grid():
    statuses = [s["status"] for _, s in (c.values for c in CASES)]
    assert len(CASES) == 44 and statuses.count("rejected") == 15


@pytest.mark.parametrize(("name", "scenario"), CASES)
def test_equals_vllm(name, scenario):
    if scenario["status"] == "ok":
        plan = _plan(name, scenario)
        assert plan.verdict != "wont-start", plan.verdict_reason
        assert (plan.block_size, plan.num_blocks, plan.kv_cache_tokens) == (
            scenario["block_size"], scenario["num_blocks"], scenario["gpu_kv_cache_size_tokens"],
        )  # fmt: skip
        assert abs(plan.max_concurrency - scenario["max_concurrency"]) < 1e-4
        assert [(g.num_layers, g.kind.value) for g in plan.groups] == [
            (n, KIND[spec]) for n, spec, _ in scenario["groups"]
        ]
        return
    # vLLM's assertion text, less its closing "Please open an issue to discuss this feature."
    error = scenario["error"].removesuffix(" Please open an issue to discuss this feature.")
    if error.startswith("Sliding window for some but all layers"):
        if scenario["disable_sliding_window"]:  # the length is checked first, then the build fails
            plan = _plan(name, scenario)
            assert plan.verdict == "wont-start"
            assert plan.verdict_reason.startswith(f"vllm refuses to start: {error}")
        else:
            with pytest.raises(InputError) as caught:
                _plan(name, scenario)
            assert caught.value.code == "unsupported-model"
            assert f"vLLM 0.33 refuses to start: {error}" in caught.value.message
    else:  # the length: the window caps it under --disable-sliding-window
        assert "User-specified max_model_len (8192) is greater than the derived" in error
        plan = _plan(name, scenario)
        assert plan.verdict == "wont-start"
        assert "derived max_model_len (sliding_window=4096.0" in plan.verdict_reason
