"""What ``kvcalc verify`` found, as frozen dataclasses. Field names are the ``--json`` keys."""

from __future__ import annotations

import math
from dataclasses import asdict, field
from typing import TYPE_CHECKING, Any

from kvcalc.frozen import frozen

if TYPE_CHECKING:
    from kvcalc.verify.spec import AllocationPlan

#: ``--tolerance`` default: 1 % relative error
DEFAULT_TOLERANCE = 0.01


def relative_error(predicted: int, measured: int) -> float:
    """``(measured − predicted) / predicted``; 0 when both are 0, infinite when only predicted is."""
    if predicted == 0:
        return 0.0 if measured == 0 else math.inf
    return (measured - predicted) / predicted


@frozen
class ComponentResult:
    """One component (a layer kind's K, V, latent or state) over all its layers."""

    name: str
    predicted_bytes: int
    measured_bytes: int
    relative_error: float
    #: tensors (or views of shared tensors) measured for it
    tensors: int
    num_layers: int = 0

    @property
    def within(self) -> bool:
        return math.isfinite(self.relative_error)


@frozen
class MemoryDeltas:
    """Process and device memory around the allocation. ``None`` where not measurable."""

    #: Σ ``untyped_storage().nbytes()`` of every allocated tensor
    storage_bytes: int
    #: resident memory growth after filling the tensors (CPU; noisy, never judged)
    rss_delta_bytes: int | None = None
    cuda_allocated_delta_bytes: int | None = None
    cuda_reserved_delta_bytes: int | None = None
    #: the driver's free-memory drop (``torch.cuda.mem_get_info``)
    driver_free_delta_bytes: int | None = None
    #: CUDA bytes still allocated after everything was freed (should be 0)
    leaked_bytes: int | None = None


@frozen
class FillResult:
    """``--fill``: the deployment emulated on this GPU."""

    gpu_name: str
    total_memory_bytes: int
    gpu_memory_utilization: float | None
    budget_bytes: int
    weights_bytes: int
    activation_bytes: int
    cudagraph_bytes: int
    predicted_non_torch_bytes: int
    #: memory in use before anything was allocated that torch does not own (CUDA context...)
    measured_non_torch_bytes: int
    bytes_per_block: int
    planned_num_blocks: int
    allocatable_num_blocks: int
    relative_error: float
    #: budget left after the last block that fitted
    headroom_bytes: int
    oom_caught: bool = False
    leaked_bytes: int = 0

    @property
    def predicted_overhead_bytes(self) -> int:
        return self.activation_bytes + self.cudagraph_bytes + self.predicted_non_torch_bytes

    @property
    def measured_overhead_bytes(self) -> int:
        """The overhead that explains the allocatable block count (for calibration records)."""
        missing = self.planned_num_blocks - self.allocatable_num_blocks
        return self.predicted_overhead_bytes + missing * self.bytes_per_block


@frozen
class RunInfo:
    """``--run``: transformers generated with its own cache."""

    transformers_version: str
    num_layers: int
    prompt_tokens: int
    new_tokens: int
    cached_tokens: int
    cache_class: str
    layer_classes: tuple[str, ...]
    #: Σ view bytes (numel × itemsize) of the cache tensors, next to their storage bytes
    logical_bytes: int
    reduced: dict[str, Any] = field(default_factory=dict)


@frozen
class LlamaCppRun:
    """``--run --engine llamacpp``: llama.cpp loaded the model and reported its cache."""

    llama_cpp_version: str
    #: the llama.cpp architecture of the GGUF written for the run
    architecture: str
    predicted_lines: tuple[str, ...]
    #: llama.cpp's own lines with the same prefixes, in its order
    measured_lines: tuple[str, ...]
    lines_match: bool
    #: llama.cpp's compute-buffer lines (``sched_reserve``), as printed
    compute_lines: tuple[str, ...] = ()
    #: kvcalc's line for the CPU compute buffer; empty where it is not modelled (see the notes)
    predicted_compute_lines: tuple[str, ...] = ()
    #: the buffer in MiB to four decimals, as llama.cpp prints it (at debug level) when the
    #: context is freed, and as kvcalc predicts it; empty where not modelled or not printed
    measured_compute_mib: str = ""
    predicted_compute_mib: str = ""
    predicted_compute_bytes: int | None = None
    #: both the line and the four-decimal figure agree (True where the buffer is not modelled)
    compute_match: bool = True


@frozen
class VerifyResult:
    """``kvcalc verify``'s answer."""

    check: str  # "layout", "fill" or "run"
    model: str
    engine: str
    engine_version: str
    kv_cache_dtype: str
    tensor_parallel_size: int
    device: str
    device_name: str
    total_device_memory_bytes: int
    torch_version: str
    layout: str
    block_size: int
    num_blocks: int
    tokens: int
    num_layers: int
    predicted_bytes: int
    measured_bytes: int
    relative_error: float
    tolerance: float
    passed: bool
    #: what ``measured_bytes`` is (storage bytes on CPU, the allocator's delta on CUDA...)
    judged_on: str
    components: tuple[ComponentResult, ...]
    memory: MemoryDeltas | None = None
    fill: FillResult | None = None
    run: RunInfo | None = None
    llamacpp: LlamaCppRun | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.fill is not None:
            data["fill"]["predicted_overhead_bytes"] = self.fill.predicted_overhead_bytes
            data["fill"]["measured_overhead_bytes"] = self.fill.measured_overhead_bytes
        return data


def judge(
    predicted: int, measured: int, components: tuple[ComponentResult, ...], tolerance: float
) -> tuple[float, bool]:
    """(total relative error, passed): the total and every component within ``tolerance``."""
    error = relative_error(predicted, measured)
    ok = abs(error) <= tolerance and all(abs(c.relative_error) <= tolerance for c in components)
    return error, ok


def components_from(
    plan: AllocationPlan, measured: dict[str, tuple[int, int]]
) -> tuple[ComponentResult, ...]:
    """Predicted vs measured per component, in the plan's order, measured-only ones last."""
    rows = []
    for c in plan.components:
        got, count = measured.get(c.name, (0, 0))
        rows.append(ComponentResult(name=c.name, predicted_bytes=c.predicted_bytes, measured_bytes=got,
                                    relative_error=relative_error(c.predicted_bytes, got), tensors=count,
                                    num_layers=c.num_layers))  # fmt: skip
    known = {c.name for c in plan.components}
    for name, (got, count) in measured.items():
        if name not in known:
            rows.append(ComponentResult(name=name, predicted_bytes=0, measured_bytes=got,
                                        relative_error=relative_error(0, got), tensors=count))  # fmt: skip
    return tuple(rows)
