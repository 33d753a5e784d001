"""The overhead terms a plan charges: kvcalc's estimate (``kvcalc.estimate.overhead``), the
engine's own compute buffer where it has one (llama.cpp), no non-torch term without PyTorch, and a
calibration's correction. Pure."""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.base import Engine, EngineRequest
from kvcalc.engines.names import traits
from kvcalc.errors import KvcalcError
from kvcalc.estimate.calibration import apply_calibration
from kvcalc.estimate.overhead import Overhead, estimate_overhead
from kvcalc.model.gpus import GpuSpec
from kvcalc.model.shape import ModelShape
from kvcalc.planning.engine_asks import (
    cudagraph_captures,
    flashinfer_sampler,
    mm_limits,
    scheduler_defaults,
    subtracts_cudagraph,
)
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.parallel import has_routed_experts, moe_split

GIVEN_KV_NOTE = ("the activation peak, non-torch memory and CUDA graphs are still allocated beside a "
                 "given KV cache (vLLM profiles and captures its graphs regardless): estimated here, "
                 "they must fit in what is left of the GPU")  # fmt: skip


def estimated(model, inputs, gpu, engine, request, calibration) -> Overhead:
    """The overhead terms for ``inputs``: the estimate, the engine's own compute buffer, no
    non-torch term without PyTorch, and a calibration's correction (zero with ``--kv-cache-memory``)."""
    overhead = _overhead(model, inputs, gpu, scheduler_defaults(engine, request), engine, request)
    overhead = _engine_compute(engine, request, overhead, inputs)
    overhead = _without_torch(overhead, inputs)
    if calibration is not None and inputs.kv_cache_memory_bytes is None:  # `verify --record`
        overhead = apply_calibration(overhead, calibration)
    return overhead


def _overhead(
    model: ModelShape,
    inputs: PlanInputs,
    gpu: GpuSpec | None,
    defaults: tuple[int | None, int | None],
    engine: Engine,
    request: EngineRequest,
) -> Overhead:
    if inputs.kv_cache_memory_bytes is not None:
        return Overhead(activation_bytes=0, non_torch_bytes=0, cudagraph_bytes=0,
                        notes=("--kv-cache-memory given: the engine skips its memory estimate",))  # fmt: skip
    tokens = inputs.max_num_batched_tokens or defaults[0] or 2048
    flashinfer = flashinfer_sampler(engine, request)
    limits = mm_limits(engine, request)
    can = traits(inputs.engine)
    if can.overhead_calibrated:
        seqs_default = "vLLM's default"
    elif can.max_num_seqs_knob:
        seqs_default = "assumed (the engine sets no max_num_seqs)"
    else:  # the sampler's rows: the engine has no such cap, vLLM's default stands in
        seqs_default = f"assumed for the sampler ({can.name.display} has no such cap)"
    try:
        return estimate_overhead(
            model,
            max_num_batched_tokens=tokens,
            tensor_parallel_size=inputs.tensor_parallel_size,
            # no CUDA-graph memory for an engine that captures none kvcalc can size
            enforce_eager=inputs.enforce_eager or not can.cuda_graphs,
            gpu=gpu,
            max_num_seqs=inputs.max_num_seqs or defaults[1],
            pipeline_parallel_size=inputs.pipeline_parallel_size,
            # the estimate follows the releases of the engine it was calibrated on; others get its newest
            engine_version=inputs.engine_version if can.overhead_calibrated else None,
            quantization=inputs.quantization,
            subtracts_cudagraph=subtracts_cudagraph(engine, inputs.engine_version),
            seqs_default=seqs_default,
            flashinfer_sampler=flashinfer,
            mm_limits=limits,
            cudagraph_captures=cudagraph_captures(engine, request),
            # the DP/EP group of a MoE model talks over NCCL (dense DP ranks do not)
            communicator_size=moe_split(inputs)[0] if has_routed_experts(model) else 1,
        )
    except KvcalcError:
        why = ("the GGUF header's widths of these layers are not read (recurrent mixers)"
               if model.gguf else "the config lacks the sizes it needs")  # fmt: skip
        return Overhead(activation_bytes=0, non_torch_bytes=0, cudagraph_bytes=0,
                        notes=(f"no overhead estimate: {why}; activation, non-torch and CUDA-graph "
                               "memory are not counted",))  # fmt: skip


def _engine_compute(
    engine: Engine, request: EngineRequest, overhead: Overhead, inputs: PlanInputs
) -> Overhead:
    """The engine's own compute-buffer model (llama.cpp) in place of the activation estimate."""
    ask = getattr(engine, "compute_buffer", None)
    if ask is None or inputs.kv_cache_memory_bytes is not None:
        return overhead
    try:
        buffer, why = ask(request)
    except KvcalcError:
        return overhead  # the KV plan reports the bad option
    if buffer is None:
        return replace(overhead, notes=(*overhead.notes, f"compute buffer not modelled: {why}"))
    # the engine's figure replaces the activation estimate and its notes (it includes the logits)
    kept = tuple(n for n in overhead.notes
                 if not n.startswith(("activation (", "max_num_seqs ", "no overhead estimate")))  # fmt: skip
    return replace(overhead, activation_bytes=buffer.bytes, forward_bytes=0, sampler_bytes=0,
                   moe_workspace_bytes=0, stages=(), notes=(*kept, buffer.note))  # fmt: skip


def _without_torch(overhead: Overhead, inputs: PlanInputs) -> Overhead:
    """No non-torch term for an engine without PyTorch (llama.cpp): that term is vLLM's, measured
    beside PyTorch's allocator. What such an engine holds outside the buffers it prints is not
    modelled: on the CPU backend nothing, on CUDA its context and cuBLAS workspace (unconfirmed)."""
    if traits(inputs.engine).torch_runtime or inputs.kv_cache_memory_bytes is not None:
        return overhead
    if dict(inputs.engine_options).get("buffer_name") == "CPU":
        note = ("no non-torch term: llama.cpp has no PyTorch, and its CPU backend allocates nothing "
                "beyond the buffers it prints")  # fmt: skip
    else:
        note = ("no non-torch term: llama.cpp has no PyTorch; its CUDA backend's context and cuBLAS "
                "workspace (outside the buffers it prints) are not modelled (unconfirmed, not counted)")  # fmt: skip
    stages = tuple(replace(s, non_torch_bytes=0) for s in overhead.stages)
    return replace(overhead, non_torch_bytes=0, stages=stages, notes=(*overhead.notes, note))
