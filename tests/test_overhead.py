"""The vLLM memory terms, each by hand and against the engine records that print it.

Sixteen records print vLLM's memory-profiling split (``fixtures/engine_logs.yaml``). Every printed
figure is rounded to 0.01 GiB, so a term matches a record when it lies within the record's rounding
plus the tolerance stated per test. The records a constant was fitted on are named where it is
defined (``kvcalc.estimate.overhead.ERAS``); ``bench/accuracy.py`` reports the others.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import bundled_config, bundled_shape

from kvcalc.errors import InputError
from kvcalc.estimate.overhead import (
    CUDAGRAPH_BAND_HIGH_BYTES,
    CUDAGRAPH_BAND_LOW_BYTES,
    Overhead,
    era_for,
    estimate_overhead,
    moe_workspace_bytes,
    vllm_available_kv_bytes,
)
from kvcalc.hfconfig import parse_config
from kvcalc.model.gpus import get_gpu

GIB = 1 << 30
MIB = 1 << 20
RECORDS = {
    r["id"]: r
    for r in yaml.safe_load((Path(__file__).parent / "fixtures" / "engine_logs.yaml").read_text())
}
SWEEP = "0.19.0"  # the H100 sweep's vLLM version


def qwen25(name: str):
    """Qwen2.5 with the Instruct checkpoints' 32,768 positions (the bundled base configs say 131,072)."""
    raw = dict(bundled_config(name), max_position_embeddings=32768)
    raw.pop("rope_scaling", None)
    return parse_config(raw, name=f"{name}-instruct")


def printed(record_id: str, key: str) -> float:
    return RECORDS[record_id]["figures"][key]


# -- activation peak (the profile run's "torch peak memory increase") ------------------------------
def test_sampler_peak_llama_8b_h100():
    # V1 frees the forward's temporaries before the dummy sampler run, so the peak is the larger:
    # forward = 141% × 8,192 tokens × 2 B × (3 × 14,336 + 2 × 4,096) = 1,182,793,728 B (1.10 GiB)
    # sampler = 1,024 rows × 128,256 logits × 14.94 B + 8,192 × 4,096 × 2 B (hidden states)
    #         = 1,962,132,112 + 67,108,864 = 2,029,240,976 B = 1.890 GiB; printed 1.89 GiB
    o = estimate_overhead(bundled_shape("llama-3.1-8b"), max_num_batched_tokens=8192, max_num_seqs=1024,
                          engine_version=SWEEP)  # fmt: skip
    assert (o.forward_bytes, o.sampler_bytes) == (1_182_793_728, 2_029_240_976)
    assert o.activation_bytes == 2_029_240_976
    for rid in (
        "tp1-8k",
        "tp1-fp8kv",
        "tp1-onlinefp8",
    ):  # the KV and weight dtypes do not change it
        assert round(o.activation_bytes / GIB, 2) == printed(f"repolog-llmd-llama31-8b-h100-{rid}",
                                                              "torch_peak_increase_gib")  # fmt: skip


def test_pipeline_stages_llama_8b_pp4():
    # First stage: the forward only, 1,182,793,728 B = 1.10 GiB (printed 1.1). Last stage: the sampler
    # plus the received hidden states and residual, 2 × 8,192 × 4,096 × 2 B = 134,217,728:
    # 2,029,240,976 + 134,217,728 = 2,163,458,704 B = 2.015 GiB (printed 2.01 in "non KV 6.34 GiB")
    o = estimate_overhead(bundled_shape("llama-3.1-8b"), max_num_batched_tokens=8192, max_num_seqs=1024,
                          pipeline_parallel_size=4, engine_version=SWEEP)  # fmt: skip
    first, *_, last = o.stages
    assert first.activation_bytes == 1_182_793_728 and first.sampler_bytes == 0
    assert last.pp_buffers_bytes == 134_217_728
    assert last.activation_bytes == o.activation_bytes == 2_163_458_704
    rec = "repolog-llmd-llama31-8b-4xh100-pp4"
    assert round(first.activation_bytes / GIB, 2) == printed(rec, "torch_peak_increase_gib")
    # PP3's line: 6.34 GiB = 4.26 weights + 2.01 torch peak + 0.07 non-torch
    assert abs(last.activation_bytes / GIB - 2.01) <= 0.006
    # every stage holds 8 layers: CUDA graphs 0.158 GiB + (50 + 50) graphs × 8 × 0.192 MiB
    # = 169,651,208 + 100 × 8 × 201,327 = 330,712,808 B (vLLM estimated 0.49 GiB on the first stage)
    assert {s.cudagraph_bytes for s in o.stages} == {330_712_808}


