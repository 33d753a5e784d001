"""kvcalc's vLLM engine equals vLLM 0.33.0 at the edges the public grid does not reach.

``fixtures/vllm_0_33/edges.json`` was recorded with the vLLM reference harness, one scenario per
process (its ``provenance`` block has the command): a bundled config (the copy embedded in
``reference_configs.json``), changed as each scenario says, and planned at the engine arguments
it names. Each scenario pins one rule a wrong number would hide behind elsewhere:

- pipeline parallelism with sliding windows: ``VllmConfig.max_concurrent_batches`` is ``pp + 1``
  with async scheduling on the V2 model runner (config/vllm.py), so the window's reserve holds
  ``(pp + 1) · max_num_batched_tokens`` in-flight tokens;
- windows and chunks that are not powers of two, where ``W − 1 + in_flight`` is a multiple of the
  block (``SlidingWindowSpec.max_admission_blocks_per_request``: ``cdiv(min(W − 1 + in_flight,
  max_model_len), block) + 1``; chunked: ``cdiv(min(chunk + in_flight, max_model_len), block)``,
  no −1), so an off-by-one shows in the blocks per request;
- a Nemotron-H config without ``mamba_ssm_cache_dtype`` (``NemotronHForCausalLMConfig``:
  float32 unless the config names one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind
from kvcalc.model.recurrent_layouts import RecurrentState
from kvcalc.units import GIB

HERE = Path(__file__).parent / "fixtures" / "vllm_0_33"
DATA = json.loads((HERE / "edges.json").read_text())
CONFIGS = json.loads((HERE / "reference_configs.json").read_text())["models"]
H100 = {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_compute_capability": (9, 0)}  # fmt: skip
KINDS = {"full_attention": LayerKind.FULL, "sliding_window": LayerKind.SLIDING,
         "chunked_local_attention": LayerKind.CHUNKED, "mamba": LayerKind.RECURRENT}  # fmt: skip


def config_of(row: dict) -> dict:
    """The bundled config with the scenario's changes: ``a.b`` inside ``a``, ``-key`` removed."""
    config = json.loads(json.dumps(CONFIGS[row["base_config"]]["config"]))
    for key, value in row["config_changes"].items():
        *outer, last = key.lstrip("-").split(".")
        target = config
        for part in outer:
            target = target[part]
        if key.startswith("-"):
            del target[last]
        else:
            target[last] = value
    return config


def plan(row: dict):
    args = row["engine_args"]
    model = parse_config(config_of(row), name=row["base_config"][:-5].replace("--", "/"))
    request = EngineRequest(
        model=model, max_model_len=row["max_model_len"], kv_cache_dtype=row["kv_cache_dtype"],
        tensor_parallel_size=row["tensor_parallel_size"],
        pipeline_parallel_size=args.get("pipeline_parallel_size", 1),
        max_num_batched_tokens=args.get("max_num_batched_tokens"),
        available_kv_bytes=row["available_kv_bytes"], **H100,
    )  # fmt: skip
    return model, get_engine("vllm").plan_kv_cache(request)


def _id(row: dict) -> str:
    changes = ",".join(f"{k}={v}" for k, v in row["config_changes"].items())
    args = ",".join(f"{k}={v}" for k, v in row["engine_args"].items())
    return f"{row['base_config'][:-5]}[{changes}][{args}]-{row['max_model_len']}"


ROWS = [pytest.param(r, id=_id(r)) for r in DATA["scenarios"]]


def test_the_edges_are_recorded():
    rows = DATA["scenarios"]
    assert all(r["status"] == "ok" for r in rows)
    # PP with a sliding window, and a window whose W − 1 + in-flight is a multiple of the block
    assert any(r["engine_args"].get("pipeline_parallel_size", 1) > 1 for r in rows)
    assert any(
        (g["window"] - 1 + r["max_in_flight_tokens"]) % g["block_size"] == 0
        for r in rows for g in r["groups"] if g["kind"] == "sliding_window"
    )  # fmt: skip
    for base in {r["base_config"] for r in rows}:
        assert CONFIGS[base]["config"]


@pytest.mark.parametrize("row", ROWS)
def test_matches_vllm(row):
    _, p = plan(row)
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
        row["block_size"], row["num_blocks"], row["kv_cache_tokens"],
    )  # fmt: skip
    assert p.max_concurrency == pytest.approx(row["max_concurrency"], abs=5e-7)
    assert row["log_line"] in p.log_lines
    # per group: kind, page, block and blocks per request (under PP the harness sizes the first
    # stage, whose groups hold that stage's layers; kvcalc's groups count the whole model's)
    got = sorted((g.kind, g.page_bytes, g.block_size, g.blocks_per_request) for g in p.groups)
    want = sorted(
        (KINDS[g["kind"]], g["page_bytes"], g["block_size"], g["blocks_per_request"])
        for g in row["groups"]
    )  # fmt: skip
    assert got == want


@pytest.mark.parametrize("row", ROWS)
def test_the_window_reserve_holds_the_in_flight_batches(row):
    # the recorded blocks per request from vLLM's own formula with its recorded in-flight tokens:
    # the fixture's numbers are consistent with the rule the module docstring cites
    for g in row["groups"]:
        w, block, n = g["window"], g["block_size"], row["max_model_len"]
        if g["kind"] == "sliding_window":
            assert (
                g["blocks_per_request"]
                == -(-min(w - 1 + row["max_in_flight_tokens"], n) // block) + 1
            )
        elif g["kind"] == "chunked_local_attention":
            assert g["blocks_per_request"] == -(-min(w + row["max_in_flight_tokens"], n) // block)
    pp = row["engine_args"].get("pipeline_parallel_size", 1)
    assert row["async_scheduling"] and row["use_v2_model_runner"]
    assert row["max_concurrent_batches"] == (pp + 1 if pp > 1 else 2)


def test_nemotron_h_without_a_state_dtype_keeps_its_state_in_float32():
    rows = [r for r in DATA["scenarios"] if "-mamba_ssm_cache_dtype" in r["config_changes"]]
    if not rows:
        pytest.fail("the Nemotron-H scenario is not recorded")
    (row,) = rows
    model, _ = plan(row)
    (recorded,) = {tuple(g["state_dtypes"]) for g in row["groups"] if g["kind"] == "mamba"}
    # vLLM's MambaSpec dtypes: (conv state, SSM state)
    assert recorded[1] == "float32"
    states = {x.ssm_dtype.name for x in model.layers if isinstance(x, RecurrentState)}
    assert states == {"fp32"}
