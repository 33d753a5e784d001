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
    # 8 slots of 32,768 cells x 131,072 B per token = 32 GiB: far over the 6.85 GiB left, so the
    # cache is never allocated and no slot runs (concurrency 0)
    assert {(p.verdict, p.max_concurrency, p.kv_cache_bytes) for p in plans} == {
        ("wont-start", 0.0, 8 * 32768 * 131_072)
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
    # llama.cpp's graphs live in its compute buffer; transformers captures none
    assert [n.value for n in EngineName if not traits(n).cuda_graphs] == ["llamacpp", "hf"]
    assert [n.value for n in EngineName if traits(n).overhead_in_reserve] == ["sglang"]
    assert {n.value: traits(n).cache_tensors.value for n in EngineName if traits(n).cache_tensors} == {
        "vllm": "paged", "sglang": "token-pool", "llamacpp": "cells", "hf": "per-layer",
    }  # fmt: skip
    # verify --run runs transformers or llama.cpp; --fill emulates vLLM's budget
    assert {n.value: traits(n).run_check.value for n in EngineName if traits(n).run_check} == {
        "llamacpp": "llamacpp", "hf": "transformers",
    }  # fmt: skip
    assert [n.value for n in EngineName if traits(n).fill_check] == ["vllm"]
    assert [n.value for n in EngineName if traits(n).long_max_model_len] == ["vllm"]


def test_plans_show_only_what_the_engine_has(cli):
    """No CUDA-graph memory (row or bytes) for llama.cpp and transformers; vLLM keeps its own."""
    for engine in ("llamacpp", "hf"):
        result = cli(
            "plan", "llama-3.1-8b", "--gpu", "H100", "--engine", engine, "--max-model-len", "8K"
        )
        assert result.exit_code == 0, result.stderr
        assert "CUDA graphs" not in result.stdout and "vLLM" not in result.stdout
        data = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--engine", engine, "--max-model-len", "8K",
                   "--json").json  # fmt: skip
        assert data["memory"]["cudagraph_bytes"] == 0
    vllm = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--json").json
    # 0.39 GiB + 16 MiB × 32 layers, vLLM 0.33 subtracts it
    assert vllm["memory"]["cudagraph_bytes"] > 0


def test_sglang_failure_reason_uses_the_tables_numbers(cli):
    """SGLang: rest = (total − non-torch) · mem_fraction_static − weights; the memory table's
    budget is that one, and the reason quotes it (activations live in the reserved rest)."""
    gib = 1 << 30
    args = (
        "plan",
        "llama-3.1-70b",
        "--gpu",
        "H100",
        "-tp",
        "2",
        "--engine",
        "sglang",
        "--max-model-len",
        "32K",
    )
    data = cli(*args, "--gpu-memory-utilization", "0.9", "--json").json
    m = data["memory"]
    assert m["budget_bytes"] == int((m["total_bytes"] - m["non_torch_bytes"]) * 0.9)
    # at TP 2 both free-memory figures pass SGLang's float32 all-reduce in GiB first, which
    # moves the rest by a few hundred bytes (418 B here); the table's budget is the same rest
    rounding = m["budget_bytes"] - m["weights_bytes"] - data["available_kv_bytes"]
    assert 0 <= abs(rounding) < 4096
    # the default 0.827 (H100 80GB, TP 2) leaves (79.22 − 2.10) · 0.827 = 63.78 GiB for 65.74 GiB
    # of weights
    data = cli(*args, "--json").json
    m = data["memory"]
    assert data["verdict"] == "weights-dont-fit" and data["available_kv_bytes"] < 0
    assert (
        f"{m['budget_bytes'] / gib:.2f} GiB"
        in data["verdict_reason"]
        == ("the weights need 65.74 GiB per GPU but the engine may use 63.78 GiB")
    )
    table = cli(*args).stdout
    assert "engine budget ((total − non-torch) × 0.827) │  63.78 GiB" in table
    assert "estimate, outside the budget" in table


def test_vllm_no_memory_reason_adds_up_to_the_table(cli):
    """budget − weights − (activation + non-torch + CUDA graphs, vLLM 0.33 subtracts them all)
    = available: the reason quotes exactly these terms."""
    gib = 1 << 30
    data = cli("plan", "llama-3.1-70b", "--gpu", "H100", "-tp", "2", "--max-model-len", "32K",
               "--gpu-memory-utilization", "0.85", "--json").json  # fmt: skip
    m = data["memory"]
    rest = m["activation_bytes"] + m["non_torch_bytes"] + m["cudagraph_bytes"]
    assert data["verdict"] == "wont-start"
    assert data["available_kv_bytes"] == m["budget_bytes"] - m["weights_bytes"] - rest
    assert data["verdict_reason"] == (
        f"no memory is left for the KV cache ({data['available_kv_bytes'] / gib:.2f} GiB: the engine "
        f"budget {m['budget_bytes'] / gib:.2f} GiB less {m['weights_bytes'] / gib:.2f} GiB of weights "
        f"and {rest / gib:.2f} GiB of activation peak and runtime overhead)"
    )


#: where an engine name may stand outside engines/ and decide nothing: the default engine of
#: PlanInputs, and the program name of a pasted `vllm serve` line
NAMES_ALLOWED = {"planning/inputs.py": 1, "planning/servecmd_program.py": 8}


def test_no_engine_names_compared_outside_the_engines():
    # verify lays tensors out by the engine's traits (cache_tensors, run_check, fill_check), curves
    # ask the engine's fit budget, planning its traits and optional methods
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "kvcalc"
    names = "|".join(n.value for n in EngineName)
    compared = re.compile(
        rf"[=!]= *\"({names})\"|\"({names})\" *[=!]=|\bin \(\"({names})\"|EngineName\.[A-Z]"
    )
    found = {
        path.relative_to(package).as_posix(): len(
            compared.findall(path.read_text(encoding="utf-8"))
        )
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "engines"
    }
    assert {m: n for m, n in found.items() if n} == NAMES_ALLOWED


@pytest.mark.parametrize(
    ("engine", "version", "budget"),
    [
        # vLLM 0.33 holds the null block back: 10 GiB − one 2 MiB block
        ("vllm", "0.33", 10 * 2**30 - 2 * 2**20),
        ("vllm", "0.21", 10 * 2**30),  # before 0.33: the whole budget
        ("sglang", None, None),  # compares blocks with its pool
        ("trtllm", None, None),
    ],
)
def test_the_fit_budget_is_the_engines_own(engine, version, budget):
    from kvcalc.engines.base import fit_budget_bytes

    found = fit_budget_bytes(
        get_engine(engine),
        available_kv_bytes=10 * 2**30,
        bytes_per_block=2 * 2**20,
        version=version,
    )
    assert found == budget