def test_moe_workspace_qwen3_30b():
    # The fused-MoE kernel keeps its workspaces: 8,192 × top-8 × (max(768, 2,048) + 2 × 768) × 2 B
    # + the 8,192 × 2,048 × 2 B output = 469,762,048 + 33,554,432 = 503,316,480 B, live during sampling:
    # 1,024 × 151,936 × 14.94 B (2,324,401,562) + 33,554,432 + 503,316,480 = 2,861,272,474.. → 2.66 GiB
    model = bundled_shape("qwen3-30b-a3b")
    assert moe_workspace_bytes(model.weights, 8192, 1) == 503_316_480
    o = estimate_overhead(
        model, max_num_batched_tokens=8192, max_num_seqs=1024, engine_version=SWEEP
    )
    assert o.moe_workspace_bytes == 503_316_480
    assert abs(o.activation_bytes / GIB - printed("repolog-llmd-qwen3-30b-a3b-h100-tp1",
                                                  "torch_peak_increase_gib")) <= 0.025  # fmt: skip


@pytest.mark.parametrize(
    "record, model, tp, tolerance_gib",
    [
        # TP ranks all-gather the logits, so every rank samples the full vocabulary
        ("repolog-llmd-qwen25-7b-4xh100-tp4", "qwen2.5-7b", 4, 0.02),
        ("repolog-llmd-qwen25-72b-2xh100-tp2", "qwen2.5-72b", 2, 0.02),
        ("repolog-llmd-llama33-70b-fp8dyn-4xh100-tp4", "llama-3.1-70b", 4, 0.03),
        # forward-bound (32,000 logits): 141% × 8,192 × 2 × (2 × (3 × 7,168 + 4,096) + 8,192) = 1.28 GiB
        ("repolog-llmd-mixtral-8x7b-2xh100-tp2", "mixtral-8x7b-v0.1", 2, 0.08),
        # mxfp4 experts: no kept workspace; 1,024 × 201,088 × 14.94 B + 8,192 × 2,880 × 2 B = 2.91 GiB
        ("repolog-llmd-gpt-oss-20b-2xh100-tp2", "gpt-oss-20b", 2, 0.05),
    ],
)
def test_activation_against_the_sweep(record, model, tp, tolerance_gib):
    shape = qwen25(model) if model.startswith("qwen2.5") else bundled_shape(model)
    o = estimate_overhead(shape, max_num_batched_tokens=8192, max_num_seqs=1024, tensor_parallel_size=tp,
                          engine_version=SWEEP)  # fmt: skip
    assert (
        abs(o.activation_bytes / GIB - printed(record, "torch_peak_increase_gib")) <= tolerance_gib
    )


def test_activation_vllm_010_dev_build():
    # Llama-3.2-1B, API-server defaults of a < 70 GiB GPU (2,048 tokens, 256 seqs):
    # 256 × 128,256 × 14.94 + 2,048 × 2,048 × 2 = 498,921,636 B = 0.465 GiB; printed 0.45
    o = estimate_overhead(bundled_shape("llama-3.2-1b-instruct"), max_num_batched_tokens=2048,
                          max_num_seqs=256, engine_version="0.10.1")  # fmt: skip
    assert o.activation_bytes == 498_921_636
    rec = "repofile-llama32-1b-debug-memory-profiling-44gib-gpu"
    assert abs(o.activation_bytes / GIB - printed(rec, "torch_peak_increase_gib")) <= 0.02


