"""vLLM 0.33's ``--num-gpu-blocks-override`` (``CacheConfig.num_gpu_blocks_override``), the serve
flag and kvcalc's ``-E num_gpu_blocks_override`` alike.

vLLM's ``kv_cache_planning.py`` replaces the block count by the override and checks the first
request against override × bytes per block instead of the memory it measured. Every record of
``tests/fixtures/vllm_0_33/num_gpu_blocks_override.json`` is vLLM 0.33's own sizing with it (the
reference harness, 20 GiB measured): the blocks, tokens, concurrency and log line where it sizes,
its refusal where the override is too small for one request.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import parse_serve_command

RECORDS = json.loads(
    (Path(__file__).parent / "fixtures/vllm_0_33/num_gpu_blocks_override.json").read_text()
)["records"]


def _inputs(record: dict, **kw) -> PlanInputs:
    return PlanInputs(gpu="H100-80GB", kv_cache_memory_bytes=record["kv_memory_bytes"],
                      max_model_len=record["max_model_len"], **kw)  # fmt: skip


def _by_option(record: dict):
    option = (("num_gpu_blocks_override", record["num_gpu_blocks_override"]),)
    return plan_reference("llama-3.1-8b", _inputs(record, engine_options=option),
                          with_suggestions=False)  # fmt: skip


def _by_command(record: dict):
    cmd = parse_serve_command(
        f"vllm serve meta-llama/Llama-3.1-8B --num-gpu-blocks-override "
        f"{record['num_gpu_blocks_override']}"
    )
    return plan_reference("llama-3.1-8b", _inputs(record, **cmd.values), with_suggestions=False)


def test_the_recordings():
    assert [(r["num_gpu_blocks_override"], r["max_model_len"], r["status"]) for r in RECORDS] == [
        (1000, 4096, "ok"), (1000, 131072, "rejected"), (50000, 4096, "ok"), (50000, 131072, "ok"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "record", RECORDS, ids=lambda r: f"{r['num_gpu_blocks_override']}-{r['max_model_len']}"
)
@pytest.mark.parametrize("plan", [_by_option, _by_command], ids=["option", "command"])
def test_kvcalc_equals_vllm(record, plan):
    result = plan(record)
    if record["status"] != "ok":
        # vLLM checks one 131,072-token request (8,192 blocks of 2 MiB, 16 GiB) against the
        # override's 1,000 × 2 MiB = 1.95 GiB, not the 20 GiB it measured
        assert result.verdict == "wont-start"
        assert "(16.0 GiB KV cache is needed" in record["rejection_reason"]
        assert "(16.0 GiB KV cache is needed" in result.log_lines[-1]
        assert "the available KV cache memory (1.95 GiB)" in result.log_lines[-1]
        assert "needs 16.00 GiB of KV cache but 1.95 GiB are available" in result.verdict_reason
        assert result.estimated_max_model_len == 1000 * 16 - 16 == 15984  # the null block held
        return
    assert (result.block_size, result.num_blocks, result.kv_cache_tokens) == (
        record["block_size"], record["num_blocks"], record["kv_cache_tokens"],
    )  # fmt: skip
    assert result.max_concurrency == record["max_concurrency"]
    assert record["log_line"] in result.log_lines


def test_by_hand():
    # Llama-3.1-8B: 32 layers × K and V × 8 heads × 128 × 2 B × 16 tokens = 2 MiB a block;
    # 1,000 blocks hold 16,000 tokens, 16,000 / 4,096 = 3.90625 requests, whatever the 20 GiB
    result = _by_option(RECORDS[0])
    assert result.num_blocks == 1000 and result.kv_cache_tokens == 1000 * 16 == 16000
    assert result.max_concurrency == 16000 / 4096 == 3.90625


def test_an_override_above_the_gpu_does_not_start():
    # 50,000 blocks × 2 MiB = 97.66 GiB: vLLM's sizing takes it (recorded), the H100's 80 GB
    # cannot hold it beside the weights, so vLLM runs out of memory allocating it
    cmd = parse_serve_command("vllm serve meta-llama/Llama-3.1-8B --num-gpu-blocks-override 50000")
    result = plan_reference("llama-3.1-8b", PlanInputs(gpu="H100-80GB", **cmd.values),
                            with_suggestions=False)  # fmt: skip
    assert result.num_blocks == 50000
    assert result.verdict == "wont-start"
