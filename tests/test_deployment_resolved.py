"""A plan resolves its deployment once (:mod:`kvcalc.planning.deployment`): the GPU and the engine
are looked up once per plan, its suggestions included, and the engine's setup is resolved once per
request that differs in more than its KV budget."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest
from helpers import bundled_shape

import kvcalc.engines
import kvcalc.model.gpus
from kvcalc.engines.base import EngineRequest
from kvcalc.engines.vllm.engine import VllmEngine
from kvcalc.planning.api import plan_reference
from kvcalc.planning.core import plan
from kvcalc.planning.deployment import Deployment
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of get_gpu / get_engine calls, wherever a module imported them from."""
    counts = {"get_gpu": 0, "get_engine": 0}
    originals = {"get_gpu": kvcalc.model.gpus.get_gpu, "get_engine": kvcalc.engines.get_engine}

    def counting(name):
        original = originals[name]

        def wrapper(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)

        return wrapper

    wrappers = {name: counting(name) for name in originals}
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("kvcalc"):
            continue
        for name, original in originals.items():
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, wrappers[name])
    return counts


def test_a_plan_and_its_suggestions_look_the_gpu_and_the_engine_up_once(lookups):
    # Llama-3.1-70B in bf16 is 131 GiB of weights: weights-dont-fit on one H100, and the
    # suggestions re-plan it at TP 2 (and fp8 weights) — six plans in all before this change,
    # which looked the GPU up 14 times and the engine 7 times
    result = plan_reference("llama-3.1-70b", PlanInputs(gpu="H100-80GB"))
    assert result.verdict == "weights-dont-fit"
    assert result.suggestions
    assert lookups == {"get_gpu": 1, "get_engine": 1}


def test_replace_resolves_again_only_what_the_change_names():
    d = Deployment.resolve(PlanInputs(gpu="H100-80GB", engine="vllm"))
    assert d.gpu is not None and d.gpu.name == "H100-SXM"
    assert Deployment.resolve(d) is d
    longer = d.replace(max_model_len=8192)
    assert longer.gpu is d.gpu and longer.engine is d.engine
    assert longer.inputs.max_model_len == 8192
    other = d.replace(gpu="A100-80GB")
    assert other.gpu is not None and "A100" in other.gpu.name
    assert other.memory_bytes == other.gpu.memory_bytes != d.memory_bytes
    assert other.engine is d.engine
    sglang = d.replace(engine="sglang")
    assert sglang.engine.name == "sglang" and sglang.gpu is d.gpu
    # --gpu-memory wins over the catalog's size, as the engines read it
    given = d.replace(gpu_memory_bytes=40 * GIB)
    assert given.memory_bytes == 40 * GIB and given.gpu is d.gpu


def test_planning_a_resolved_deployment_is_planning_its_inputs():
    model = bundled_shape("qwen3-8b")
    inputs = PlanInputs(gpu="L40S", max_model_len=32768, batch=64)
    assert plan(model, Deployment.resolve(inputs)) == plan(model, inputs)


@pytest.mark.parametrize(
    "model_name", ["llama-3.1-8b", "gpt-oss-20b", "qwen3-next-80b-a3b-thinking"]
)
def test_one_engine_sizes_every_budget_as_a_fresh_one_would(model_name):
    """The setup kept per engine instance never leaks one budget's numbers into another's."""
    model = bundled_shape(model_name)
    engine = VllmEngine()
    base = EngineRequest(model=model, max_model_len=32768, available_kv_bytes=GIB,
                         gpu_memory_bytes=80 * GIB)  # fmt: skip
    for gib in (1, 7, 20, 3, 20):
        request = replace(base, available_kv_bytes=gib * GIB)
        assert engine.plan_kv_cache(request) == VllmEngine().plan_kv_cache(request)
    # a change the setup reads (the cache dtype) is a new setup, not the kept one
    fp8 = replace(base, kv_cache_dtype="fp8", available_kv_bytes=20 * GIB)
    assert engine.plan_kv_cache(fp8) == VllmEngine().plan_kv_cache(fp8)
    assert (
        engine.plan_kv_cache(fp8).num_blocks
        != engine.plan_kv_cache(replace(fp8, kv_cache_dtype="auto")).num_blocks
    )