def test_sorting_sampler_gpt_oss_120b_pip_install():
    # vLLM 0.10.1 from PyPI (no FlashInfer): the dummy sampler sorts 1,024 × 201,088 fp32 logits.
    # 38 B per logit (bf16 2 + fp32 4 + sorted values 4 + int64 indices 8 + iota 8 + cub's alternate
    # keys 4 and values 8) = 7,824,736,256 B, plus the 8,192 × 2,880 × 2 B hidden states 47,185,920:
    # 7,871,922,176 B = 7.33 GiB. vllm-23278 (H100 PCIe, util 0.9): "Model loading took 65.9651 GiB",
    # "Available KV cache memory: -2.14 GiB": ceil(79.19 × 0.9) − 65.97 − 7.33 − 0.02 = −2.05 (± 0.1)
    o = estimate_overhead(bundled_shape("gpt-oss-120b"), max_num_batched_tokens=8192, max_num_seqs=1024,
                          engine_version="0.10.1", flashinfer_sampler=False)  # fmt: skip
    assert o.sampler_bytes == o.activation_bytes == 7_871_922_176
    available = 79.19 * 0.9 - 65.9651 - o.activation_bytes / GIB - o.non_torch_bytes / GIB
    assert abs(available - -2.14) <= 0.1
    # with FlashInfer's sampler (the Docker image): 14.94 B per logit, 4.42 GiB less
    fused = estimate_overhead(bundled_shape("gpt-oss-120b"), max_num_batched_tokens=8192, max_num_seqs=1024,
                              engine_version="0.10.1")  # fmt: skip
    assert abs(o.sampler_bytes - fused.sampler_bytes - 4_748_379_423) <= 1  # two roundings up


@pytest.mark.parametrize(
    "version, flashinfer, rows, per_logit",
    [
        # 0.8.x: FlashInfer's sampler only below 0.2.3, as the Docker images install it (0.2.1.post2)
        ("0.8.4", None, 256, 14.94),
        ("0.8.4", False, 256, 38),  # a pip install: FlashInfer is no dependency, the sort
        ("0.9.0", None, 256, 14.94),  # 0.9.0 on: FlashInfer >= 0.2.3 when installed
        ("0.10.1", None, 256, 14.94),  # FlashInfer used when installed (assumed)
        ("0.11.0", False, 256, 38),
        ("0.12.0", None, 256, 38),  # 0.12-0.16: FlashInfer's sampler is opt-in
        ("0.16.0", True, 256, 14.94),
        ("0.16.0", None, 64, 50),  # under 128 rows PyTorch's full-sort variant: 50 B
        ("0.17.0", None, 256, 14.94),  # the Triton top-k/top-p kernel from 8 rows
        ("0.19.0", False, 256, 14.94),
        ("0.19.0", None, 4, 50),  # under 8 rows the PyTorch path again
        (
            "0.19.0",
            None,
            1,
            38,
        ),  # one row: PyTorch's large-segment sort, an iota + cub's alternates
        ("0.33", None, 1024, 14.94),  # 0.21 on: FlashInfer by default
    ],
)
def test_sampler_implementation_per_release(version, flashinfer, rows, per_logit):
    # Qwen3-0.6B (151,936 logits), 2,048 tokens: sampler = rows × 151,936 × b + 2,048 × 1,024 × 2 B
    o = estimate_overhead(bundled_shape("qwen3-0.6b"), max_num_batched_tokens=2048, max_num_seqs=rows,
                          engine_version=version, flashinfer_sampler=flashinfer)  # fmt: skip
    assert o.sampler_bytes == -(-rows * 151_936 * round(per_logit * 100) // 100) + 2048 * 1024 * 2


def test_activation_v0_is_its_profile_run():
    # V0 peaks in the forward here (tests/test_v0_profile.py has the arithmetic): 3,216,393,216 B =
    # 2.9955 GiB; the log's peak 17.98 GiB (± 0.005) minus the 14.9888 GiB of weights (vllm-10517;
    # V0 profiles max_model_len tokens, 256 prompts; an RTX 3090: the 8.125 MiB cuBLAS workspace)
    o = estimate_overhead(bundled_shape("llama-3.1-8b"), max_num_batched_tokens=29_000, max_num_seqs=256,
                          engine_version="0.6", gpu=get_gpu("RTX-3090"))  # fmt: skip
    assert o.activation_bytes == o.forward_bytes == 3_216_393_216
    f = RECORDS["vllm-10517-llama31-8b-3090-29k"]["figures"]
    assert (
        abs(o.activation_bytes / GIB - (f["peak_torch_memory_gib"] - f["model_weights_gb"]))
        <= 0.005
    )


# -- non-torch memory ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "record, tp, pp",
    [
        ("repolog-llmd-llama31-8b-h100-tp1-8k", 1, 1),  # 0.26 vs 0.25 printed
        ("repolog-llmd-qwen3-30b-a3b-h100-tp1", 1, 1),  # 0.27
        ("repolog-llmd-mistral-small31-24b-w8a8-h100-tp1", 1, 1),  # 0.26
        ("repolog-llmd-gemma3-27b-h100-tp1", 1, 1),  # 0.26
        ("repolog-llmd-llama31-8b-4xh100-pp4", 1, 4),  # 0.07: no all-reduce buffers
        ("repolog-llmd-qwen25-7b-4xh100-tp4", 4, 1),  # 2.13
        ("repolog-llmd-qwen25-72b-2xh100-tp2", 2, 1),  # 2.09
        ("repolog-llmd-llama33-70b-fp8dyn-4xh100-tp4", 4, 1),  # 2.21
        ("repolog-llmd-mixtral-8x7b-2xh100-tp2", 2, 1),  # 2.07
        ("repolog-llmd-gpt-oss-20b-2xh100-tp2", 2, 1),  # 2.07
    ],
)
def test_non_torch_by_parallelism(record, tp, pp):
    o = estimate_overhead(bundled_shape("llama-3.1-8b"), max_num_batched_tokens=8192, max_num_seqs=1024,
                          tensor_parallel_size=tp, pipeline_parallel_size=pp, engine_version=SWEEP)  # fmt: skip
    assert abs(o.non_torch_bytes / GIB - printed(record, "non_torch_increase_gib")) <= 0.12


