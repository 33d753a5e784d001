"""vLLM's own log and error lines for the KV-cache figures, in each version's wording: the capacity
line(s) (``GPU KV cache size`` / ``Maximum concurrency``), and the fit check's refusals (no memory for
cache blocks; a request at ``max_model_len`` does not fit, with the estimated maximum length).
"""

from __future__ import annotations

import math

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


#: ``compile_or_warm_up_model``'s margin under its suggested ``--kv-cache-memory`` (150 MiB)
REDUNDANCY_BUFFER_BYTES = 150 * (1 << 20)


def model_loading_line(weights_bytes: int) -> str:
    """``GPUModelRunner.load_model`` (v1/worker/gpu_model_runner.py, 0.21-0.33): "Model loading
    took %s GiB memory and %.6f seconds". The memory is the weights as kvcalc counts them; the
    seconds are not known before the run, so they are printed as ``…``."""
    return f"Model loading took {format_gib(weights_bytes)} GiB memory and … seconds"


def given_kv_line(free_bytes: int | None, kv_cache_memory_bytes: int) -> str:
    """``Worker.determine_available_memory`` with ``--kv-cache-memory`` (0.19-0.33; 0.12 printed
    %.2f): it runs the profile pass, skips the memory profile and says so. The free memory at
    start-up is ``…`` where the GPU is not known."""
    free = "…" if free_bytes is None else format_gib(free_bytes)
    return (
        f"Initial free memory {free} GiB, reserved "
        f"{format_gib(kv_cache_memory_bytes)} GiB memory for KV Cache as specified by "
        "kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
        "gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want manual "
        "control of KV cache memory size. If OOM'ed, check the difference of initial free memory "
        "between the current run and the previous run where kv_cache_memory_bytes is suggested and "
        "update it correspondingly."
    )


def usage_line(*, free_bytes: int, total_bytes: int, utilization: float, consumed_bytes: int,
               peak_activation_bytes: int, cudagraph_bytes: int, available_kv_bytes: int) -> str:  # fmt: skip
    """``Worker.compile_or_warm_up_model`` (v1/worker/gpu_worker.py, INFO from 0.28) after the
    graphs are captured, when the memory was profiled: what was used, and the ``--kv-cache-memory``
    that fits the requested memory (``ceil(total · utilization)``) or the free memory, each
    ``free − consumed − peak activation − graphs − 150 MiB``. ``peak_activation_bytes`` includes
    the graph estimate where the release subtracts it, so the graphs count twice there, as vLLM
    counts them."""
    requested = math.ceil(total_bytes * utilization)
    non_kv = consumed_bytes + peak_activation_bytes + cudagraph_bytes
    to_requested = requested - non_kv - REDUNDANCY_BUFFER_BYTES
    to_gpu = free_bytes - non_kv - REDUNDANCY_BUFFER_BYTES
    return (
        f"Free memory on device ({format_gib(free_bytes)}/{format_gib(total_bytes)} GiB) on "
        f"startup. Desired GPU memory utilization is ({utilization}, {format_gib(requested)} GiB). "
        f"Actual usage is {format_gib(consumed_bytes)} GiB for consumed memory (weights + "
        f"non-torch), {format_gib(peak_activation_bytes)} GiB for peak activation, and "
        f"{format_gib(cudagraph_bytes)} GiB for CUDAGraph memory. Replace gpu_memory_utilization "
        f"config with `--kv-cache-memory={to_requested}` ({format_gib(to_requested)} GiB) to fit "
        f"into requested memory, or `--kv-cache-memory={to_gpu}` ({format_gib(to_gpu)} GiB) to "
        "fully utilize gpu memory. Current kv cache memory in use is "
        f"{format_gib(available_kv_bytes)} GiB."
    )
