"""vLLM's start-up memory check: the worker refuses a ``--gpu-memory-utilization`` larger than the
memory free on its GPU when it starts. Pure.

Read in the vLLM wheels (``v1/worker/gpu_worker.py`` ``Worker.init_device``; from 0.14
``request_memory`` in ``v1/worker/utils.py``): after the CUDA context exists (and, from 0.11, after
NCCL's buffers are allocated: "Now take memory snapshot after NCCL is initialized"; 0.33 also
creates the cuBLAS handles first) the worker takes a ``MemorySnapshot`` and asks for
``requested = ceil(total · gpu_memory_utilization)`` (``total · utilization`` before 0.14). When
the snapshot's free memory is smaller it raises ``ValueError`` (0.33 wording)::

    Free memory on device cuda:0 (78.71/79.22 GiB) on startup is less than desired GPU memory
    utilization (1.0, 79.22 GiB). Decrease GPU memory utilization or reduce GPU memory used by
    other processes.

(GiB as ``format_gib``, ``round(b / 2**30, 2)``; before 0.14 the same rounding and no device
name.) The 0.8.0–0.9.0 workers (``mem_get_info`` at ``init_device``, no snapshot) and the V0
engine have no such check: there a fraction of 1.0 fails later, allocating.

What the GPU holds before the snapshot is measured on vLLM's own start-up logs (H100 80GB,
``total_memory`` 79.19 GiB, vLLM 0.19, ``engine_logs.yaml``):

- one GPU: "Initial free memory: 78.68 GiB" → 79.19 − 78.68 = **0.51 GiB** (the CUDA context and
  library handles; Llama-3.1-8B, Qwen3-30B-A3B, Gemma-3-27B, Mistral-Small-3.1 alike); the
  Llama-3.2-1B dev build (0.10) on a 44.31 GiB GPU: 0.49 GiB;
- more than one GPU, NCCL's buffers too: PP 4 77.71 → 1.48 GiB; TP 2 / TP 4 dense 77.66 / 77.64
  → 1.53 / 1.55 GiB; Mixtral-8x7B and gpt-oss-20b at TP 2 77.18 → **2.01 GiB**.

NCCL's share depends on the interconnect and NCCL's settings (on these NVSwitch boards it holds
NVLink SHARP buffers), so with more than one GPU only the CUDA context is certain: a fraction that
fails beside the context alone is refused as vLLM refuses it; one that fails only beside the
largest recorded NCCL share "may not start". On other boards (PCIe, paired NVLink) NCCL's share
was not measured and only the context is counted.
"""

from __future__ import annotations

import math

from kvcalc.engines.extra import version_tuple
from kvcalc.engines.vllm.defaults import resolve_profile
from kvcalc.frozen import frozen
from kvcalc.units import GIB, format_gib

#: held before the start-up snapshot on one GPU: 79.19 − 78.68 GiB (H100 sweep, vLLM 0.19, TP 1)
CONTEXT_BYTES = round(0.51 * GIB)
#: the largest held before it with NCCL's buffers: 79.19 − 77.18 GiB (Mixtral-8x7B, gpt-oss-20b TP 2)
NCCL_CONTEXT_BYTES = round(2.01 * GIB)


@frozen
class StartupMemory:
    """One worker's start-up check, per GPU, in bytes."""

    total_bytes: int
    utilization: float
    #: ``ceil(total · utilization)`` (``total · utilization`` before 0.14, rounded up here)
    requested_bytes: int
    #: free at the snapshot beside the CUDA context alone: the plan's central figure
    free_bytes: int
    #: free beside the largest recorded NCCL share (= ``free_bytes`` on one GPU, or where the
    #: release takes its snapshot before NCCL starts)
    free_low_bytes: int
    #: the release prints the device (``cuda:0``) and rounds with ``format_gib`` (0.14 on)
    names_device: bool = True

    @property
    def refused(self) -> bool:
        """vLLM refuses to start even beside the CUDA context alone."""
        return self.free_bytes < self.requested_bytes

    @property
    def refused_low(self) -> bool:
        """vLLM refuses to start beside the largest recorded NCCL share."""
        return self.free_low_bytes < self.requested_bytes

    def message(self, free_bytes: int) -> str:
        """vLLM's ``ValueError`` text with ``free_bytes`` free at the snapshot."""
        device = " cuda:0" if self.names_device else ""
        return (
            f"Free memory on device{device} ({format_gib(free_bytes)}/"
            f"{format_gib(self.total_bytes)} GiB) on startup is less than desired GPU memory "
            f"utilization ({self.utilization}, {format_gib(self.requested_bytes)} GiB). Decrease "
            "GPU memory utilization or reduce GPU memory used by other processes."
        )

    def highest_utilization(self, free_bytes: int) -> float:
        """The largest fraction in hundredths whose request fits in ``free_bytes``
        (:func:`fraction_fitting`)."""
        return fraction_fitting(free_bytes, self.total_bytes)


def fraction_fitting(free_bytes: int, total_bytes: int) -> float:
    """The largest ``--gpu-memory-utilization`` in hundredths with ``ceil(total · u) <= free``.

    >>> fraction_fitting(85061827297 - CONTEXT_BYTES, 85061827297)  # 78.71 / 79.22 = 0.9936
    0.99
    """
    value = math.floor(free_bytes / total_bytes * 100) / 100
    while value > 0 and math.ceil(total_bytes * value) > free_bytes:
        value = round(value - 0.01, 2)
    return value


def startup_memory(
    total_bytes: int,
    utilization: float,
    *,
    gpus: int,
    version: str | None = None,
    nvswitch: bool = True,
) -> StartupMemory | None:
    """The start-up check of one worker of a deployment of ``gpus`` GPUs, for the vLLM
    ``version`` (None: newest); None where that release has no check. ``nvswitch``: the GPUs are
    NVSwitch-class boards (:func:`kvcalc.estimate.interconnect.nvswitch_class`), where NCCL's
    share was measured; elsewhere only the CUDA context is counted.

    >>> m = startup_memory(85061827297, 1.0, gpus=1)
    >>> m.refused, m.message(m.free_bytes)[:60]
    (True, 'Free memory on device cuda:0 (78.71/79.22 GiB) on startup i')
    """
    profile, _ = resolve_profile(version)
    if not profile.v1 or profile.name == "0.8":
        return None
    release = _release(version, profile.name)
    requested = math.ceil(total_bytes * utilization)
    free = total_bytes - CONTEXT_BYTES
    nccl_first = release >= (0, 11)  # 0.9.1-0.10 snapshot before NCCL starts
    low = total_bytes - NCCL_CONTEXT_BYTES if gpus > 1 and nccl_first and nvswitch else free
    return StartupMemory(total_bytes=total_bytes, utilization=utilization,
                         requested_bytes=requested, free_bytes=free, free_low_bytes=low,
                         names_device=release >= (0, 14))  # fmt: skip


def _release(version: str | None, profile_name: str) -> tuple[int, ...]:
    """The release a version (or a profile name) stands for, as (major, minor[, patch])."""
    wanted = version_tuple(version) if version else None
    return wanted or version_tuple(profile_name) or (0, 0)