def test_non_torch_per_era():
    # 0.10-era TP 1: 0.02 GiB (the Llama-3.2-1B dev build prints 0.02); V0: 0.35 GiB (vllm-10517);
    # 0.8.0-0.9.0 count the CUDA context too: 43.82 GiB free of 44.31 at start-up in that dev build
    # (0.49 GiB) + 0.02 = 0.51 GiB; 0.9.1 on count the increase only, as 0.10
    f = RECORDS["repofile-llama32-1b-debug-memory-profiling-44gib-gpu"]["figures"]
    assert round(f["requested_memory_gib"] / 0.9 - f["initial_free_memory_gib"], 2) == 0.49
    shape = bundled_shape("llama-3.2-1b-instruct")
    for version, gib in (("0.10.1", 0.02), ("0.6", 0.35), ("0.8.3", 0.51), ("0.9.0", 0.51),
                         ("0.9.1", 0.02), ("0.33", 0.26)):  # fmt: skip
        o = estimate_overhead(shape, max_num_batched_tokens=2048, engine_version=version)
        assert o.non_torch_bytes == round(gib * GIB) and o.era == era_for(version).name
    # TP off NVSwitch boards: 0.11 GiB (Qwen2-7B TP 2 on A100-80GB, vLLM 0.10.1: 19.81 GiB requested
    # − 7.12 weights − 0.56 activation − 12.02 KV); on an H100 SXM 2.10 GiB (the 0.19 sweep)
    for gpu, gib in (("A100-80GB", 0.11), ("H100-PCIe", 0.11), ("H100", 2.10), ("B200", 2.10)):
        o = estimate_overhead(shape, max_num_batched_tokens=2048, tensor_parallel_size=2, gpu=get_gpu(gpu),
                              engine_version=SWEEP)  # fmt: skip
        assert o.non_torch_bytes == round(gib * GIB), gpu
    # vllm-16570 (0.8.3, TP 4): 0.34 / 0.43 / 0.38 GiB per rank
    assert (
        min(RECORDS["vllm-16570-qwen25-vl-72b-4xa100-40g"]["figures"]["non_torch_memory_gib"])
        <= 0.38
        <= 0.43
    )


