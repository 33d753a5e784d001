"""``verify --fill`` (CUDA only): emulate the whole deployment on this GPU.

The plan is made for this card (its name and the driver's total memory). Then, with plain device
allocations only (never managed memory), in this order:

1. the predicted weights of one rank, as one placeholder allocation;
2. the predicted activation peak and CUDA-graph pool, as one reserve (the CUDA context this process
   already holds stands for the predicted non-torch memory, and is measured);
3. the engine's cache tensors at the plan's ``num_blocks``, when they fit the budget;
4. more blocks, in shrinking chunks, until ``gpu_memory_utilization × total`` is reached.

Before every step the driver's free memory is read (``mem_get_info``) and a step never asks for more
than is free minus a safety margin. An out-of-memory error is caught; everything is freed in a
``finally`` block and the allocator cache emptied, so nothing stays allocated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvcalc.errors import KvcalcError
from kvcalc.model.shape import ModelShape
from kvcalc.verify import torchenv
from kvcalc.verify.result import ComponentResult, FillResult, VerifyResult, judge
from kvcalc.verify.spec import VerifyOptions

if TYPE_CHECKING:
    from kvcalc.planning.result import CapacityPlan
    from kvcalc.verify.spec import AllocationPlan

#: free memory never handed out, for the driver and the allocator's own rounding
SAFETY_MARGIN_BYTES = 64 << 20
#: largest extra chunk tried, in bytes
MAX_CHUNK_BYTES = 1 << 30


class _Pool:
    """Allocations made during a fill, all released together."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch, self.device = torch, device
        self.tensors: list[Any] = []  # torch tensors (torch is imported lazily, untyped here)
        #: an allocation failed: stop allocating; ``oom_caught`` also counts the forced test OOM
        self.oom = self.oom_caught = False

    def free_bytes(self) -> int:
        return int(self.torch.cuda.mem_get_info(self.device)[0])

    def used_bytes(self) -> int:
        free, total = self.torch.cuda.mem_get_info(self.device)
        return int(total - free)

    def take(self, nbytes: int, *, force: bool = False) -> bool:
        """Allocate ``nbytes`` if they are free (``force``: the test hook that provokes an OOM)."""
        if nbytes <= 0:
            return True
        if not force and nbytes > self.free_bytes() - SAFETY_MARGIN_BYTES:
            return False
        try:
            self.tensors.append(
                self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
            )
        except self.torch.cuda.OutOfMemoryError:
            self.oom_caught = True
            self.oom = self.oom or not force
            return False
        return True

    def drop_from(self, count: int) -> None:
        """Free the allocations made after the first ``count``."""
        del self.tensors[count:]
        torchenv.release(self.device)

    def release(self) -> None:
        self.drop_from(0)


def _plan_for_this_gpu(
    shape: ModelShape, opts: VerifyOptions, total: int, name: str, util: float | None
) -> CapacityPlan:
    from kvcalc.engines.names import engine_name
    from kvcalc.errors import InputError
    from kvcalc.model.gpus import get_gpu
    from kvcalc.planning.core import plan
    from kvcalc.planning.inputs import PlanInputs

    try:
        gpu = get_gpu(name).name
    except InputError:
        gpu = None
    inputs = PlanInputs(
        engine=engine_name(opts.engine), engine_version=opts.engine_version, gpu=gpu, gpu_memory_bytes=total,
        tensor_parallel_size=opts.tensor_parallel_size, max_model_len=opts.max_model_len,
        kv_cache_dtype=opts.kv_cache_dtype, gpu_memory_utilization=util, block_size=opts.block_size,
        engine_options=opts.engine_options,
    )  # fmt: skip
    return plan(shape, inputs, with_suggestions=False)


def _bytes_per_block(cplan: CapacityPlan) -> int:
    if cplan.num_blocks:
        return cplan.kv_cache_bytes // cplan.num_blocks
    return max(g.page_bytes if g.uniform_type else g.page_bytes * len(g.layer_indices)
               for g in cplan.groups)  # fmt: skip


def _cache_layout(shape: ModelShape, cplan: CapacityPlan, opts: VerifyOptions) -> AllocationPlan:
    """The engine's tensors at the plan's block count (same groups and pages as the plan)."""
    from kvcalc.model.dtypes import parse_cache_dtype
    from kvcalc.verify.layout_vllm import build_from_plan

    layers = (
        shape.with_cache_dtype(parse_cache_dtype(cplan.kv_cache_dtype))
        .per_rank(opts.tensor_parallel_size)
        .layers
    )
    return build_from_plan(cplan, layers)


