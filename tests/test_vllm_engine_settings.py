"""Engine settings vLLM 0.33.0 refuses or reads differently, against its own code.

``fixtures/vllm_0_33/engine_settings.json`` was recorded with the vLLM reference harness (command and
GPUs in the file): ``--block-size`` values its attention backends cannot run (7 and 24: every CUDA
backend needs a multiple of 16; the selector names them all "block_size not supported") beside
sizes they can (16, 48), and Qwen3.5-35B-A3B with prefix caching off (mamba cache mode ``none``:
one state block per request). kvcalc must refuse what vLLM refuses, with vLLM's reason, and size
what it runs to the block.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.hfconfig import parse_config
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs

ROOT = Path(__file__).parent.parent
DATA = json.loads(
    (Path(__file__).parent / "fixtures" / "vllm_0_33" / "engine_settings.json").read_text()
)
GPUS = {"h100": "H100", "a100": "A100", "b200": "B200"}


def _config(entry: dict) -> dict:
    where = entry["config"]
    path = ROOT / "model_configs" / where.removeprefix("shared/model_configs/")
    if not path.exists():
        path = ROOT / where
    return json.loads(path.read_text())


def _plan(entry: dict):
    model = parse_config(_config(entry), name=entry["config"])
    args = entry["engine_args"]
    inputs = PlanInputs(
        gpu=GPUS[entry["gpu"]], kv_cache_memory_bytes=entry["kv_memory_bytes_per_gpu"],
        max_model_len=entry["max_model_len"], tensor_parallel_size=entry["tensor_parallel_size"],
        kv_cache_dtype=entry["kv_cache_dtype"], block_size=args.get("block_size"),
        **({"enable_prefix_caching": args["enable_prefix_caching"]}
           if "enable_prefix_caching" in args else {}),
    )  # fmt: skip
    return plan(model, inputs, with_suggestions=False)


def _cases(predicate):
    return [
        pytest.param(
            e, id=f"{Path(e['config']).stem}-{e['gpu']}-{e['engine_args']}-{e['kv_cache_dtype']}"
        )
        for e in DATA["entries"]
        if predicate(e)
    ]


@pytest.mark.parametrize("entry", _cases(lambda e: "block_size" in e["engine_args"]))
def test_block_size_as_vllm_takes_it(entry):
    result = _plan(entry)
    if entry["status"] == "ok":
        assert result.verdict == "ok"
        assert (result.block_size, result.num_blocks) == (entry["block_size"], entry["num_blocks"])
        assert entry["capacity_log_line"] in result.log_lines
        return
    # vLLM: "No valid attention backend found for cuda with AttentionSelectorConfig(...,
    # block_size=7, ...). Reasons: {FLASH_ATTN: [block_size not supported], ...}"
    assert "No valid attention backend found for cuda" in entry["error"]
    assert result.verdict == "wont-start"
    (line,) = result.log_lines
    assert line.startswith(
        "No valid attention backend found for cuda with AttentionSelectorConfig("
    )
    assert f"block_size={entry['engine_args']['block_size']}," in line
    assert "[block_size not supported]" in line and "[block_size not supported]" in entry["error"]


def test_the_recorded_refusals_cover_both_attention_kinds_and_three_gpus():
    refused = [
        e for e in DATA["entries"] if e["status"] != "ok" and "block_size" in e["engine_args"]
    ]
    assert {e["gpu"] for e in refused} >= {"h100", "b200"}
    assert any("use_mla=True" in e["error"] for e in refused)
    assert any("use_mla=False" in e["error"] for e in refused)


@pytest.mark.parametrize("entry", _cases(lambda e: "block_size" not in e["engine_args"]))
def test_prefix_caching_sets_the_mamba_cache_mode(entry):
    """Qwen3.5-35B-A3B, TP 2, 32,768 tokens, 33.12 GiB per GPU: prefix caching off is mamba cache
    mode ``none`` (one state block per request): 93.94× in vLLM, where kvcalc planned the default
    ``align`` (79.78×) whatever the flag said."""
    result = _plan(entry)
    assert (result.block_size, result.num_blocks) == (entry["block_size"], entry["num_blocks"])
    assert entry["capacity_log_line"] in result.log_lines
    off = entry["engine_args"].get("enable_prefix_caching") is False
    assert entry["mamba_cache_mode"] == ("none" if off else "align")


def test_prefix_caching_off_is_recorded():
    off = [e for e in DATA["entries"] if e["engine_args"].get("enable_prefix_caching") is False]
    assert off and all(e["enable_prefix_caching"] is False for e in off)
    assert any(e["capacity_log_line"].endswith("93.94x") for e in off)


def test_mamba_cache_mode_option_cannot_undo_prefix_caching(cli):
    """vLLM 0.33 ignores ``--mamba-cache-mode`` ("It has no effect: Mamba prefix caching follows
    --enable-prefix-caching"): ``-E mamba_cache_mode=none`` with prefix caching on is still
    ``align`` (79.78×), not the 93.94× of a combination vLLM never runs."""
    args = ("plan", "qwen3.5-35b-a3b", "--gpu", "H100", "-tp", "2", "--max-model-len", "32768",
            "--kv-cache-memory", "35562329210", "--json")  # fmt: skip
    forced = cli(*args, "-E", "mamba_cache_mode=none").json
    default = cli(*args).json
    off = cli(*args, "--no-enable-prefix-caching").json
    assert forced["num_blocks"] == default["num_blocks"] != off["num_blocks"]
    assert (
        round(off["max_concurrency"], 2) == 93.94 and round(default["max_concurrency"], 2) == 79.78
    )
