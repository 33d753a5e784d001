"""vLLM's defaults per release, as read from each release's wheel (``pip download --no-deps``).

``EngineArgs`` batch defaults (``engine/arg_utils.py``), ``CacheConfig.gpu_memory_utilization``
(``config/cache.py`` or ``config.py``) and ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``
(``envs.py``), release by release; the sampler each release's profile run uses is in
``tests/test_overhead.py``.
"""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.errors import InputError

GIB = 1 << 30
VLLM = get_engine("vllm")


def defaults(version, memory_gib, name, cc=(9, 0), *, usage="api_server", max_model_len=8192,
             model="llama-3.1-8b"):  # fmt: skip
    request = EngineRequest(
        model=bundled_shape(model), engine_version=version, max_model_len=max_model_len,
        available_kv_bytes=GIB, gpu_memory_bytes=memory_gib * GIB, gpu_name=name,
        gpu_compute_capability=cc, extra={"usage_context": usage},
    )  # fmt: skip
    return VLLM.scheduler_defaults(request)


@pytest.mark.parametrize(
    ("version", "memory_gib", "name", "usage", "expected"),
    [
        # 0.8.0-0.8.4: the larger defaults on a device *named* H100/H200, whatever its memory
        ("0.8.4", 80, "NVIDIA H100 80GB HBM3", "api_server", (8192, 1024)),
        ("0.8.4", 80, "NVIDIA H100 80GB HBM3", "llm", (16384, 1024)),
        ("0.8.4", 80, "NVIDIA A100-SXM4-80GB", "api_server", (2048, 256)),
        ("0.8.4", 180, "NVIDIA B200", "api_server", (2048, 256)),
        # 0.8.5: any device of at least 70 GiB, the A100-80GB included
        ("0.8.5", 80, "NVIDIA A100-SXM4-80GB", "api_server", (8192, 1024)),
        ("0.8.5", 44, "NVIDIA L40S", "llm", (8192, 256)),
        # 0.9 on (0.9.2, 0.10.1, 0.19.0, 0.21.0 read): at least 70 GiB and not an A100
        ("0.9.2", 80, "NVIDIA A100-SXM4-80GB", "api_server", (2048, 256)),
        ("0.19.0", 80, "NVIDIA H100 80GB HBM3", "api_server", (8192, 1024)),
        ("0.21.0", 180, "NVIDIA B200", "llm", (16384, 1024)),
        ("0.21.0", 180, "NVIDIA B200", "api_server", (8192, 1024)),
        # 0.28 on (0.27.0 without, 0.28.0-0.32.0 and 0.33 with): >= 160 GiB takes 16,384 tokens in
        # both contexts
        ("0.27.0", 180, "NVIDIA B200", "api_server", (8192, 1024)),
        ("0.28.0", 180, "NVIDIA B200", "api_server", (16384, 1024)),
        ("0.33", 180, "NVIDIA B200", "api_server", (16384, 1024)),
    ],
)
def test_batch_defaults_per_release(version, memory_gib, name, usage, expected):
    assert defaults(version, memory_gib, name, usage=usage) == expected


def _resolved(version, *, max_model_len, seqs=None, tokens=None):
    request = EngineRequest(
        model=bundled_shape("llama-3.1-8b"), engine_version=version, max_model_len=max_model_len,
        available_kv_bytes=GIB, gpu_memory_bytes=80 * GIB, gpu_name="NVIDIA H100 80GB HBM3",
        gpu_compute_capability=(9, 0), max_num_seqs=seqs, max_num_batched_tokens=tokens,
    )  # fmt: skip
    return VLLM.scheduler_defaults(request)


def test_defaulted_budgets_capped_from_012():
    # _set_default_max_num_seqs_and_batched_tokens_args (0.12 on, not in 0.11.0): a defaulted
    # max_num_batched_tokens is min(max_num_seqs × max_model_len, default) — one sequence of
    # 4,096 tokens on an H100 runs with 4,096, not the API server's 8,192
    assert _resolved("0.33", max_model_len=4096, seqs=1) == (4096, 1)
    assert _resolved("0.12.0", max_model_len=4096, seqs=1) == (4096, 1)
    assert _resolved("0.11.0", max_model_len=4096, seqs=1) == (8192, 1)
    assert _resolved("0.33", max_model_len=4096, seqs=1, tokens=8192) == (8192, 1)  # given: kept
    # a defaulted max_num_seqs is capped at the token budget: 512 tokens → 512 sequences
    assert _resolved("0.33", max_model_len=8192, tokens=512) == (512, 512)
    assert _resolved("0.33", max_model_len=8192, tokens=512, seqs=1024) == (512, 1024)
    assert _resolved("0.33", max_model_len=8192) == (8192, 1024)  # 1,024 × 8,192 > 8,192: no cap