def test_early_v1_record_with_the_docker_sampler():
    # vllm-17327: vLLM 0.8.5 (Docker image: FlashInfer 0.2.1.post2, < 0.2.3, so its sampler runs),
    # Qwen3-30B-A3B TP 4 on A10s, 2,048 tokens and 256 seqs (the small-GPU API-server default).
    # Sampler 256 × 151,936 × 14.94 B + 2,048 × 2,048 × 2 B + the MoE workspace = 0.63 GiB;
    # non-torch 0.49 (CUDA context) + 0.11 (TP off NVSwitch) = 0.60 GiB. int(22.20 GiB × 0.9) −
    # 14.2474 (printed) − 1.23 = 4.50 GiB against 198,784 tokens × 24 KiB = 4.55 GiB printed.
    f = RECORDS["vllm-17327-qwen3-30b-a3b-4xa10-tp4"]["figures"]
    printed = f["gpu_kv_cache_tokens"] * 24 * 1024 / GIB
    gpu = get_gpu("A10")
    requested = int(gpu.memory_bytes * 0.9) / GIB - f["model_loading_gib_per_gpu"]
    for flashinfer, error in ((True, 0.1), (False, None)):
        o = estimate_overhead(bundled_shape("qwen3-30b-a3b"), max_num_batched_tokens=2048,
                              max_num_seqs=256, tensor_parallel_size=4, gpu=gpu, engine_version="0.8.5",
                              flashinfer_sampler=flashinfer)  # fmt: skip
        assert o.non_torch_bytes == round(0.49 * GIB) + round(0.11 * GIB)
        predicted = requested - (o.activation_bytes + o.non_torch_bytes) / GIB
        if error is not None:
            assert abs(predicted - printed) <= error
        else:  # the sorting sampler would leave 0.84 GiB less: it is not what ran
            assert printed - predicted > 0.8


# -- CUDA graphs (the estimate itself: tests/test_cudagraph.py) -------------------------------------
def test_cudagraph_not_subtracted_through_019():
    # Every 0.19 record: requested − (weights + torch peak + non-torch) = available, to 0.01 GiB,
    # although the graph pool (0.51-1.66 GiB) was captured after: it is not in the budget.
    sweep = [r for r in RECORDS.values() if r["id"].startswith("repolog-llmd")]
    assert len(sweep) == 12
    for r in sweep:
        f = r["figures"]
        if r["id"].endswith("pp4"):
            continue  # its available line is the first stage's (5.43 GiB of non-KV memory)
        rest = f["requested_memory_gib"] - f["model_loading_gib"] - f["torch_peak_increase_gib"] \
            - f["non_torch_increase_gib"]  # fmt: skip
        assert abs(rest - f["available_kv_cache_memory_gib"]) <= 0.021, r["id"]
        assert f["cuda_graph_actual_gib"] > 0.5


def test_available_rule_on_every_record_that_prints_the_split():
    # 0.10 dev build: 39.88 requested − 2.32 weights − 0.45 − 0.02 = 37.09 vs 37.10 printed
    f = RECORDS["repofile-llama32-1b-debug-memory-profiling-44gib-gpu"]["figures"]
    assert abs(f["requested_memory_gib"] - f["weights_memory_gib"] - f["torch_peak_increase_gib"]
               - f["non_torch_increase_gib"] - f["available_kv_cache_memory_gib"]) <= 0.021  # fmt: skip
    # 0.8.3, per rank: 37.41 − 34.43 − 2.51 − non-torch = KV of that rank
    f = RECORDS["vllm-16570-qwen25-vl-72b-4xa100-40g"]["figures"]
    for nt, kv in zip(f["non_torch_memory_gib"], f["kv_cache_gib_per_rank"], strict=True):
        assert (
            abs(f["usable_gib"] - f["model_weights_gib"] - f["activation_peak_gib"] - nt - kv)
            <= 0.021
        )
    # V0: 23.58 × 0.90 − 17.98 (weights + activation) − 0.35 = 2.89
    f = RECORDS["vllm-10517-llama31-8b-3090-29k"]["figures"]
    assert abs(23.58 * 0.9 - f["peak_torch_memory_gib"] - 0.35 - f["kv_cache_size_gib"]) <= 0.021


