"""Engine names are resolved once, and code outside ``kvcalc.engines`` asks capability flags.

Issue 12, bug 2: planning compared the raw ``--engine`` text after ``get_engine`` had normalised
it, so ``llama-cpp`` and ``llamacpp`` gave different verdicts for one deployment (Llama-3.1-8B, an
RTX-4090, 32K tokens, ``--batch 8``): ``below-target`` at 1.0 vs ``wont-start`` at 8.0.
"""

from __future__ import annotations

import json

import pytest

from kvcalc.engines import ENGINE_NAMES, get_engine
from kvcalc.engines.names import EngineName, engine_name, traits
from kvcalc.errors import InputError
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from tests.helpers import bundled_shape


@pytest.mark.parametrize(
    ("text", "name"),
    [("vllm", EngineName.VLLM), ("vLLM", EngineName.VLLM), ("llama-cpp", EngineName.LLAMACPP),
     ("llama.cpp", EngineName.LLAMACPP), ("LlamaCpp", EngineName.LLAMACPP), ("llama_cpp", EngineName.LLAMACPP),
     ("transformers", EngineName.HF), ("TensorRT-LLM", EngineName.TRTLLM), (" sglang ", EngineName.SGLANG)],
)  # fmt: skip
def test_every_spelling_resolves_to_one_name(text, name):
    assert engine_name(text) is name
    assert get_engine(text).name == name.value
    assert PlanInputs(gpu="L4", engine=text).engine is name


def test_the_name_is_a_plain_string_outside():
    name = engine_name("llama.cpp")
    assert f"{name}" == str(name) == "llamacpp" and json.dumps(name) == '"llamacpp"'
    assert PlanInputs(gpu="L4", engine="llama-cpp").to_dict()["engine"] == "llamacpp"
    assert ENGINE_NAMES == ("vllm", "sglang", "llamacpp", "hf", "trtllm", "lmdeploy")


def test_an_unknown_engine_is_refused_where_it_enters():
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="L4", engine="tgi")
    assert err.value.code == "unknown-engine"


def test_llama_cpp_spellings_give_one_verdict():
    llama = bundled_shape("llama-3.1-8b")
    plans = [plan(llama, PlanInputs(engine=e, gpu="RTX-4090", max_model_len=32768, batch=8))
             for e in ("llama-cpp", "llamacpp", "llama.cpp")]  # fmt: skip
    # 8 slots of 32,768 cells x 131,072 B per token = 32 GiB: far over the 6.85 GiB left
    assert {(p.verdict, p.max_concurrency, p.kv_cache_bytes) for p in plans} == {
        ("wont-start", 8.0, 8 * 32768 * 131_072)
    }


def test_a_llama_cpp_plan_does_not_speak_of_vllm():
    llama = bundled_shape("llama-3.1-8b")
    result = plan(
        llama, PlanInputs(engine="llama.cpp", gpu="RTX-4090", max_model_len=8192, batch=2)
    )
    assert [n for n in result.notes if "vLLM" in n] == []
    vllm = plan(llama, PlanInputs(gpu="RTX-4090", max_model_len=8192))
    assert not any("uncalibrated for" in n for n in vllm.notes)  # the estimate is vLLM's own
    assert any("uncalibrated for llama.cpp" in n for n in result.notes)


def test_capability_flags():
    assert [n.value for n in EngineName if traits(n).fixed_pool] == ["llamacpp", "hf"]
    assert [n.value for n in EngineName if traits(n).block_pool] == [
        "vllm",
        "sglang",
        "trtllm",
        "lmdeploy",
    ]
    assert [n.value for n in EngineName if traits(n).overhead_calibrated] == ["vllm"]
