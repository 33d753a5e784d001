"""SGLang 0.5.23's attention backend and page under speculative decoding on SM100, and kvcalc's.

``tests/fixtures/sglang_0_5_23/b200_speculative_pages.json`` (``scripts/sglang_flag_probe.py
--gpu b200``): Llama-3.1-8B and Qwen3-8B, each without a draft and with EAGLE, EAGLE3, STANDALONE
and NGRAM, the top-k given or not, pages 16 and 128, resolved by SGLang's own argument code on an
emulated B200. ``get_default_attn_backend`` picks trtllm_mha (page 64) only when the top-k is given
as 1 and no page above 1 is: it reads the top-k before ``_handle_eagle_family`` resolves it. Else
flashinfer (triton on the tool's platform), which keeps the page. The tool builds no draft worker,
so only the resolved page is compared.
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
DATA = json.loads((ROOT / "fixtures" / "sglang_0_5_23" / "b200_speculative_pages.json").read_text())
CONFIGS = json.loads((ROOT / "fixtures" / "vllm_0_33" / "reference_configs.json").read_text())[
    "models"
]


def _page(entry: dict) -> int:
    return (entry.get("resolved_before_pools") or entry)["page_size"]


def _plan(entry: dict, tmp_path: Path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIGS[entry["config"]]["config"]))
    argv = [str(folder) if a == "DRAFT" else a for a in entry["argv"]]
    command = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(folder),
        "--tp-size",
        "1",
    ]
    read = parse_serve_command(shlex.join([*command, *argv]))
    values = {k: v for k, v in read.values.items() if k != "model"}
    inputs = replace(
        PlanInputs(engine="sglang", gpu="B200", kv_cache_memory_bytes=20 * GIB), **values
    )
    return plan_reference(str(folder), inputs)


def test_the_recording_shows_the_rule():
    by = {(e["config"][:5], tuple(e["argv"])): e for e in DATA["entries"]}
    eagle = ("--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "DRAFT")
    topk1 = ("--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4")  # fmt: skip
    # no draft: trtllm_mha at 64; the top-k given as 1: the same
    assert _page(by[("meta-", ())]) == _page(by[("meta-", eagle + topk1)]) == 64
    # the top-k not given: resolved later to 4 (Llama) or 1 (Qwen3), the backend flashinfer/triton
    llama, qwen = by[("meta-", eagle)], by[("Qwen-", eagle)]
    assert llama["resolved_before_pools"]["speculative_eagle_topk"] == 4
    assert qwen["resolved_before_pools"]["speculative_eagle_topk"] == 1
    assert _page(llama) == _page(qwen) == 1
    # top-k 1 with a page of 16 given: not trtllm_mha, the page kept
    assert _page(by[("Qwen-", eagle + topk1 + ("--page-size", "16"))]) == 16
    assert _page(by[("meta-", ("--speculative-algorithm", "NGRAM"))]) == 1


@pytest.mark.parametrize(
    "entry", DATA["entries"], ids=lambda e: f"{e['config'][:10]} {' '.join(e['argv'])[:60]}"
)
def test_kvcalc_pages_as_sglang_resolves_or_refuses_the_draft_by_name(entry, tmp_path):
    if "EAGLE" in entry["argv"]:  # a full model as an EAGLE-1 head: not modelled
        with pytest.raises(InputError) as err:
            _plan(entry, tmp_path)
        assert err.value.code == "speculative-not-modelled"
        return
    if "EAGLE3" in entry["argv"] and entry["config"].startswith("Qwen"):  # no Llama-type head
        with pytest.raises(InputError) as err:
            _plan(entry, tmp_path)
        assert err.value.code == "speculative-not-modelled" and "EAGLE-3" in err.value.message
        return
    assert _plan(entry, tmp_path).block_size == _page(entry)