def _extra_blocks(pool: _Pool, bpb: int, budget: int) -> int:
    """Blocks that still fit under ``budget``, allocated in shrinking chunks."""
    blocks, chunk = 0, max(1, MAX_CHUNK_BYTES // bpb)
    while chunk >= 1:
        room = budget - pool.used_bytes()
        if room >= chunk * bpb and pool.take(chunk * bpb):
            blocks += chunk
            continue
        if pool.oom:
            break
        chunk //= 2
    return blocks


def verify_fill(
    shape: ModelShape, opts: VerifyOptions, *, device: str = "auto", tolerance: float = 0.01,
    gpu_memory_utilization: float | None = None, oversubscribe_bytes: int = 0,
) -> VerifyResult:  # fmt: skip
    """Emulate the deployment; ``oversubscribe_bytes`` (tests only) asks for more than is free."""
    torch = torchenv.import_torch()
    dev = torchenv.resolve_device(device)
    if dev.type != "cuda":
        raise KvcalcError("--fill emulates the deployment on a GPU and needs CUDA; this machine has none",
                          hint="run the layout check (without --fill) on CPU", code="needs-cuda")  # fmt: skip
    from kvcalc.engines.names import traits

    if not traits(opts.engine).fill_check:
        raise KvcalcError("--fill emulates vLLM's memory budget; use --engine vllm",
                          hint="other engines: the layout check (without --fill)", code="unsupported-engine")  # fmt: skip
    torchenv.release(dev)
    allocated_before = torch.cuda.memory_allocated(dev)
    free0, total = (int(x) for x in torch.cuda.mem_get_info(dev))
    name = torch.cuda.get_device_name(dev)
    non_torch = total - free0 - torch.cuda.memory_reserved(dev)
    cplan = _plan_for_this_gpu(shape, opts, total, name, gpu_memory_utilization)
    m = cplan.memory
    bpb = _bytes_per_block(cplan)
    pool = _Pool(torch, dev)
    notes: list[str] = []
    try:
        if oversubscribe_bytes:
            pool.take(pool.free_bytes() + oversubscribe_bytes, force=True)
        if not pool.take(m.weights_bytes):
            notes.append("the weights placeholder does not fit on this GPU")
        elif not pool.take(m.activation_bytes + m.cudagraph_bytes):
            notes.append("the activation/CUDA-graph reserve does not fit on this GPU")
        blocks = (
            _fill_cache(pool, shape, cplan, opts, bpb, m.budget_bytes, notes) if not notes else 0
        )
        headroom = m.budget_bytes - pool.used_bytes()
    finally:
        pool.release()
    leaked = torch.cuda.memory_allocated(dev) - allocated_before
    fill = FillResult(
        gpu_name=name, total_memory_bytes=total, gpu_memory_utilization=m.gpu_memory_utilization,
        budget_bytes=m.budget_bytes, weights_bytes=m.weights_bytes, activation_bytes=m.activation_bytes,
        cudagraph_bytes=m.cudagraph_bytes, predicted_non_torch_bytes=m.non_torch_bytes,
        measured_non_torch_bytes=non_torch, bytes_per_block=bpb, planned_num_blocks=cplan.num_blocks,
        allocatable_num_blocks=blocks, relative_error=0.0, headroom_bytes=headroom, oom_caught=pool.oom_caught,
        leaked_bytes=leaked,
    )  # fmt: skip
    return _result(
        shape, opts, cplan, fill, tolerance, notes, str(dev), total, str(torch.__version__)
    )


def _fill_cache(
    pool: _Pool, shape: ModelShape, cplan: CapacityPlan, opts: VerifyOptions, bpb: int, budget: int,
    notes: list[str],
) -> int:  # fmt: skip
    room = budget - pool.used_bytes()
    blocks = 0
    if cplan.num_blocks and cplan.kv_cache_bytes <= room:
        layout = _cache_layout(shape, cplan, opts)
        start = len(pool.tensors)
        if all(pool.take(b.nbytes) for b in layout.buffers):
            blocks = cplan.num_blocks
        else:
            pool.drop_from(start)
            pool.oom = False
            notes.append(
                "the planned cache tensors did not all fit; blocks counted in chunks instead"
            )
    elif cplan.num_blocks:
        notes.append(
            f"the planned {cplan.num_blocks:,} blocks exceed the budget left after weights and reserve"
        )
    if pool.oom:
        return blocks
    return blocks + _extra_blocks(pool, bpb, budget)


def _result(
    shape, opts, cplan, fill: FillResult, tolerance, notes, device, total, torch_version
) -> VerifyResult:
    from dataclasses import replace

    predicted = fill.planned_num_blocks * fill.bytes_per_block
    measured = fill.allocatable_num_blocks * fill.bytes_per_block
    component = ComponentResult(name="kv cache blocks", predicted_bytes=predicted, measured_bytes=measured,
                                relative_error=0.0, tensors=fill.allocatable_num_blocks)  # fmt: skip
    error, passed = judge(predicted, measured, (), tolerance)
    component = replace(component, relative_error=error)
    fill = replace(fill, relative_error=error)
    if fill.leaked_bytes:
        notes.append(f"{fill.leaked_bytes:,} B stayed allocated after the fill")
    return VerifyResult(
        check="fill", model=shape.name, engine=cplan.engine, engine_version=cplan.engine_version,
        kv_cache_dtype=cplan.kv_cache_dtype, tensor_parallel_size=opts.tensor_parallel_size, device=device,
        device_name=fill.gpu_name, total_device_memory_bytes=total, torch_version=torch_version,
        layout="vLLM budget emulated: weights + reserve + cache blocks", block_size=cplan.block_size,
        num_blocks=cplan.num_blocks, tokens=cplan.kv_cache_tokens, num_layers=shape.num_layers,
        predicted_bytes=predicted, measured_bytes=measured, relative_error=error, tolerance=tolerance,
        passed=passed and not fill.leaked_bytes and not fill.oom_caught,
        judged_on="blocks allocatable under gpu_memory_utilization × total (mem_get_info)",
        components=(component,), fill=fill, notes=(*notes, *cplan.notes),
    )  # fmt: skip
