"""A vLLM-spelled setting an engine does not read is refused, not dropped.

Before, ``--enforce-eager`` with ``--engine sglang`` printed "CUDA graphs 0 B" while SGLang's graph
reserve (``memory_hook.reserve_for_graph_mb``, inside its memory fraction) and so its pool stayed
as they were; ``--cudagraph-mode`` with llama.cpp changed nothing at all. Each engine's list is
``EngineTraits.unread_settings`` (``kvcalc/engines/names.py``).
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from kvcalc.engines.names import EngineName, traits
from kvcalc.errors import InputError
from kvcalc.planning.inputs import PlanInputs

#: a value for each setting that an engine may not read
GIVEN = {
    "max_num_batched_tokens": 4096, "enforce_eager": True, "enable_prefix_caching": False,
    "cudagraph_mode": "piecewise", "cudagraph_capture_sizes": (1, 2, 4),
    "max_cudagraph_capture_size": 4, "async_scheduling": False, "disable_sliding_window": True,
}  # fmt: skip
CASES = [(e, name) for e in EngineName for name, _ in traits(e).unread_settings]


def test_every_unread_setting_is_a_plan_input():
    names = {f.name for f in fields(PlanInputs)}
    assert {name for _, name in CASES} <= names
    assert {name for _, name in CASES} <= set(GIVEN)


@pytest.mark.parametrize(("engine", "name"), CASES, ids=[f"{e.value}-{n}" for e, n in CASES])
def test_an_unread_setting_is_refused(engine, name):
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H100-80GB", engine=engine.value, **{name: GIVEN[name]})
    assert err.value.code == "unmodelled-option"
    assert f"not read by {traits(engine).name.display}" in err.value.message


def test_vllm_reads_them_all():
    assert traits("vllm").unread_settings == ()
    PlanInputs(gpu="H100-80GB", engine="vllm", **GIVEN)


def test_the_lists():
    unread = {e: {n for n, _ in traits(e).unread_settings} for e in EngineName}
    graphs = {
        "cudagraph_mode",
        "cudagraph_capture_sizes",
        "max_cudagraph_capture_size",
        "disable_sliding_window",
    }
    # vLLM's CUDA-graph settings, its async scheduling and --disable-sliding-window: vLLM's alone
    assert all(graphs | {"async_scheduling"} <= unread[e] for e in EngineName if e.value != "vllm")
    # SGLang reads prefix caching (--disable-radix-cache) but not vLLM's batch or eager settings
    assert unread[EngineName.SGLANG] == graphs | {"async_scheduling", "max_num_batched_tokens",
                                                  "enforce_eager"}  # fmt: skip
    assert unread[EngineName.LLAMACPP] == graphs | {"async_scheduling", "max_num_batched_tokens",
                                                    "enforce_eager", "enable_prefix_caching"}  # fmt: skip


def test_the_message_names_the_flag_as_given():
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H100-80GB", engine="llamacpp", enable_prefix_caching=False,
                   enforce_eager=True)  # fmt: skip
    assert err.value.message.startswith("--enforce-eager, --no-enable-prefix-caching: not read by")
