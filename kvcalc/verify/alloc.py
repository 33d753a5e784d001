"""Allocate an :class:`~kvcalc.verify.spec.AllocationPlan` with torch and measure it.

Each buffer is ``torch.empty(shape, dtype)`` on the device; every engine view is built with
``torch.as_strided`` over the buffer's bytes (torch refuses a view that does not fit), the tensors
are filled so their pages are really touched, and then measured:

- CPU: Σ ``untyped_storage().nbytes()`` (judged) and the resident-memory delta (reported only:
  RSS moves with the allocator and page reuse);
- CUDA: ``torch.cuda.memory_allocated`` delta (judged), ``memory_reserved`` delta and the driver's
  free-memory delta (``mem_get_info``).

Everything is freed in a ``finally`` block; on CUDA the cache is emptied and what stays allocated
is reported as ``leaked_bytes``.
"""

from __future__ import annotations

import traceback
from typing import Any

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen
from kvcalc.units import short_int
from kvcalc.verify import torchenv
from kvcalc.verify.result import MemoryDeltas
from kvcalc.verify.spec import AllocationPlan, BufferSpec, ViewSpec

#: never take more than this fraction of the memory the device has free
MAX_FREE_FRACTION = 0.5


@frozen
class Measured:
    """What the allocation really took, in total and per component."""

    memory: MemoryDeltas
    #: component → (Σ view bytes, number of views)
    components: dict[str, tuple[int, int]]
    #: layers whose views did not cover their buffer exactly, and views torch refused
    problems: tuple[str, ...]


def check_room(nbytes: int, device: Any) -> None:
    free = torchenv.free_memory_bytes(device)
    if free and nbytes > free * MAX_FREE_FRACTION:
        raise KvcalcError(
            f"the check would allocate {short_int(nbytes)} B but {device} has {free:,} B free",
            hint="lower --num-blocks, --tokens or --layers",
            code="too-large",
        )


def make_view(torch: Any, buffer: Any, view: ViewSpec) -> Any:
    """``view`` of ``buffer``'s bytes, as the engine reads them; raises when it does not fit."""
    typed = buffer.reshape(-1).view(torch.uint8).view(getattr(torch, view.torch_dtype))
    return torch.as_strided(typed, view.shape, view.strides, view.offset)


def _views(torch: Any, buffer: Any, spec: BufferSpec, sums: dict, problems: list[str]) -> None:
    covered: dict[int, int] = {}
    for view in spec.views:
        try:
            tensor = make_view(torch, buffer, view)
        except RuntimeError as exc:
            problems.append(
                f"{spec.name}: layer {view.layer} {view.component} view does not fit: {exc}"
            )
            continue
        nbytes = tensor.numel() * tensor.element_size()
        total, count = sums.get(view.component, (0, 0))
        sums[view.component] = (total + nbytes, count + 1)
        if view.exact:
            covered[view.layer] = covered.get(view.layer, 0) + nbytes
    size = buffer.untyped_storage().nbytes()
    for layer, nbytes in covered.items():
        if nbytes != size:
            problems.append(f"{spec.name}: layer {layer}'s views cover {nbytes:,} of {size:,} B")


def _allocate(torch: Any, spec: BufferSpec, device: Any, touch: bool) -> Any:
    buffer = torch.empty(spec.shape, dtype=getattr(torch, spec.torch_dtype), device=device)
    if touch:
        buffer.reshape(-1).view(torch.uint8).fill_(0x3C)  # write every page
    return buffer


def allocate_and_measure(plan: AllocationPlan, device: Any, *, touch: bool = True) -> Measured:
    """Allocate ``plan`` on ``device``, fill it (``touch``), measure it, free it.

    Without ``touch`` the pages are never written, so the RSS delta means nothing; the storage
    bytes, the views and (on CUDA) the allocator's counters are the same.
    """
    torch = torchenv.import_torch()
    check_room(plan.allocated_bytes, device)
    torchenv.release(device)
    before = torchenv.probe(device)
    buffers: list[Any] = []
    sums: dict[str, tuple[int, int]] = {}
    problems: list[str] = []
    try:
        for spec in plan.buffers:
            buffers.append(_allocate(torch, spec, device, touch))
            _views(torch, buffers[-1], spec, sums, problems)
        after = torchenv.probe(device)
        storage = sum(b.untyped_storage().nbytes() for b in buffers)
    except BaseException as exc:  # an error, or Ctrl-C (KeyboardInterrupt)
        # the frames it passed through (_allocate, _views) still hold the buffer they worked on,
        # and the traceback keeps those frames alive: clear them so release() really frees it
        traceback.clear_frames(exc.__traceback__)
        raise
    finally:
        buffers.clear()
        torchenv.release(device)
    leaked: int | None = None
    if device.type == "cuda":
        leaked = _delta(before.cuda_allocated_bytes, torchenv.probe(device).cuda_allocated_bytes)
    return Measured(
        memory=_deltas(before, after, storage, leaked, touch),
        components=sums,
        problems=tuple(problems),
    )


def _delta(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a


def _deltas(before, after, storage: int, leaked: int | None, touched: bool) -> MemoryDeltas:
    return MemoryDeltas(
        storage_bytes=storage,
        rss_delta_bytes=_delta(before.rss_bytes, after.rss_bytes) if touched else None,
        cuda_allocated_delta_bytes=_delta(before.cuda_allocated_bytes, after.cuda_allocated_bytes),
        cuda_reserved_delta_bytes=_delta(before.cuda_reserved_bytes, after.cuda_reserved_bytes),
        driver_free_delta_bytes=_delta(after.cuda_free_bytes, before.cuda_free_bytes),
        leaked_bytes=leaked,
    )
