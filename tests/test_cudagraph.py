"""vLLM's CUDA-graph memory estimate from the graphs it captures (kvcalc/estimate/cudagraph.py),
against vLLM's own "Estimated CUDA graph memory" lines (tests/fixtures/vllm_cudagraph_estimates.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import bundled_config, bundled_shape
from hypothesis import given
from hypothesis import strategies as st

from kvcalc import PlanInputs, plan
from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.estimate.cudagraph import (
    CUDAGRAPH_BAND_HIGH_BYTES,
    CUDAGRAPH_BAND_LOW_BYTES,
    FIRST_CAPTURE_BYTES,
    GRAPH_LAYER_BYTES,
    NCCL_IN_GRAPHS_BYTES,
    SWEEP_CAPTURES,
    cudagraph_bytes,
)
from kvcalc.estimate.interconnect import nccl_in_graphs
from kvcalc.estimate.overhead import estimate_overhead
from kvcalc.hfconfig import parse_config
from kvcalc.model.gpus import get_gpu

GIB = 1 << 30
MIB = 1 << 20
RECORDS = yaml.safe_load(
    (Path(__file__).parent / "fixtures" / "vllm_cudagraph_estimates.yaml").read_text()
)


def captures(record: dict) -> CudaGraphCaptures:
    (p, tp), (f, tf) = record["piecewise"], record["full"]
    return CudaGraphCaptures(piecewise_graphs=p, largest_piecewise_tokens=tp, full_graphs=f,
                             largest_full_tokens=tf)  # fmt: skip


def further(record: dict) -> int:
    return max(record["piecewise"][0] - 1, 0) + max(record["full"][0] - 1, 0)


def test_records_cover_counts_and_sources():
    fitted = [r for r in RECORDS if r["fit"]]
    assert len(fitted) == 24
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)
    # ten of the H100 sweep at 51 + 51 graphs, the rest at 3 to 86 graphs
    assert sum(r["id"].startswith("repolog-llmd") for r in fitted) == 10
    assert sorted({further(r) for r in fitted}) == [3, 4, 6, 14, 52, 84, 100]
    assert all(r.get("why") for r in RECORDS if not r["fit"])


def test_constants_are_the_least_squares_fit_of_the_records():
    # estimate = c + b · (layers × further graphs): the normal equations of a line, in plain sums
    rows = [(r["layers"] * further(r), r["estimate_gib"]) for r in RECORDS if r["fit"]]
    n = len(rows)
    sx, sy = sum(x for x, _ in rows), sum(y for _, y in rows)
    sxx, sxy = sum(x * x for x, _ in rows), sum(x * y for x, y in rows)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    c = (sy - b * sx) / n
    assert round(c, 3) == 0.158 and FIRST_CAPTURE_BYTES == round(0.158 * GIB)
    assert round(b * 1024, 3) == 0.192 and GRAPH_LAYER_BYTES == round(0.192 * MIB)


@pytest.mark.parametrize("record", [r for r in RECORDS if r["fit"]], ids=lambda r: r["id"])
def test_every_fitted_record_inside_the_band(record):
    error = cudagraph_bytes(captures(record), record["layers"]) - record["estimate_gib"] * GIB
    assert -CUDAGRAPH_BAND_LOW_BYTES <= error <= CUDAGRAPH_BAND_HIGH_BYTES, error / GIB


def test_records_outside_the_fit():
    by_id = {r["id"]: r for r in RECORDS}
    # Qwen2.5-72B TP 4 on L40S: 0.158 GiB + 84 × 80 × 0.192 MiB = 1.41 GiB against 2.73 printed:
    # inside the band only with NCCL's all-reduce in the graphs allowed for
    r = by_id["qwen25-72b-tp4-l40s-v0190"]
    error = cudagraph_bytes(captures(r), r["layers"]) - r["estimate_gib"] * GIB
    assert -CUDAGRAPH_BAND_LOW_BYTES - NCCL_IN_GRAPHS_BYTES <= error < -CUDAGRAPH_BAND_LOW_BYTES
    assert nccl_in_graphs(get_gpu("L40S"), 4)
    # Qwen3-8B on an A100-40GB: 2.35 printed, 1.6 GiB above kvcalc's 0.73, outside every band
    r = by_id["qwen3-8b-a100-40gb-v0191"]
    error = cudagraph_bytes(captures(r), r["layers"]) - r["estimate_gib"] * GIB
    assert error < -1.6 * GIB


def test_hand_computed():
    c = CudaGraphCaptures(piecewise_graphs=51, full_graphs=35, largest_piecewise_tokens=512,
                          largest_full_tokens=256)  # fmt: skip
    # Qwen3-8B, 36 layers (LMCache #3430, printed 0.52): 169,651,208 + (50 + 34) × 36 × 201,327
    # = 169,651,208 + 608,812,848 = 778,464,056 B (0.73 GiB)
    assert c.further_graphs == 50 + 34
    assert cudagraph_bytes(c, 36) == 778_464_056
    # one graph per mode: the first capture alone
    one = CudaGraphCaptures(piecewise_graphs=1, full_graphs=1, largest_piecewise_tokens=1,
                            largest_full_tokens=1)  # fmt: skip
    assert cudagraph_bytes(one, 40) == FIRST_CAPTURE_BYTES
    # a further graph costs at least vLLM's 1 MiB floor: 2 layers × 201,327 B < 1 MiB
    two = CudaGraphCaptures(piecewise_graphs=3, largest_piecewise_tokens=4)
    assert cudagraph_bytes(two, 2) == FIRST_CAPTURE_BYTES + 2 * MIB
    assert cudagraph_bytes(CudaGraphCaptures(), 32) == 0
    # the default is the sweep's capture set: 100 further graphs
    assert cudagraph_bytes(SWEEP_CAPTURES, 32) == 169_651_208 + 100 * 32 * 201_327


def test_overhead_follows_the_captures():
    llama = bundled_shape("llama-3.1-8b")
    few = CudaGraphCaptures(piecewise_graphs=5, largest_piecewise_tokens=16)
    o = estimate_overhead(llama, max_num_batched_tokens=8192, cudagraph_captures=few)
    assert o.cudagraph_bytes == FIRST_CAPTURE_BYTES + 4 * 32 * GRAPH_LAYER_BYTES
    assert any(
        n.startswith("CUDA graphs 0.18 GiB: 5 PIECEWISE (largest 16) graphs;") for n in o.notes
    )
    default = estimate_overhead(llama, max_num_batched_tokens=8192)
    assert default.cudagraph_bytes == cudagraph_bytes(SWEEP_CAPTURES, 32)
    eager = estimate_overhead(llama, max_num_batched_tokens=8192, cudagraph_captures=few,
                              enforce_eager=True)  # fmt: skip
    assert eager.cudagraph_bytes == 0
    # no graphs (mode NONE): no band for them either
    none = estimate_overhead(llama, max_num_batched_tokens=8192, subtracts_cudagraph=True,
                             cudagraph_captures=CudaGraphCaptures())  # fmt: skip
    assert none.cudagraph_bytes == 0 and none.band_low_bytes == round(0.25 * GIB)


def test_nccl_in_graphs_only_past_two_pcie_gpus():
    assert not nccl_in_graphs(get_gpu("L40S"), 2)
    assert nccl_in_graphs(get_gpu("RTX-4090"), 4)
    assert not nccl_in_graphs(get_gpu("H100-SXM"), 8)
    assert not nccl_in_graphs(get_gpu("A100-80GB"), 4)
    assert not nccl_in_graphs(None, 4)
    llama70 = bundled_shape("llama-3.1-70b")
    kw = dict(max_num_batched_tokens=8192, tensor_parallel_size=4, subtracts_cudagraph=True)
    pcie = estimate_overhead(llama70, gpu=get_gpu("L40S"), **kw)
    sxm = estimate_overhead(llama70, gpu=get_gpu("H100-SXM"), **kw)
    assert pcie.band_low_bytes - sxm.band_low_bytes == NCCL_IN_GRAPHS_BYTES


@given(p=st.integers(0, 600), f=st.integers(0, 600), layers=st.integers(0, 200),
       more=st.integers(1, 50))  # fmt: skip
def test_monotone_in_graphs_and_layers(p, f, layers, more):
    def make(pw: int, fl: int) -> CudaGraphCaptures:
        return CudaGraphCaptures(piecewise_graphs=pw, largest_piecewise_tokens=min(pw, 1) * 512,
                                 full_graphs=fl, largest_full_tokens=min(fl, 1) * 512)  # fmt: skip

    base = cudagraph_bytes(make(p, f), layers)
    assert cudagraph_bytes(make(p + more, f), layers) >= base
    assert cudagraph_bytes(make(p, f + more), layers) >= base
    assert cudagraph_bytes(make(p, f), layers + more) >= base
    assert (base == 0) == (p + f == 0)


@pytest.mark.parametrize("bad", [dict(piecewise_graphs=-1), dict(piecewise_graphs=3),
                                 dict(full_graphs=True, largest_full_tokens=1),
                                 dict(largest_full_tokens=8)])  # fmt: skip
def test_bad_captures_refused(bad):
    with pytest.raises(ValueError):
        CudaGraphCaptures(**bad)


def test_runner_v2_before_029_estimates_nothing():
    # vLLM 0.23-0.28 run dense Llama on model runner V2, whose profile_cudagraph_memory returns 0:
    # the graphs are captured after the cache is sized, so nothing is subtracted for them (0.21: V1
    # subtracts its estimate; 0.29 on: V2 estimates them)

    model = parse_config(bundled_config("llama-3.1-8b"), name="llama-3.1-8b")
    kw = dict(gpu="H100", max_model_len=8192, gpu_memory_utilization=0.9)
    runs = {v: plan(model, PlanInputs(engine_version=v, **kw), with_suggestions=False)
            for v in ("0.21.0", "0.25.0", "0.29.0")}  # fmt: skip
    graphs = {v: r.memory.cudagraph_bytes for v, r in runs.items()}
    assert graphs["0.25.0"] == graphs["0.21.0"] > 0  # the same 51 + 51 graphs are captured
    # 0.25 subtracts nothing for them: its budget is the graph estimate higher than 0.21's
    assert runs["0.25.0"].available_kv_bytes - runs["0.21.0"].available_kv_bytes == graphs["0.21.0"]
    assert runs["0.29.0"].available_kv_bytes == runs["0.21.0"].available_kv_bytes
    # and the band has no graph term there
    v25 = runs["0.25.0"]
    assert v25.available_kv_bytes - v25.available_kv_bytes_low == round(0.25 * GIB)
    assert any("model runner V2 before 0.29" in n for n in v25.notes)
