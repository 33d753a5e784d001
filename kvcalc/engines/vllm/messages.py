"""vLLM's own log and error lines for the KV-cache figures, in each version's wording: the capacity
line(s) (``GPU KV cache size`` / ``Maximum concurrency``), and the fit check's refusals (no memory for
cache blocks; a request at ``max_model_len`` does not fit, with the estimated maximum length).
"""

from __future__ import annotations

from kvcalc.engines.vllm.defaults import VllmProfile
from kvcalc.units import GIB, format_gib

DOCS_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"


def no_memory_text(profile: VllmProfile) -> str:
    cpu = (
        " (this flag also controls CPU memory reservation on the CPU backend, despite its name)"
        if profile.reserves_null_block else ""
    )  # fmt: skip
    return (
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        f"initializing the engine{cpu}. See {DOCS_URL} for more details."
    )


def too_long_text(profile: VllmProfile, L: int, needed: int, available: int, estimate: int) -> str:
    based = (
        f"Based on the available memory, the estimated maximum model length is {estimate}. "
        if estimate > 0 else ""
    )  # fmt: skip
    if profile.name in ("0.10", "0.8"):  # "models's", %.2f; 0.8 without the estimate (unconfirmed)
        based = based if profile.name == "0.10" else ""
        return (
            f"To serve at least one request with the models's max seq len ({L}), "
            f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV "
            f"cache memory ({available / GIB:.2f} GiB). {based}Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )
    cpu = (
        " (which also controls CPU memory on the CPU backend)"
        if profile.reserves_null_block
        else ""
    )
    return (
        f"To serve at least one request with the model's max seq len ({L}), "
        f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available KV cache "
        f"memory ({format_gib(available)} GiB). {based}Try increasing `gpu_memory_utilization`{cpu} "
        f"or decreasing `max_model_len` when initializing the engine. See {DOCS_URL} for more details."
    )


def capacity_lines(profile: VllmProfile, tokens: int, L: int, concurrency: float) -> list[str]:
    size = f"GPU KV cache size: {tokens:,} tokens"
    conc = f"Maximum concurrency for {L:,} tokens per request: {concurrency:.2f}x"
    one_line = profile.one_capacity_line and profile.merged_log_line
    return [f"{size}, {conc}"] if one_line else [size, conc]


def cudagraph_profiling_line(utilization: float, cudagraph_bytes: int, total_bytes: int) -> str:
    """``Worker.determine_available_memory`` (v1/worker/gpu_worker.py, 0.33) after "Available KV
    cache memory", when it estimated CUDA-graph memory: the utilization that, without the estimate,
    leaves the same pool, and the one that keeps the pool of a release that did not subtract it."""
    delta = cudagraph_bytes / total_bytes
    equivalent = round(utilization - delta, 4)
    suggested = min(round(utilization + delta, 4), 1.0)
    return (
        "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
        f"--gpu-memory-utilization={utilization:.4f} is equivalent to "
        f"--gpu-memory-utilization={equivalent:.4f} without CUDA graph memory profiling. To "
        "maintain the same effective KV cache size as before, increase --gpu-memory-utilization "
        f"to {suggested:.4f}. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
    )
