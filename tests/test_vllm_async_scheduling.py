"""vLLM 0.33's async scheduling and the sliding-window and chunked-attention reserves.

``VllmConfig.max_in_flight_tokens`` is ``max_concurrent_batches × max_num_batched_tokens``
(``config/vllm.py``): 2 batches with async scheduling (on by default), 1 per pipeline stage
without it (``--no-async-scheduling``). The reserves of recycling-aware specs hold those tokens
(``v1/kv_cache_interface.py``: ``cdiv(min(W − 1 + in_flight, L), block) + 1`` for a window,
``cdiv(min(C + in_flight, L), block)`` for a chunk). Each record of
``tests/fixtures/vllm_0_33/async_scheduling.json`` is vLLM 0.33's own sizing (``deploy_probe.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import parse_serve_command
from kvcalc.units import GIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures/vllm_0_33/async_scheduling.json").read_text()
)
RECORDS = FIXTURE["records"]


def _plan(model: str, async_scheduling: bool | None, **kw):
    # the KV budget is given (as recorded); weights given too, so that Llama 4 Scout's 218 GB do
    # not stop the plan on one H100 before its capacity line (the KV sizing does not read them)
    inputs = PlanInputs(gpu="H100-80GB", kv_cache_memory_bytes=20 * GIB, max_model_len=32768,
                        weights_memory_bytes=10 * GIB, async_scheduling=async_scheduling, **kw)  # fmt: skip
    return plan_reference(model, inputs, with_suggestions=False)


def test_the_recordings_cover_both_settings():
    seen = {(r["model"], r["async_scheduling"], r["resolved_async_scheduling"]) for r in RECORDS}
    assert ("gpt-oss-20b", None, True) in seen  # on by default (the V2 model runner)
    assert ("gpt-oss-20b", False, False) in seen
    # a window (gpt-oss: 128; Gemma 3: 512) and a chunk (Llama 4 Scout: 8,192)
    assert {r["model"] for r in RECORDS} == {"gpt-oss-20b", "gemma-3-1b-it",
                                             "llama-4-scout-17b-16e-instruct"}  # fmt: skip


@pytest.mark.parametrize(
    "record", RECORDS, ids=[f"{r['model']}-{r['async_scheduling']}" for r in RECORDS]
)
def test_kvcalc_equals_vllm(record):
    result = _plan(record["model"], record["async_scheduling"])
    assert (result.block_size, result.num_blocks, result.kv_cache_tokens) == (
        record["block_size"],
        record["num_blocks"],
        record["kv_cache_tokens"],
    )
    assert round(result.max_concurrency, 6) == record["max_concurrency"]
    assert record["log_line"] in result.log_lines


def test_gpt_oss_reserve_by_hand():
    # gpt-oss-20b at 32,768 tokens, 20 GiB: 54,613 blocks of 16 (recorded). The full layers take
    # cdiv(32,768, 16) = 2,048 blocks a request; the 128-token window cdiv(127 + in_flight, 16) + 1:
    # async, 2 × 8,192 in flight: 1,033 → 54,613 / 3,081 = 17.73; without, 8,192: 521 → 21.26
    on, off = _plan("gpt-oss-20b", None), _plan("gpt-oss-20b", False)
    assert on.num_blocks == off.num_blocks == 54613
    assert round(on.max_concurrency, 4) == round(54613 / (2048 + 1033), 4) == 17.7257
    assert round(off.max_concurrency, 4) == round(54613 / (2048 + 521), 4) == 21.2585


def test_without_async_scheduling_pipeline_stages_are_the_batches():
    # config/vllm.py max_concurrent_batches: pp_size without async scheduling (read, not recorded:
    # the harness runs PP 1); with it, PP + 1 on the V2 model runner
    notes = _plan("gpt-oss-20b", False, pipeline_parallel_size=2).notes
    assert any("max_in_flight_tokens = 16,384 (2 × 8,192)" in n for n in notes), notes


def test_the_serving_flags_are_read():
    off = parse_serve_command("vllm serve m --no-async-scheduling")
    on = parse_serve_command("vllm serve m --async-scheduling")
    assert off.values["async_scheduling"] is False and on.values["async_scheduling"] is True
    assert off.unmodelled == on.unmodelled == ()


def test_other_engines_refuse_it():
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H100-80GB", engine="sglang", async_scheduling=False)
    assert err.value.code == "unmodelled-option" and "vLLM's" in err.value.message
