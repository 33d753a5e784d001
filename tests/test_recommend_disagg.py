"""``kvcalc recommend --disaggregated``: the decode pool is the ordinary search at the workload, the
prefill pool the search for one request at ``max_model_len``, and their ratio is the arithmetic of
the two ceilings, checked here against ``kvcalc throughput``'s own prefill estimate and by
pairing every row by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import jsonschema
import pytest
from golden import assert_golden

from kvcalc.engines.names import EngineName
from kvcalc.planning.api import disaggregated_reference, recommend_reference, resolve_model_cached
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.recommend_result import Requirements, Search
from kvcalc.planning.throughput import resolve_roofline, throughput_ceiling
from kvcalc.render.json_shapes import schema

GPUS = ("L40S", "A100-80GB", "H100-SXM")
BASE = PlanInputs(gpu="L40S", max_model_len=32768, prompt_len=4000, output_len=500)
SEARCH = Search(gpus=GPUS, engines=(EngineName.VLLM,), top=3)
ASKED = Requirements(concurrency=64)


@pytest.fixture(scope="module")
def pools():
    return disaggregated_reference("llama-3.1-8b", BASE, ASKED, SEARCH)


def test_decode_pool_is_the_search_at_the_workload(pools):
    assert pools.decode == recommend_reference("llama-3.1-8b", BASE, ASKED, SEARCH)
    # every decode row holds 64 requests of prompt + output = 4,500 tokens, whole from admission
    assert all(c.plan.workload_tokens == 4500 for c in pools.decode.candidates)
    assert all(c.total_concurrency >= 64 for c in pools.decode.candidates)


def test_prefill_pool_is_one_request_at_max_model_len(pools):
    alone = replace(BASE, prompt_len=None, output_len=None)
    assert pools.prefill == recommend_reference("llama-3.1-8b", alone,
                                                Requirements(concurrency=1), SEARCH)  # fmt: skip
    for c in pools.prefill.candidates:
        assert c.plan.workload_tokens is None and c.plan.max_model_len == 32768
        assert c.plan.max_concurrency >= 1


def test_prefill_ceilings_are_kvcalc_throughputs(pools):
    """Each prefill row's rate is what ``kvcalc throughput --prompt-len 4000`` says of its plan."""
    shape = resolve_model_cached("llama-3.1-8b").shape
    for c, rate in zip(pools.prefill.candidates, pools.prefill_tokens_per_s, strict=True):
        inputs = replace(BASE, gpu=c.gpu, tensor_parallel_size=c.tensor_parallel_size,
                         kv_cache_dtype=c.kv_cache_dtype)  # fmt: skip
        report = throughput_ceiling(shape, c.plan, inputs, resolve_roofline(inputs), batches=(1,))
        assert report.prefill is not None
        assert rate == pytest.approx(report.prefill.tokens_per_s * c.kv_pools)


def test_ratio_is_the_cheapest_pairing_by_hand(pools):
    ratio = pools.ratio
    assert ratio is not None
    totals = []
    for i, d in enumerate(pools.decode.candidates, start=1):
        for j, (p, rate) in enumerate(
            zip(pools.prefill.candidates, pools.prefill_tokens_per_s, strict=True), start=1
        ):
            # decode requests/s = decode ceiling / 500 output tokens; prefill = rate / 4,000
            quotient = (d.decode_tokens_per_s_upper_bound / 500) / (rate / 4000)
            count = math.ceil(quotient)
            totals.append((d.usd_per_hour + count * p.usd_per_hour, i, j, quotient, count))
    usd, i, j, quotient, count = min(totals)
    assert (ratio.decode_row, ratio.prefill_row) == (i, j)
    assert ratio.usd_per_hour == pytest.approx(usd)
    assert ratio.prefill_per_decode == pytest.approx(quotient)
    assert ratio.prefill_deployments == count
    d = pools.decode.candidates[i - 1]
    assert ratio.decode_requests_per_s == pytest.approx(d.decode_tokens_per_s_upper_bound / 500)


def test_the_workload_is_required(cli):
    result = cli("recommend", "llama-3.1-8b", "--concurrency", "4", "--disaggregated")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(
        "error[usage]: --disaggregated needs the workload: --prompt-len and --output-len"
    )


def test_json_matches_its_schema(cli):
    result = cli("recommend", "qwen3-8b", "--concurrency", "16", "--max-model-len", "16K",
                 "--prompt-len", "2000", "--output-len", "300", "--gpu", "L40S", "--gpu", "H100",
                 "--top", "2", "--disaggregated", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    jsonschema.validate(result.json, schema("recommend-disaggregated"))
    assert result.json["decode"]["concurrency"] == 16
    assert result.json["prefill"]["concurrency"] == 1
    printed = cli("schema", "recommend-disaggregated")
    assert (
        printed.exit_code == 0
        and printed.json["title"] == "kvcalc recommend --disaggregated --json"
    )


def test_golden(cli):
    result = cli("recommend", "llama-3.1-8b", "--max-model-len", "32K", "--concurrency", "64",
                 "--prompt-len", "4000", "--output-len", "500", "--gpu", "L40S", "--gpu",
                 "A100-80GB", "--gpu", "H100", "--top", "3", "--disaggregated")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert_golden("recommend_disaggregated_llama31_8b", result)
    commands = ("1  kvcalc", "2  kvcalc", "3  kvcalc", "vllm serve")  # one line each, to paste
    prose = [line for line in result.stdout.splitlines()
             if not line.lstrip().startswith(commands)]  # fmt: skip
    assert max(len(line) for line in prose) <= 80