def test_available_kv_arithmetic_and_cudagraph_switch():
    o = Overhead(activation_bytes=2 * GIB, non_torch_bytes=GIB // 2, cudagraph_bytes=GIB)
    kw = {
        "total_memory_bytes": 80 * GIB,
        "gpu_memory_utilization": 0.9,
        "weights_bytes": 15 * GIB,
        "overhead": o,
    }
    # ceil(80 GiB × 0.9) = 72 GiB − 15 − 2 − 0.5 = 54.5 GiB; v0.21+ also − 1 GiB of graphs
    assert vllm_available_kv_bytes(**kw, subtract_cudagraph=False) == 54 * GIB + GIB // 2
    assert vllm_available_kv_bytes(**kw, subtract_cudagraph=True) == 53 * GIB + GIB // 2
    with pytest.raises(InputError):
        vllm_available_kv_bytes(**{**kw, "gpu_memory_utilization": 1.5}, subtract_cudagraph=False)


# -- band --------------------------------------------------------------------------------------------
def test_band_per_era_and_for_unmodelled_terms():
    llama = bundled_shape("llama-3.1-8b")
    o = estimate_overhead(llama, max_num_batched_tokens=8192, engine_version=SWEEP)
    assert o.band_low_bytes == o.band_high_bytes == round(0.25 * GIB)
    # where vLLM subtracts the graph estimate (0.20 on) its error joins the band
    o = estimate_overhead(llama, max_num_batched_tokens=8192, subtracts_cudagraph=True)
    assert o.band_low_bytes == round(0.25 * GIB) + CUDAGRAPH_BAND_LOW_BYTES
    assert o.band_high_bytes == round(0.25 * GIB) + CUDAGRAPH_BAND_HIGH_BYTES
    assert estimate_overhead(llama, max_num_batched_tokens=8192, subtracts_cudagraph=True,
                             enforce_eager=True).band_low_bytes == round(0.25 * GIB)  # fmt: skip
    # 0.10-0.11 (± 0.35 GiB) with FlashInfer assumed installed: the pessimistic end allows for an
    # install without it, whose sampler sorts: 1,024 × 201,088 × (38 − 14.94) B = 4,748,379,423 B
    # (4.42 GiB) lower
    gpt_oss = bundled_shape("gpt-oss-120b")
    band = {"0.10.1": round(0.35 * GIB), "0.19.0": round(0.25 * GIB)}
    o = estimate_overhead(gpt_oss, max_num_batched_tokens=8192, max_num_seqs=1024, engine_version="0.10.1")  # fmt: skip
    assert o.band_low_bytes == band["0.10.1"] + 4_748_379_423
    assert o.band_high_bytes == band["0.10.1"]
    # 0.8.0-0.9.0 subtract other processes' memory as non-torch: the pessimistic end allows 4.5 GiB
    # more (vllm-17122 lies 4.0 GiB below the modelled terms); FlashInfer stated, so no sort widening
    o = estimate_overhead(gpt_oss, max_num_batched_tokens=8192, max_num_seqs=1024, engine_version="0.8.5",
                          flashinfer_sampler=True)  # fmt: skip
    low = band["0.10.1"] + round(4.5 * GIB)
    assert (o.band_low_bytes, o.band_high_bytes) == (low, band["0.10.1"])
    # stated either way (the engine option flashinfer_sampler), or in 0.19: no widening
    for version, flashinfer in (("0.10.1", True), ("0.10.1", False), ("0.19.0", None)):
        o = estimate_overhead(gpt_oss, max_num_batched_tokens=8192, max_num_seqs=1024,
                              engine_version=version, flashinfer_sampler=flashinfer)  # fmt: skip
        assert o.band_low_bytes == band[version], (version, flashinfer)


def test_default_max_num_seqs_follows_the_gpu_tier():
    # 256 × 151,936 × 14.94 B + 2,048 × 1,024 × 2 B vs 1,024 rows on an H200
    model = bundled_shape("qwen3-0.6b")
    small = estimate_overhead(model, max_num_batched_tokens=2048).sampler_bytes
    big = estimate_overhead(model, max_num_batched_tokens=2048, gpu=get_gpu("H200")).sampler_bytes
    assert small == -(-256 * 151_936 * 1494 // 100) + 2048 * 1024 * 2
    assert big == -(-1024 * 151_936 * 1494 // 100) + 2048 * 1024 * 2


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_bad_token_budget(bad):
    with pytest.raises(InputError):
        estimate_overhead(bundled_shape("qwen3-0.6b"), max_num_batched_tokens=bad)
