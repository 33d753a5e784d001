"""SGLang 0.5.23's page size and pool on SM100, given the page or not, and kvcalc's.

``tests/fixtures/sglang_0_5_23/b200_pages.json`` (``scripts/sglang_flag_probe.py --gpu b200``):
20 configs, each without ``--page-size`` and with 1, 16, 32, 128 and 256, resolved and sized by
SGLang's own code on an emulated B200 at a 20 GiB KV budget. kvcalc plans each command to the
page and the token (DeepSeek sparse attention in fp8 by default there: test_sglang_dsa_kv_dtype;
the Qwen3.5 hybrids' backend: test_sglang_b200_qwen3_5).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from kvcalc.engines.sglang.pages import page_size
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import FullAttention
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import parse_serve_command
from kvcalc.units import GIB

ROOT = Path(__file__).parent
DATA = json.loads((ROOT / "fixtures" / "sglang_0_5_23" / "b200_pages.json").read_text())
CONFIGS = json.loads((ROOT / "fixtures" / "vllm_0_33" / "reference_configs.json").read_text())[
    "models"
]


def _plan(entry: dict, tmp_path: Path):
    config = entry["config"]
    if config.startswith("tests/"):
        path = ROOT.parent / config
    else:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(CONFIGS[config]["config"]))
    read = parse_serve_command(
        shlex.join(
            [
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                "m",
                "--tp-size",
                "1",
                *entry["argv"],
            ]
        )  # fmt: skip
    )
    values = {k: v for k, v in read.values.items() if k != "model"}
    inputs = replace(
        PlanInputs(engine="sglang", gpu="B200", kv_cache_memory_bytes=20 * GIB), **values
    )
    return plan_reference(str(path), inputs)


def test_the_recording_covers_what_the_rule_says():
    entries = DATA["entries"]
    assert len(entries) == 20 * 6 and {e["status"] for e in entries} == {"ok"}
    by = {(e["config"], tuple(e["argv"])): e for e in entries}
    # trtllm_mha: 1 and 256 become 64, 16/32/128 stay
    llama = "meta-llama--Llama-3.1-8B.json"
    assert [by[(llama, a)]["page_size"] for a in ((), ("--page-size", "1"), ("--page-size", "16"),
            ("--page-size", "256"))] == [64, 64, 16, 64]  # fmt: skip
    # trtllm_mla (DeepSeek family): only 32 and 64 stay
    dsv3 = "deepseek-ai--DeepSeek-V3.json"
    assert [by[(dsv3, ("--page-size", p))]["page_size"] for p in ("16", "32", "128")] == [
        64,
        32,
        64,
    ]
    # an MLA model outside the family: flashinfer, page 1 by default; 20 GiB / 31,104 B a token
    # (27 layers × (512 + 64) × 2 B) = 690,420 tokens
    lite = by[("tests/fixtures/deepseek-v2-lite/config.json", ())]
    assert (lite["attention_backend"], lite["page_size"], lite["max_total_num_tokens"]) == (
        "flashinfer",
        1,
        20 * 2**30 // 31_104,
    )


@pytest.mark.parametrize(
    "entry", DATA["entries"], ids=lambda e: f"{e['config'][:30]} {' '.join(e['argv'])}"
)
def test_kvcalc_plans_sglangs_page_and_pool_on_a_b200(entry, tmp_path):
    plan = _plan(entry, tmp_path)
    assert (plan.block_size, plan.kv_cache_tokens) == (
        entry["page_size"], entry["max_total_num_tokens"])  # fmt: skip


@pytest.mark.parametrize(("gpu", "noted"), [("MI300X", True), (None, True), ("H100-SXM", False)])
def test_a_plan_without_an_nvidia_capability_says_the_hopper_page_is_assumed(gpu, noted):
    inputs = PlanInputs(engine="sglang", gpu=gpu, kv_cache_memory_bytes=20 * GIB)
    plan = plan_reference("llama-3.1-8b", inputs)
    assert plan.block_size == 1
    assert any("no NVIDIA compute capability" in n for n in plan.notes) is noted


def _page(model, capability, given=None, *, speculative=False, topk=None, radix=True):
    return page_size(model, capability, given, legacy=False, radix_cache=radix,
                     speculative=speculative, given_topk=topk)  # fmt: skip


def test_every_sm_10_part_pages_as_the_b200_and_sm_12_as_hopper():
    # SGLang's is_sm100 is any major 10 (utils/common.py: device_capability_majors=[10]): a B300
    # (10.3) takes trtllm_mha's 64 like the B200; an RTX 5090 (12.0) flashinfer's page 1
    llama = parse_config(CONFIGS["meta-llama--Llama-3.1-8B.json"]["config"], name="llama")
    assert [_page(llama, cc) for cc in ((10, 0), (10, 3), (12, 0), (9, 0))] == [64, 64, 1, 1]
    # with a draft: trtllm_mha only for a top-k given as 1 and no page above 1
    # (is_no_spec_infer_or_topk_one: page_size None or 1)
    assert _page(llama, (10, 0), 1, speculative=True, topk=1) == 64
    assert _page(llama, (10, 0), 16, speculative=True, topk=1) == 16
    assert _page(llama, (10, 0), None, speculative=True, topk=None) == 1


def test_unequal_k_and_v_widths_take_fa4s_page_on_sm_10():
    # get_default_attn_backend: has_asymmetric_kv → fa4; _fa4_page_constraint pages it by 128 (read
    # in the code, not recorded); on Hopper the page stays the default 1
    base = parse_config(CONFIGS["meta-llama--Llama-3.1-8B.json"]["config"], name="llama")
    layer = base.layers[0]
    assert isinstance(layer, FullAttention) and layer.head_dim_k == layer.head_dim_v == 128
    wide_k = replace(base, layers=tuple(replace(x, k_dim=192) for x in base.layers))
    assert (_page(wide_k, (10, 0)), _page(wide_k, (9, 0)), _page(base, (10, 0))) == (128, 1, 64)
