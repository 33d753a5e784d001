"""vLLM's start-up memory check (issue 25: never ``ok`` where the engine refuses to start).

vLLM's worker snapshots the GPU once its CUDA context (and, on more than one GPU, NCCL) is up and
refuses a fraction whose ``ceil(total · gpu_memory_utilization)`` is more than is free then
(``request_memory``, ``v1/worker/utils.py``, read in the 0.33.0 wheel). Every test here fails on
the code before ``kvcalc/engines/vllm/startup.py``: it planned ``ok`` at 1.0 (and at 0.98 on two
GPUs), and a given ``--kv-cache-memory`` was checked against the whole GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import bundled_shape

from kvcalc.engines.vllm.startup import (
    CONTEXT_BYTES,
    NCCL_CONTEXT_BYTES,
    fraction_fitting,
    startup_memory,
)
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

RECORDS = yaml.safe_load((Path(__file__).parent / "fixtures" / "engine_logs.yaml").read_text())
#: the catalog's H100-SXM (``H100-80GB``): 79.22 GiB as the driver reports it
H100 = 85_061_827_297
MESSAGE_1_0 = (
    "Free memory on device cuda:0 (78.71/79.22 GiB) on startup is less than desired GPU memory "
    "utilization (1.0, 79.22 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
    "other processes."
)


def _plan(**kw):
    return plan(bundled_shape("llama-3.1-8b"), PlanInputs(gpu="H100-80GB", **kw))


def _held_gib(record) -> float:
    """What the GPU held at the start-up snapshot: total − "Initial free memory", in GiB."""
    f = record["figures"]
    return round(f["total_gpu_memory_gib"] - f["initial_free_memory_gib"], 2)


def test_context_figures_are_the_recorded_ones():
    # the H100 sweep (vLLM 0.19, total_memory 79.19 GiB) logs "Initial free memory" per worker:
    # one GPU 79.19 − 78.68 = 0.51 GiB (four records); PP 4 1.48, TP 2/4 dense 1.53/1.55, MoE TP 2
    # (Mixtral-8x7B, gpt-oss-20b) 79.19 − 77.18 = 2.01 GiB, the largest
    sweep = [r for r in RECORDS if (r.get("figures") or {}).get("initial_free_memory_gib")
             and (r.get("figures") or {}).get("total_gpu_memory_gib")]  # fmt: skip
    one = {
        _held_gib(r) for r in sweep if r["tensor_parallel_size"] * r["pipeline_parallel_size"] == 1
    }
    many = [
        _held_gib(r) for r in sweep if r["tensor_parallel_size"] * r["pipeline_parallel_size"] > 1
    ]
    assert one == {0.51} and CONTEXT_BYTES == round(0.51 * GIB)
    assert sorted(set(many)) == [1.48, 1.53, 1.55, 2.01] and NCCL_CONTEXT_BYTES == round(
        max(many) * GIB
    )


def test_utilization_1_0_is_refused_as_vllm_refuses_it():
    # requested = ceil(85,061,827,297 × 1.0) = 85,061,827,297 B (79.22 GiB); free at the snapshot
    # 85,061,827,297 − 0.51 GiB (547,608,330 B) = 84,514,218,967 B (78.71 GiB) < requested. The
    # plan used to say ok (3.83 requests of 131,072 tokens) and print KV lines vLLM never reaches.
    r = _plan(gpu_memory_utilization=1.0)
    assert r.verdict == "wont-start" and not r.passed
    assert (
        r.verdict_reason
        == f"vllm refuses to start: {MESSAGE_1_0}; fix: --gpu-memory-utilization 0.99"
    )
    assert r.log_lines == (MESSAGE_1_0,)
    assert r.memory.startup_free_bytes == r.memory.startup_free_low_bytes == 84_514_218_967
    assert r.runnable_concurrency == 0.0
    # 0.99 × 85,061,827,297 = 84,211,209,024.03 → 84,211,209,025 B <= 84,514,218,967: it starts
    (s,) = [s for s in r.suggestions if s.change == {"gpu_memory_utilization": 0.99}]
    assert "start-up check accepts (78.71 GiB free when it starts)" in s.text and s.verdict == "ok"
    assert _plan(gpu_memory_utilization=0.99).verdict == "ok"


def test_two_gpus_may_not_start_beside_nccl():
    # TP 2 at 0.98: requested ceil(0.98 × 79.22 GiB) = 77.64 GiB. Beside the CUDA context alone
    # 78.71 GiB are free (it starts); beside the largest NCCL share recorded (2.01 GiB) 79.22 − 2.01
    # = 77.21 GiB (it refuses): "may not start", exit 1. 0.97 × 79.22 = 76.84 <= 77.21 starts.
    r = _plan(gpu_memory_utilization=0.98, tensor_parallel_size=2)
    assert r.verdict == "wont-start" and r.verdict_reason.startswith("may not start: ")
    assert "finds 78.71 GiB free, starts and would be ok" in r.verdict_reason
    assert ("Free memory on device cuda:0 (77.21/79.22 GiB) on startup is less than desired GPU "
            "memory utilization (0.98, 77.64 GiB).") in r.verdict_reason  # fmt: skip
    assert r.verdict_reason.endswith("--gpu-memory-utilization 0.97 starts either way")
    assert not r.log_lines[0].startswith("Free memory")  # vLLM may well start: its KV lines stay
    assert [s.change for s in r.suggestions if s.verdict == "ok"] == [
        {"gpu_memory_utilization": 0.97}
    ]
    # one GPU at 0.98 has no NCCL: ok
    assert _plan(gpu_memory_utilization=0.98).verdict == "ok"


def test_given_kv_cache_memory_must_fit_beside_the_cuda_context():
    # --kv-cache-memory 61 GiB: weights 14.99 + activation 1.89 + non-torch 0.26 + graphs 0.76 +
    # KV 61 = 78.90 GiB fit in the GPU's 79.22 (the old check: ok) but not in the 78.71 GiB free
    # once the CUDA context is up: vLLM runs out of memory at start-up (191 MiB short)
    r = _plan(kv_cache_memory_bytes=61 * GIB)
    assert r.verdict == "wont-start"
    assert (
        "of the 78.71 GiB free when vLLM starts (the GPU's 79.22 GiB less 0.51 GiB"
        in r.verdict_reason
    )
    # the suggestion takes the shortfall off the size given, in hundredths of a GiB
    (s,) = [s for s in r.suggestions if "kv_cache_memory_bytes" in s.change]
    assert s.change["kv_cache_memory_bytes"] < 61 * GIB and s.verdict == "ok"


@pytest.mark.parametrize(
    ("version", "device", "band"),
    [
        ("0.33", True, True), ("0.28", True, True), ("0.21", True, True),
        ("0.19", True, True),  # request_memory (ceil, cuda:N) from 0.14
        ("0.12", False, True),  # 0.11-0.13: snapshot after NCCL, no device name
        ("0.10", False, False), ("0.9.1", False, False),  # 0.9.1-0.10: snapshot before NCCL
    ],
)  # fmt: skip
def test_releases_with_the_check(version, device, band):
    m = startup_memory(H100, 1.0, gpus=2, version=version)
    assert m is not None and m.refused
    assert m.message(m.free_bytes).startswith(
        "Free memory on device cuda:0 (" if device else "Free memory on device (78.71/79.22 GiB)"
    )
    assert (m.free_low_bytes == H100 - NCCL_CONTEXT_BYTES) is band


@pytest.mark.parametrize("version", ["0.8", "0.9.0", "0.6"])
def test_releases_without_the_check(version):
    # 0.8.0-0.9.0 read mem_get_info at init_device and check nothing; V0 neither
    assert startup_memory(H100, 1.0, gpus=1, version=version) is None
    r = _plan(gpu_memory_utilization=0.95, engine_version=version)
    assert r.memory.startup_free_bytes is None


def test_sglang_has_no_such_check():
    # SGLang 0.5.23 sizes its pool from the memory free after the weights; a fraction is never
    # refused at start-up (its only refusal is "Not enough memory" for an empty pool)
    r = plan(bundled_shape("llama-3.1-8b"), PlanInputs(gpu="H100-80GB", engine="sglang"))
    assert r.memory.startup_free_bytes is None


def test_fraction_fitting_steps_down_to_a_request_that_fits():
    # 8 GiB less 0.51: 7.49 / 8 = 0.93625 → 0.93 (ceil(0.93 × 8 GiB) = 7.44 GiB <= 7.49)
    assert fraction_fitting(8 * GIB - CONTEXT_BYTES, 8 * GIB) == 0.93
    assert fraction_fitting(H100 - NCCL_CONTEXT_BYTES, H100) == 0.97  # 77.21 / 79.22 = 0.9746


def test_boards_without_nvswitch_count_the_context_only():
    # NCCL's share was measured on NVSwitch H100 boards (NVLink SHARP buffers); on L4s (PCIe) only
    # the context is counted: TP 2 at the default 0.92 asks ceil(0.92 × 22.05 GiB) = 20.29 GiB of
    # the 22.05 − 0.51 = 21.54 GiB free, and no "may not start" band
    r = _plan_on("L4", tensor_parallel_size=2)
    assert r.memory.startup_free_bytes == r.memory.startup_free_low_bytes
    assert not r.verdict_reason.startswith("may not start")
    h100 = _plan(tensor_parallel_size=2)  # on H100s the band exists: 79.22 − 2.01 GiB
    assert h100.memory.startup_free_low_bytes == H100 - NCCL_CONTEXT_BYTES


def _plan_on(gpu: str, **kw):
    return plan(bundled_shape("llama-3.1-8b"), PlanInputs(gpu=gpu, **kw))