def test_engine_context_takes_scheduler_config_defaults():
    # AsyncLLMEngine.from_engine_args: usage context ENGINE_CONTEXT has no entry in
    # get_batch_defaults, so SchedulerConfig's 2,048 tokens and 128 sequences, on any GPU
    # (a 0.22.0 log: "max_num_batched_tokens=2048", capture sizes 1-256 = 2 × 128)
    assert defaults("0.33", 80, "NVIDIA H100 80GB HBM3", usage="engine") == (2048, 128)
    assert defaults("0.22.0", 44, "NVIDIA L40S", (8, 9), usage="engine") == (2048, 128)
    with pytest.raises(InputError, match="0.12 on"):
        defaults("0.11.0", 80, "NVIDIA H100 80GB HBM3", usage="engine")
    with pytest.raises(InputError, match="usage_context must be one of"):
        defaults("0.33", 80, "NVIDIA H100 80GB HBM3", usage="server")


def test_gb10_is_left_out_only_by_the_newest_rule():
    # DGX Spark (GB10, SM 12.1, ~120 GiB): 0.33's get_batch_defaults leaves it out; 0.32 does not
    assert defaults("0.33", 120, "NVIDIA GB10", (12, 1)) == (2048, 256)
    for version in ("0.21.0", "0.32.0"):
        assert defaults(version, 120, "NVIDIA GB10", (12, 1)) == (8192, 1024)


@pytest.mark.parametrize(
    ("max_model_len", "model", "expected"),
    [
        (29000, "llama-3.1-8b", (29000, 256)),  # one max_model_len prompt (vllm-10517: 29,000)
        (1024, "llama-3.1-8b", (2048, 256)),  # at least 2,048
        (65536, "llama-3.1-8b", (2048, 256)),  # > 32,768: chunked prefill, 2,048 tokens
        (65536, "gemma-2-9b-it", (65536, 256)),  # sliding window: no chunked prefill in V0
        # a multimodal model: at least _MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS (0.8.3 config.py);
        # vllm-16570 (V0 of 0.8.3, --max-model-len 4096): max(4,096, 2,048) → 5,120
        (4096, "qwen3-vl-8b-instruct", (5120, 256)),
        (8192, "qwen3-vl-8b-instruct", (8192, 256)),
    ],
)
def test_v0_batch_defaults(max_model_len, model, expected):
    assert defaults("0.6", 80, "NVIDIA H100", max_model_len=max_model_len, model=model) == expected


@pytest.mark.parametrize(
    ("version", "utilization", "subtracts"),
    [("0.8", 0.90, False), ("0.10.1", 0.90, False), ("0.19.0", 0.90, False),
     ("0.20.0", 0.92, True), ("0.21.0", 0.92, True), ("0.33", 0.92, True)],
)  # fmt: skip
def test_utilization_and_cudagraph_estimate_per_release(version, utilization, subtracts):
    # 0.19.0: gpu_memory_utilization 0.9, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS "0";
    # 0.20.0 and 0.21.0: 0.92 and "1" (gpu_worker.py subtracts cudagraph_memory_estimate_applied)
    assert VLLM.default_gpu_memory_utilization(MemoryInputs(engine_version=version)) == utilization
    assert VLLM.subtracts_cudagraph(version) is subtracts


def test_capacity_lines_per_release():
    # kv_cache_utils.py: 0.20.0 counts tokens as blocks // groups × block size; 0.21.0-0.27.0 as
    # int(concurrency × max_model_len), still on two lines; 0.28.0 on, one line. gpt-oss-20b
    # (12 sliding + 12 full layers, 2 × 16 × 8 × 64 × 2 B = 32 KiB per layer and block), 1 GiB:
    # 2^30 // (12 × 32,768) = 2,730 blocks; 0.20: 2,730 // 2 × 16 = 21,840 tokens. A request holds
    # 512 full blocks and cdiv(127 + 2,048, 16) + 1 = 137 sliding ones (2,048 batched tokens):
    # 2,730 / 649 = 4.21x, int(4.2065 × 8,192) = 34,459 tokens
    model = bundled_shape("gpt-oss-20b")
    lines = {}
    for version in ("0.20.0", "0.27.0", "0.28.0"):
        request = EngineRequest(model=model, engine_version=version, max_model_len=8192,
                                available_kv_bytes=GIB)  # fmt: skip
        lines[version] = VLLM.plan_kv_cache(request).log_lines
    assert lines["0.20.0"][-2:] == ("GPU KV cache size: 21,840 tokens",
                                    "Maximum concurrency for 8,192 tokens per request: 4.21x")  # fmt: skip
    assert lines["0.27.0"][-2:] == ("GPU KV cache size: 34,459 tokens",
                                    "Maximum concurrency for 8,192 tokens per request: 4.21x")  # fmt: skip
    assert lines["0.28.0"][-1] == (
        "GPU KV cache size: 34,459 tokens, Maximum concurrency for 8,192 tokens per request: 4.21x"
    )
