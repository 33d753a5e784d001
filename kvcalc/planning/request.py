"""The engine's view of what a person asked: a resolved :class:`Deployment` →
:class:`EngineRequest` and :class:`MemoryInputs`. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.engines.names import traits
from kvcalc.errors import InputError
from kvcalc.model.shape import ModelShape
from kvcalc.planning.deployment import Deployment
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.parallel import moe_split

if TYPE_CHECKING:  # a draft's types: its module loads only when a deployment speculates
    from kvcalc.engines.speculative import SpeculativeDraft


def engine_request(
    model: ModelShape,
    deployment: Deployment,
    *,
    available_kv_bytes: int,
    speculative: SpeculativeDraft | None = None,
) -> EngineRequest:
    """The engine's view of ``deployment`` with ``available_kv_bytes`` of KV memory per GPU."""
    inputs, gpu = deployment.inputs, deployment.gpu
    moe_ranks, whole = moe_split(inputs)
    return EngineRequest(
        model=model,
        kv_cache_dtype=inputs.kv_cache_dtype,
        dtype=inputs.dtype,
        engine_version=inputs.engine_version,
        max_model_len=inputs.max_model_len or model.max_model_len,
        tensor_parallel_size=inputs.tensor_parallel_size,
        pipeline_parallel_size=inputs.pipeline_parallel_size,
        decode_context_parallel_size=inputs.decode_context_parallel_size,
        prefill_context_parallel_size=inputs.prefill_context_parallel_size,
        cp_kv_cache_interleave_size=inputs.cp_kv_cache_interleave_size or 1,
        attention_data_parallel_size=deployment.attention_data_parallel_size,
        moe_ranks=moe_ranks,
        expert_parallel=whole,
        block_size=inputs.block_size,
        max_num_batched_tokens=inputs.max_num_batched_tokens,
        max_num_seqs=inputs.max_num_seqs,
        available_kv_bytes=available_kv_bytes,
        gpu_memory_utilization=inputs.gpu_memory_utilization,
        gpu_memory_bytes=deployment.memory_bytes,
        gpu_name=gpu.device_name if gpu else None,
        gpu_compute_capability=deployment.compute_capability,
        extra=engine_extra(inputs),
        enforce_eager=inputs.enforce_eager,
        enable_prefix_caching=inputs.enable_prefix_caching,
        async_scheduling=inputs.async_scheduling,
        cudagraph_capture_sizes=inputs.cudagraph_capture_sizes,
        max_cudagraph_capture_size=inputs.max_cudagraph_capture_size,
        cudagraph_mode=inputs.cudagraph_mode,
        speculative=speculative,
        lora=inputs.lora,
        offload=inputs.offload,
        limit_mm_per_prompt=inputs.limit_mm_per_prompt,
        mm_encoder_tp_mode=inputs.mm_encoder_tp_mode,
        mm_ipc_gpu_memory_bytes=inputs.mm_ipc_gpu_memory_bytes,
        weight_dtype=inputs.dtype,
    )


def memory_inputs(model: ModelShape, deployment: Deployment) -> MemoryInputs:
    """What the engine's memory rules read for ``deployment`` (the fraction as given: None = the
    engine's default)."""
    inputs = deployment.inputs
    return MemoryInputs(
        engine_version=inputs.engine_version,
        gpu_memory_bytes=deployment.memory_bytes,
        tensor_parallel_size=inputs.tensor_parallel_size,
        pipeline_parallel_size=inputs.pipeline_parallel_size,
        attention_data_parallel_size=deployment.attention_data_parallel_size,
        decode_context_parallel_size=inputs.decode_context_parallel_size,
        max_num_seqs=inputs.max_num_seqs,
        model=model,
        gpu_memory_utilization=inputs.gpu_memory_utilization,
        extra=dict(inputs.engine_options),
    )


def engine_extra(inputs: PlanInputs) -> dict[str, Any]:
    """``--engine-option`` values, plus the sequences where an engine allocates per request
    up front: transformers' cache batch and llama.cpp's slots (``--parallel``, with ``-c`` the
    total context of all slots)."""
    extra = dict(inputs.engine_options)
    can = traits(inputs.engine)
    off = can.prefix_caching_off_option
    if off and inputs.enable_prefix_caching is not None:
        # SGLang: prefix caching off is --disable-radix-cache (server_args.py)
        given = extra.get(off)
        if given is not None and bool(given) == inputs.enable_prefix_caching:
            raise InputError(
                f"--{'enable' if inputs.enable_prefix_caching else 'no-enable'}-prefix-caching and "
                f"--engine-option {off}={given} disagree",
                hint="give prefix caching once",
                code="conflicting-options",
            )
        extra[off] = not inputs.enable_prefix_caching
    if inputs.allow_long_max_model_len and can.long_max_model_len:
        extra["allow_long_max_model_len"] = True
    target = inputs.sequences
    if can.batch_from_target and target and "batch_size" not in extra:
        extra["batch_size"] = target
    if can.slots_from_target and target and "n_seq_max" not in extra:
        extra["n_seq_max"] = target
        extra.setdefault("n_ctx", (inputs.max_model_len or 0) * target or None)
        if extra["n_ctx"] is None:
            del extra["n_ctx"]
    return extra
