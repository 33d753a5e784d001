"""Two asserts vLLM 0.33 makes while building a model, recorded with the reference harness
(``tests/fixtures/vllm_0_33/build_asserts.json``): ``Attention``'s ``num_heads % num_kv_heads ==
0`` on each rank, and ``FusedMoEConfig``'s ``intermediate_size % tp_size == 0`` over the routed
experts' group (TP × DP × PCP; 1 under expert parallelism). kvcalc refused neither and planned
the configs vLLM cannot build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import config_folder

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

RECORDS = json.loads(
    (Path(__file__).parent / "fixtures" / "vllm_0_33" / "build_asserts.json").read_text()
)["records"]


def _plan(record: dict, **changes):
    fields = dict(
        gpu="H200",  # the Qwen3-30B-A3B shapes' weights fit beside the 20 GiB
        tensor_parallel_size=record["tp"], max_model_len=record["max_model_len"],
        kv_cache_memory_bytes=record["kv_memory_gib"] * GIB,
        enable_expert_parallel=record["engine_args"].get("enable_expert_parallel", False),
    )  # fmt: skip
    fields.update(changes)
    return plan_reference(config_folder(record["config"], "kvcalc-asserts-"), PlanInputs(**fields))


@pytest.mark.parametrize(
    "record",
    RECORDS,
    ids=lambda r: f"{r['config_source'][-35:-5]}-tp{r['tp']}{'-ep' if r['engine_args'] else ''}",
)
def test_equals_vllm(record):
    if record["status"] == "ok":
        plan = _plan(record)
        assert (plan.block_size, plan.num_blocks, plan.kv_cache_tokens) == (
            record["block_size"], record["num_blocks"], record["gpu_kv_cache_size_tokens"],
        )  # fmt: skip
        return
    with pytest.raises(InputError) as caught:
        _plan(record)
    if record["error"].startswith("num_heads"):
        # the heads one rank holds: 32 // 2 = 16 over max(1, 6 // 2) = 3 at TP 2
        assert caught.value.code == "unsupported-model"
        assert caught.value.message == f"vLLM 0.33 refuses to start: {record['error']}"
    else:
        assert "FusedMoEConfig" in record["error"]
        assert caught.value.code == "invalid-parallelism"
        assert "intermediate_size % tp_size == 0" in caught.value.message


def test_the_grid():
    statuses = [(r["tp"], r["status"]) for r in RECORDS]
    assert statuses == [(1, "rejected"), (2, "rejected"), (2, "ok"), (4, "rejected"), (1, "ok"),
                        (2, "rejected"), (4, "ok")]  # fmt: skip


def test_data_parallelism_joins_the_experts_group():
    # FusedMoEParallelConfig.flatten_tp_across_dp_and_pcp: the experts' TP is DP × PCP × TP, so
    # 770 over TP 2 × DP 2 = 4 ranks fails as TP 4 does (recorded), and expert parallelism
    # keeps each expert whole (tp_size 1)
    served = next(r for r in RECORDS if r["status"] == "ok" and r["tp"] == 2)
    with pytest.raises(InputError) as caught:
        _plan(served, data_parallel_size=2)
    assert "770 over 4" in caught.value.message
    plan = _plan(served, data_parallel_size=2, enable_expert_parallel=True)
    assert plan.num_blocks > 0
