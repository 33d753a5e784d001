"""torch, imported lazily, and the memory probes verify reads (process RSS, CUDA allocator, driver).

Nothing else in kvcalc imports torch; ``import kvcalc.verify.torchenv`` itself does not either.
"""

from __future__ import annotations

import os
from typing import Any

from kvcalc.errors import KvcalcError, install_hint
from kvcalc.frozen import frozen

INSTALL_HINT = (
    f"install it with: {install_hint('verify')} "
    "(CPU wheels: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def import_torch() -> Any:
    """``torch``, or a ``torch-missing`` error saying how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise KvcalcError(
            f"kvcalc verify needs torch, which is not installed ({exc.msg})",
            hint=INSTALL_HINT,
            code="torch-missing",
        ) from None
    return torch


def resolve_device(name: str) -> Any:
    """``auto`` → CUDA when available, else CPU; ``cuda[:N]`` must be available."""
    torch = import_torch()
    key = (name or "auto").strip().lower()
    if key == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if key.startswith("cuda") and not torch.cuda.is_available():
        raise KvcalcError(
            f"device {name!r} asked for, but torch sees no CUDA device",
            hint="run on a machine with an NVIDIA GPU and a CUDA build of torch, or use --device cpu",
            code="needs-cuda",
        )
    try:
        return torch.device(key)
    except RuntimeError as exc:
        raise KvcalcError(
            f"unknown device {name!r}: {exc}", hint="cpu, cuda or cuda:N", code="invalid-input"
        ) from None


@frozen
class Probe:
    """One reading of the memory counters."""

    rss_bytes: int | None = None
    cuda_allocated_bytes: int | None = None
    cuda_reserved_bytes: int | None = None
    cuda_free_bytes: int | None = None
    cuda_total_bytes: int | None = None


def rss_bytes() -> int | None:
    """The process's resident memory now (``/proc/self/statm``), ``None`` off Linux."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def meminfo_bytes(key: str) -> int | None:
    """A ``/proc/meminfo`` figure (``MemTotal``, ``MemAvailable``) in bytes."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def probe(device: Any) -> Probe:
    torch = import_torch()
    if device.type != "cuda":
        return Probe(rss_bytes=rss_bytes())
    torch.cuda.synchronize(device)
    free, total = torch.cuda.mem_get_info(device)
    return Probe(
        rss_bytes=rss_bytes(),
        cuda_allocated_bytes=torch.cuda.memory_allocated(device),
        cuda_reserved_bytes=torch.cuda.memory_reserved(device),
        cuda_free_bytes=free,
        cuda_total_bytes=total,
    )


def device_name(device: Any) -> str:
    torch = import_torch()
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine() or "cpu"


def total_memory_bytes(device: Any) -> int:
    torch = import_torch()
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[1])
    return meminfo_bytes("MemTotal") or 0


def free_memory_bytes(device: Any) -> int:
    torch = import_torch()
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return meminfo_bytes("MemAvailable") or 0


def release(device: Any) -> None:
    """Return cached memory to the driver (CUDA) after the caller dropped its tensors."""
    if device.type == "cuda":
        import gc

        gc.collect()
        torch = import_torch()
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
