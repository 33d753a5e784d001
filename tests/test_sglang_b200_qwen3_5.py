"""SGLang 0.5.23's attention backend and page for the Qwen3-Next/Qwen3.5 hybrids on SM100.

``tests/fixtures/sglang_0_5_23/b200_qwen3_5.json`` (``scripts/sglang_flag_probe.py --gpu b200``):
Qwen3.5-35B-A3B and Qwen3-Next-80B-A3B, 15 commands each, resolved and sized by SGLang's own code on
an emulated B200 at a 20 GiB KV budget. ``model_overrides/qwen3_5.py`` picks triton at page 1
(whatever page is given) unless the radix cache is off (or the Mamba strategy is already
``extra_buffer``, or speculation is on with trtllm_mha the default, the top-k given as 1): then
trtllm_mha at page 64. The tool builds no draft worker, so for the speculative commands only the
resolved page is compared.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import parse_serve_command
from kvcalc.units import GIB

ROOT = Path(__file__).parent
DATA = json.loads((ROOT / "fixtures" / "sglang_0_5_23" / "b200_qwen3_5.json").read_text())
CONFIGS = json.loads((ROOT / "fixtures" / "vllm_0_33" / "reference_configs.json").read_text())[
    "models"
]
#: flags of the recording that kvcalc does not model (refused by name: flag-not-modelled)
UNMODELLED = {"--mamba-radix-cache-strategy", "--disable-overlap-schedule", "--attention-backend"}


def _plan(entry: dict, tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS[entry["config"]]["config"]))
    command = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "1"]
    read = parse_serve_command(shlex.join([*command, *entry["argv"]]))
    values = {k: v for k, v in read.values.items() if k != "model"}
    inputs = replace(
        PlanInputs(engine="sglang", gpu="B200", kv_cache_memory_bytes=20 * GIB), **values
    )
    return plan_reference(str(path), inputs)


def _by(config: str) -> dict[tuple[str, ...], dict]:
    return {tuple(e["argv"]): e for e in DATA["entries"] if e["config"].startswith(config)}


def test_the_recording_shows_the_rule():
    assert len(DATA["entries"]) == 2 * 15
    q = _by("Qwen--Qwen3.5")
    # triton at page 1 by default and for any given page, though the strategy ends extra_buffer
    base = q[()]
    assert (base["attention_backend"], base["page_size"], base["mamba_radix_cache_strategy"]) == (
        "triton", 1, "extra_buffer")  # fmt: skip
    assert q[("--disable-overlap-schedule",)]["page_size"] == 1
    # the radix cache off, or the strategy given as extra_buffer: trtllm_mha at 64, given 16 too
    for argv in (("--disable-radix-cache",), ("--page-size", "16", "--mamba-radix-cache-strategy",
                 "extra_buffer")):  # fmt: skip
        assert (q[argv]["attention_backend"], q[argv]["page_size"]) == ("trtllm_mha", 64)
    # the same pool floored to 64: 549,848 → 549,824
    assert q[("--disable-radix-cache",)]["max_total_num_tokens"] == 549_848 // 64 * 64
    # a backend given: the page given stands
    assert q[("--attention-backend", "triton", "--page-size", "16")]["page_size"] == 16
    # a draft: trtllm_mha only with the top-k given as 1 (and no page given above 1)
    nextn = ("--speculative-algorithm", "NEXTN")
    topk1 = ("--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4")  # fmt: skip
    pages = [q[argv]["resolved_before_pools"]["page_size"]
             for argv in (nextn + topk1, nextn, nextn + topk1 + ("--page-size", "16"))]  # fmt: skip
    assert pages == [64, 1, 1]


@pytest.mark.parametrize(
    "entry", DATA["entries"], ids=lambda e: f"{e['config'][:18]} {' '.join(e['argv'])[:40]}"
)
def test_kvcalc_plans_the_hybrids_page_and_pool_on_a_b200_or_refuses_by_name(entry, tmp_path):
    if UNMODELLED & set(entry["argv"]):
        with pytest.raises(InputError) as err:
            _plan(entry, tmp_path)
        assert err.value.code == "flag-not-modelled"
        return
    if "--speculative-algorithm" in entry["argv"]:  # the tool cannot build these drafts
        assert entry["status"] == "error" and entry["failed_stage"] == "init_pools"
        page = entry["resolved_before_pools"]["page_size"]
        assert _plan(entry, tmp_path).block_size == page
        return
    plan = _plan(entry, tmp_path)
    assert (plan.block_size, plan.kv_cache_tokens) == (
        entry["page_size"], entry["max_total_num_tokens"])  # fmt: skip
