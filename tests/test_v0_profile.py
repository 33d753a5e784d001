"""vLLM V0's profile run (:mod:`kvcalc.estimate.v0_profile`): equal to the byte to
``bench/v0_profile_replay.py``'s op-by-op replay of vLLM 0.6.4 (``fixtures/v0_profile_replay.json``)
for every case it records, by hand on the two records that print V0's activation, and through
:func:`estimate_overhead` for the V0 era."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import bundled_shape

from kvcalc.estimate.overhead import estimate_overhead
from kvcalc.estimate.v0_profile import (
    CUBLAS_WORKSPACE_BYTES,
    CUBLAS_WORKSPACE_SM90_BYTES,
    v0_profile,
)
from kvcalc.model.gpus import get_gpu

GIB = 1 << 30
HERE = Path(__file__).parent
REPLAY = json.loads((HERE / "fixtures" / "v0_profile_replay.json").read_text())["cases"]
RECORDS = {r["id"]: r for r in yaml.safe_load((HERE / "fixtures" / "engine_logs.yaml").read_text())}
BUNDLED = {"meta-llama/Llama-3.1-8B": "llama-3.1-8b", "Qwen/Qwen2.5-7B": "qwen2.5-7b",
           "Qwen/Qwen2.5-1.5B": "qwen2.5-1.5b"}  # fmt: skip


def profile(
    name: str, tokens: int, seqs: int, *, sm90: bool, flashinfer: bool = False, tp: int = 1
):
    m = bundled_shape(name)
    return v0_profile(m.weights, architectures=m.architectures, tokens=tokens, rows=seqs, tp=tp,
                      sm90=sm90, flashinfer=flashinfer)  # fmt: skip


@pytest.mark.parametrize("case", REPLAY, ids=lambda c: c["case"])
def test_equal_to_the_replay_of_vllm_0_6_4(case):
    p = profile(BUNDLED[case["config"]], case["max_num_batched_tokens"], case["max_num_seqs"],
                sm90=case["sm90"], flashinfer=case["flashinfer_sampler"])  # fmt: skip
    assert (p.forward_bytes, p.sampler_bytes, p.peak_bytes) == (
        case["forward_peak_bytes"], case["sampler_peak_bytes"], case["peak_bytes"])  # fmt: skip
    assert p.replayed


def test_vllm_10517_forward_by_hand():
    # Llama-3.1-8B, one 29,000-token profile (max_model_len), 256 prompts, RTX 3090 (sm86). From the
    # second decoder layer the residual, the layer's input (kept by the loop) and the attention
    # output are live beside gate_up and SiluAndMul's output: 29,000 · 2 · (3 · 4,096 + 3 · 14,336)
    # = 3,207,168,000 B; + the 8,519,680 B cuBLAS workspace + 3 int64 inputs of 29,000 (232,448 B
    # each in 512 B blocks) + the per-prompt metadata: context and sequence lengths 2 × 1,024,
    # query and sequence starts (257 int32) 2 × 1,536, selected indices 2,048, random indices 1,024
    p = profile("llama-3.1-8b", 29_000, 256, sm90=False)
    assert p.width == 3 * 4096 + 3 * 14336 == 55_296
    assert p.held_bytes == CUBLAS_WORKSPACE_BYTES + 3 * 232_448 + 8_192
    assert p.forward_bytes == 3_207_168_000 + 8_519_680 + 697_344 + 8_192 == 3_216_393_216
    assert p.peak_bytes == p.forward_bytes  # the sampler's 1.39 GiB is smaller
    # printed: peak_torch_memory 17.98 GiB − 14.9888 GiB of weights = 2.991 ± 0.005 GiB
    f = RECORDS["vllm-10517-llama31-8b-3090-29k"]["figures"]
    printed = f["peak_torch_memory_gib"] - f["model_weights_gb"]
    assert abs(p.peak_bytes / GIB - printed) <= 0.005  # 2.9955 against 2.9912: +0.004 GiB


def test_vllm_pr_10511_sampler_by_hand():
    # Meta-Llama-3-8B, 8,192 tokens, 256 prompts, H100 (sm90, 32 MiB cuBLAS workspace): the sort
    # moment. R·V = 256 · 128,256 = 32,833,536 logits: bf16 2 B (held by execute_model), the fp32
    # copy 4, torch.sort's values 4 and int64 indices 8, its int64 iota 8 and cub's alternate keys
    # and values 4 + 8 = 38 B; + the hidden states 8,192 · 4,096 · 2 = 67,108,864 B, the inputs and
    # the sampling tensors (6 bf16 of 256 values, 512 B each, and the int32 top-k, 1,024 B)
    p = profile("llama-3.1-8b", 8192, 256, sm90=True)
    logits = 256 * 128_256
    assert p.held_bytes == CUBLAS_WORKSPACE_SM90_BYTES + 3 * 65_536 + 8_192
    assert p.sampler_bytes == p.held_bytes + 67_108_864 + 38 * logits + 6 * 512 + 1024
    assert f"{p.peak_bytes / GIB:.2f}" == "1.26"  # "PyTorch activation peak memory 1.26GiB"
    # TP 2 prints 1.26 GiB too: the driver rank gathers the logits and samples the whole vocabulary
    assert profile("llama-3.1-8b", 8192, 256, sm90=True, tp=2).sampler_bytes == p.sampler_bytes


@pytest.mark.parametrize(
    ("seqs", "per_logit"), [(1, 38), (64, 50), (127, 50), (128, 38), (512, 38)]
)
def test_sort_scratch_by_rows(seqs, per_logit):
    # PyTorch's sort (SortStable.cu): one row sorts with an iota of the row; 2-127 rows the full-sort
    # variant (two int2 arrays + a keys buffer); from 128 the segmented sort (an int64 iota)
    p = profile("llama-3.1-8b", 8192, seqs, sm90=False)
    assert round(p.centibytes_per_logit / 100) == per_logit


def test_llama_frees_gate_up_qwen2_keeps_it():
    # LlamaMLP: x = act_fn(x) drops gate_up before down_proj → 3H + 3I; Qwen2MLP keeps it → 4H + 3I
    assert profile("llama-3.1-8b", 4096, 256, sm90=True).width == 3 * 4096 + 3 * 14336
    assert profile("qwen2.5-7b", 4096, 256, sm90=True).width == 4 * 3584 + 3 * 18944


def test_shapes_outside_the_replay_are_marked():
    # a MoE model: V1's live width plus the layer input V0's loop keeps, not replayed
    assert not profile("qwen3-30b-a3b", 4096, 256, sm90=True).replayed
    assert not profile("llama-3.1-8b", 4096, 256, sm90=True, tp=2).replayed


def test_the_v0_era_uses_it():
    # estimate_overhead for vLLM 0.6: the V0 profile, the cuBLAS workspace by the GPU
    model = bundled_shape("llama-3.1-8b")
    for gpu, sm90 in (("RTX-3090", False), ("H100", True), (None, True)):
        o = estimate_overhead(model, max_num_batched_tokens=29_000, max_num_seqs=256, engine_version="0.6",
                              gpu=get_gpu(gpu) if gpu else None)  # fmt: skip
        p = profile("llama-3.1-8b", 29_000, 256, sm90=sm90)
        assert (o.forward_bytes, o.sampler_bytes, o.activation_bytes) == (
            p.forward_bytes, p.sampler_bytes, p.peak_bytes)  # fmt: skip
        assert any("vLLM 0.6.4's profile run" in n for n in o.notes)
