"""The KV budget of a plan: every pipeline stage, the band, and verdicts at its pessimistic end."""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc import PlanInputs, plan
from kvcalc.errors import InputError

GIB = 1 << 30


def test_pp4_budget_is_the_last_stage():
    # Llama-3.1-8B at PP 4 on H100s, vLLM 0.19, util 0.95: the last stage holds lm_head (1.05 GiB
    # more weights than PP1/PP2) and runs the sampler (2.01 GiB peak vs 1.10), so its budget is the
    # smallest: ceil(79.22 GiB × 0.95) − 4.26 − 2.015 − 0.07 = 68.91 GiB (vLLM: 2,257,264 tokens ×
    # 32 KiB = 68.89 GiB; its first stage printed 69.8)
    r = plan(bundled_shape("llama-3.1-8b"), PlanInputs(gpu="H100", pipeline_parallel_size=4, max_model_len=8192,
                                                       engine_version="0.19.0", gpu_memory_utilization=0.95))  # fmt: skip
    assert abs(r.available_kv_bytes / GIB - 68.89) <= 0.05
    assert abs(r.kv_cache_tokens - 2_257_264) <= 0.05 * GIB / 32768


def test_band_in_json_and_table(cli):
    args = [
        "plan",
        "llama-3.1-8b",
        "--gpu",
        "H100",
        "--engine-version",
        "0.19.0",
        "--max-model-len",
        "8192",
    ]
    out = cli(*args, "--json").json
    # 0.19: ± 0.25 GiB measured on the H100 sweep; the graph estimate is not subtracted there
    assert out["available_kv_bytes"] - out["available_kv_bytes_low"] == round(0.25 * GIB)
    assert out["available_kv_bytes_high"] - out["available_kv_bytes"] == round(0.25 * GIB)
    table = cli(*args, "--no-throughput").stdout
    assert f"{out['available_kv_bytes'] / GIB:.2f} GiB ± 0.25" in table
    # with --kv-cache-memory the engine's figure is given: no band
    given = cli(*args, "--kv-cache-memory", "20GiB", "--json").json
    assert (
        given["available_kv_bytes_low"]
        == given["available_kv_bytes"]
        == given["available_kv_bytes_high"]
        == 20 * GIB
    )


def test_gpt_oss_120b_on_one_h100_does_not_start():
    # vllm-23278: util 0.9, API-server defaults (8,192 tokens, 1,024 seqs), "Model loading took
    # 65.9651 GiB", "Available KV cache memory: -2.14 GiB". kvcalc: 65.91 GiB of weights (mxfp4
    # padded) and a central 2.46 GiB of KV, but the pessimistic end is -2.59 GiB: it does not start.
    model = bundled_shape("gpt-oss-120b")
    r = plan(model, PlanInputs(gpu="H100", engine_version="0.10.1", gpu_memory_utilization=0.9))
    assert abs(r.weights_bytes / GIB - 65.9651) <= 0.06
    assert r.available_kv_bytes_low < -2.14 * GIB < r.available_kv_bytes_high
    assert r.verdict == "wont-start"
    # even at 8,192 tokens, where the central estimate would fit: judged at the pessimistic end
    r = plan(
        model,
        PlanInputs(
            gpu="H100", engine_version="0.10.1", gpu_memory_utilization=0.9, max_model_len=8192
        ),
    )
    assert (
        r.available_kv_bytes > 0
        and r.verdict == "wont-start"
        and "pessimistic end" in r.verdict_reason
    )
    # vllm-27508: util 0.95, 1,024 batched tokens, a pip install (no FlashInfer: the sampler sorts):
    # 1.71 GiB printed, less than one 131,072-token request needs (4.54 GiB): vLLM stopped. kvcalc:
    # 2.03 GiB ± 0.35 (the band of the 0.10 era), too little for one request as well
    r = plan(model, PlanInputs(gpu="H100", engine_version="0.11", gpu_memory_utilization=0.95,
                               max_num_batched_tokens=1024,
                               engine_options=(("flashinfer_sampler", False),)))  # fmt: skip
    assert r.available_kv_bytes_low <= 1.71 * GIB <= r.available_kv_bytes_high
    assert r.verdict == "wont-start"
    # the same without saying: FlashInfer assumed (6.46 GiB), the pessimistic end allows for the sort
    r = plan(model, PlanInputs(gpu="H100", engine_version="0.11", gpu_memory_utilization=0.95,
                               max_num_batched_tokens=1024))  # fmt: skip
    assert r.available_kv_bytes_low <= 1.71 * GIB < r.available_kv_bytes
    assert r.verdict == "wont-start"


def test_flashinfer_sampler_option_is_a_boolean():
    model = bundled_shape("qwen3-0.6b")
    with pytest.raises(InputError, match="flashinfer_sampler"):
        plan(model, PlanInputs(gpu="H100", engine_options=(("flashinfer_sampler", "maybe"),)))


def test_tight_on_the_pessimistic_end_only():
    # a deployment whose central estimate fits one more request than the low end: judged at the low end
    model = bundled_shape("llama-3.1-8b")
    base = PlanInputs(
        gpu="L4", engine_version="0.19.0", max_model_len=32768, gpu_memory_utilization=0.9
    )
    r = plan(model, base)
    assert r.available_kv_bytes_low < r.available_kv_bytes
    low_requests = (r.available_kv_bytes_low // (16 * 131072)) * 16 / 32768
    assert (r.verdict == "wont-start") == (low_requests < 1)
