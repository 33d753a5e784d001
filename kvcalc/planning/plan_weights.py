"""Weights per GPU for a plan: ``--weights-memory``, the checkpoint's exact bytes split as the engine
loads them, a GGUF file's tensors, or the config-based estimate (:mod:`kvcalc.estimate.weights`).

Pure: the checkpoint's bytes (``exact``) are read by :mod:`kvcalc.planning.api` and passed in.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.parallel import dense_mlps_whole, moe_split, shared_experts_whole

if TYPE_CHECKING:
    from kvcalc.sources.safetensors_meta import SafetensorsWeights


@frozen
class PlanWeights:
    per_gpu_bytes: int
    source: str
    num_parameters: int | None
    notes: tuple[str, ...] = ()
    #: per pipeline stage, first to last (empty: every stage holds ``per_gpu_bytes``)
    stage_bytes: tuple[int, ...] = ()
    #: LoRA adapter slots per GPU, included in ``per_gpu_bytes`` (vLLM loads them with the weights)
    lora_bytes: int = 0
    #: the decoder layers' bytes per GPU (what weight offloading may move); 0: not known
    layer_bytes: int = 0
    #: bytes per GPU moved to host memory (``--cpu-offload-gb``), already out of ``per_gpu_bytes``
    offloaded_bytes: int = 0
    #: the vision tower's bytes per GPU, and whole (unsplit); 0: none counted
    vision_bytes: int = 0
    vision_bytes_whole: int = 0
    #: of ``vision_bytes``: a second tower's (Qwen2.5-Omni's audio encoder), built apart
    companion_bytes: int = 0


_WEIGHTS_MEMO: dict[tuple, Any] = {}


def _weight_estimate(model: ModelShape, inputs: PlanInputs):
    """``kvcalc.estimate.weights.weight_bytes``, memoised on what it reads (sweeps plan one model many times)."""
    from kvcalc.estimate.weights import weight_bytes

    ranks, whole = moe_split(inputs)
    shared_whole = shared_experts_whole(model, inputs)
    dense_whole = dense_mlps_whole(model, inputs)
    key: tuple[object, ...] = (model.name, model.weights, model.dtype, inputs.dtype, inputs.quantization,
           inputs.tensor_parallel_size, inputs.pipeline_parallel_size, ranks, whole,
           inputs.num_redundant_experts, shared_whole, dense_whole)  # fmt: skip
    try:
        hash(key)
    except TypeError:
        key = (id(model), *key[2:])
    if key not in _WEIGHTS_MEMO:
        if len(_WEIGHTS_MEMO) > 512:
            _WEIGHTS_MEMO.clear()
        _WEIGHTS_MEMO[key] = weight_bytes(
            model,
            dtype=inputs.dtype,
            quantization=inputs.quantization,
            tensor_parallel_size=inputs.tensor_parallel_size,
            pipeline_parallel_size=inputs.pipeline_parallel_size,
            moe_ranks=ranks,
            expert_parallel=whole,
            redundant_experts=inputs.num_redundant_experts,
            shared_experts_whole=shared_whole,
            dense_mlps_whole=dense_whole,
        )
    return _WEIGHTS_MEMO[key]


def plan_weights(
    model: ModelShape, inputs: PlanInputs, exact: SafetensorsWeights | None
) -> PlanWeights:
    """Weights per GPU and where each byte came from (``exact``: safetensors or GGUF bytes)."""
    single = inputs.tensor_parallel_size * inputs.pipeline_parallel_size == 1
    if model.gguf and exact is not None and single and inputs.weights_memory_bytes is None:
        # a GGUF file on one GPU: its tensor infos are the bytes (the dimensions read from the
        # header describe the layers for the activation estimate, not the quantized storage)
        return PlanWeights(per_gpu_bytes=exact.total_bytes, source=exact.source, num_parameters=exact.num_parameters,
                        notes=(f"weights: {exact.total_bytes:,} B in the file's tensors",))  # fmt: skip
    try:
        est = _weight_estimate(model, inputs)
    except KvcalcError as exc:
        single = inputs.tensor_parallel_size * inputs.pipeline_parallel_size == 1
        if exact is not None and single and inputs.weights_memory_bytes is None:
            # a GGUF file: its tensor infos give the bytes; there is no config to estimate from
            return PlanWeights(per_gpu_bytes=exact.total_bytes, source=exact.source, num_parameters=exact.num_parameters,
                            notes=(f"weights: {exact.total_bytes:,} B in the file's tensors",))  # fmt: skip
        if inputs.weights_memory_bytes is None and inputs.kv_cache_memory_bytes is None:
            raise
        return PlanWeights(
            per_gpu_bytes=inputs.weights_memory_bytes or 0,
            source="given (--weights-memory)"
            if inputs.weights_memory_bytes
            else "not needed (--kv-cache-memory)",
            num_parameters=None,
            notes=(f"no weight estimate: {exc.message}",),
        )
    stages = tuple(s + b for s, b in zip(est.stage_bytes_per_gpu, est.stage_buffers, strict=True))
    per_gpu = max(stages)
    if inputs.weights_memory_bytes is not None:
        return PlanWeights(per_gpu_bytes=inputs.weights_memory_bytes, source="given (--weights-memory)",
                        num_parameters=est.num_parameters)  # fmt: skip
    if (
        exact is not None
        and inputs.dtype is None
        and inputs.quantization is None
        and est.weights_bytes
    ):
        # the checkpoint's exact bytes, split across GPUs (and padded) as the estimate lays them out
        exact, mtp_note = _without_mtp(model, exact)
        shares = _exact_shares(est, exact)
        ratio = exact.total_bytes / est.weights_bytes
        padding = est.layout_padding_bytes_per_gpu
        return PlanWeights(
            per_gpu_bytes=max(shares),
            source=exact.source,
            num_parameters=est.num_parameters,
            stage_bytes=shares,
            layer_bytes=round(est.decoder_layer_bytes_per_gpu * ratio),
            vision_bytes=round(est.vision_bytes_per_gpu * ratio),
            vision_bytes_whole=round(est.vision_bytes_unsplit * ratio),
            companion_bytes=round(est.companion_bytes_per_gpu * ratio),
            notes=(
                f"weights: {exact.total_bytes:,} B in the checkpoint ({exact.source}), split over "
                + (
                    "TP/PP"
                    if est.moe_ranks == est.tensor_parallel_size and not est.expert_parallel
                    else f"TP/PP, routed experts over {est.moe_ranks} MoE ranks"
                )
                + " as vLLM loads them (config layout"
                + (f", {padding:,} B of kernel padding per GPU" if padding else "")
                + f"), plus {est.buffers_bytes_per_gpu:,} B of buffers (RoPE cache, fp32 scales)",
                *mtp_note,
            ),  # fmt: skip
        )
    return PlanWeights(per_gpu_bytes=per_gpu, source="config estimate", num_parameters=est.num_parameters,
                    notes=est.notes, stage_bytes=stages,
                    layer_bytes=est.decoder_layer_bytes_per_gpu, vision_bytes=est.vision_bytes_per_gpu,
                    vision_bytes_whole=est.vision_bytes_unsplit,
                    companion_bytes=est.companion_bytes_per_gpu)  # fmt: skip


def _without_mtp(
    model: ModelShape, exact: SafetensorsWeights
) -> tuple[SafetensorsWeights, tuple[str, ...]]:
    """The checkpoint less its MTP modules, which the target model does not load (a speculative
    draft counts its own weights: :mod:`kvcalc.engines.vllm.speculative`)."""
    mtp_layers = len(model.mtp.layers) if model.mtp is not None else 0
    total, experts = exact.mtp_bytes(model.num_layers, mtp_layers)
    if not total:
        return exact, ()
    kept = replace(exact, total_bytes=exact.total_bytes - total,
                   experts_bytes=exact.experts_bytes - experts,
                   non_expert_bytes=exact.non_expert_bytes - (total - experts))  # fmt: skip
    note = (f"weights: the checkpoint's {total:,} B of MTP modules are not loaded with the target "
            "(vLLM skips them; a speculative draft loads its own)")  # fmt: skip
    return kept, (note,)


def _exact_shares(est: Any, exact: SafetensorsWeights) -> tuple[int, ...]:
    """Each stage's share of the checkpoint's bytes: the estimate's layout scaled to the file. Where
    the experts are split otherwise than the rest (vLLM DP/EP), experts and the rest are scaled
    apart, each by the file's own bytes of them."""
    buffers = est.stage_buffers
    split_apart = est.moe_ranks != est.tensor_parallel_size or est.expert_parallel
    rest = est.weights_bytes - est.experts_bytes
    if not (split_apart and est.experts_bytes and exact.experts_bytes and rest > 0):
        ratio = exact.total_bytes / est.weights_bytes
        return tuple(
            round(s * ratio) + b for s, b in zip(est.stage_bytes_per_gpu, buffers, strict=True)
        )
    expert_ratio = exact.experts_bytes / est.experts_bytes
    rest_ratio = exact.non_expert_bytes / rest
    return tuple(
        round((s - e - m) * rest_ratio) + round(e * expert_ratio) + m + b
        for s, e, m, b in zip(est.stage_bytes_per_gpu, est.stage_expert_bytes_per_gpu,
                              est.stage_expert_map_bytes_per_gpu, buffers, strict=True)
    )  # fmt: skip


def with_lora(
    weights: PlanWeights, slot_bytes: int, notes: tuple[str, ...], *, given: bool
) -> PlanWeights:
    """``weights`` with the engine's LoRA slots (``slot_bytes`` per GPU) in them. ``given``:
    ``--weights-memory`` was given, taken as vLLM's "Model loading took" figure, which already
    includes the slots (``load_lora_model`` runs inside the same ``DeviceMemoryProfiler``)."""
    if given:
        note = (
            f"LoRA slots ({slot_bytes:,} B) taken as included in --weights-memory (vLLM's "
            "'Model loading took' figure includes them)"
        )
        return replace(weights, lora_bytes=slot_bytes, notes=(*weights.notes, *notes, note))
    stages = tuple(s + slot_bytes for s in weights.stage_bytes)
    return replace(weights, per_gpu_bytes=weights.per_gpu_bytes + slot_bytes, stage_bytes=stages,
                   lora_bytes=slot_bytes, notes=(*weights.notes, *notes))  # fmt: skip


def with_offload(weights: PlanWeights, moved_bytes: int, note: str, *, given: bool) -> PlanWeights:
    """``weights`` less ``moved_bytes`` per GPU moved to host memory (``--cpu-offload-gb``).
    ``given``: ``--weights-memory`` is vLLM's "Model loading took", measured on the GPU after the
    move: nothing to take off."""
    if given:
        note += "; --weights-memory taken as measured after the move (vLLM's 'Model loading took')"
        return replace(weights, offloaded_bytes=moved_bytes, notes=(*weights.notes, note))
    stages = tuple(s - moved_bytes for s in weights.stage_bytes)
    return replace(weights, per_gpu_bytes=weights.per_gpu_bytes - moved_bytes, stage_bytes=stages,
                   offloaded_bytes=moved_bytes, notes=(*weights.notes, note))  # fmt: skip


def with_tower(
    weights: PlanWeights, *, built: bool, replicated: bool, given: bool, left_out: str = ""
) -> PlanWeights:
    """``weights`` with the vision tower as the engine builds it: not at all (``built`` False), or
    whole on every rank (``replicated``); of a model with two towers, one left out (``left_out``:
    ``companion``, the second tower, or ``vision``). ``given``: ``--weights-memory`` is the
    engine's own figure, kept."""
    if given or not weights.vision_bytes:
        return weights
    if built and left_out:
        gone = weights.companion_bytes if left_out == "companion" else (
            weights.vision_bytes - weights.companion_bytes)  # fmt: skip
        what = "audio tower" if left_out == "companion" else "vision tower"
        delta, note = -gone, f"{what} not built: its {gone:,} B per GPU are not loaded"
    elif not built:
        delta = -weights.vision_bytes
        note = f"vision tower not built: its {weights.vision_bytes:,} B per GPU are not loaded"
    elif replicated:
        delta = weights.vision_bytes_whole - weights.vision_bytes
        note = (
            f"vision tower whole on every TP rank: {weights.vision_bytes_whole:,} B per GPU "
            f"instead of {weights.vision_bytes:,}"
        )
    else:
        return weights
    stages = tuple(s + delta for s in weights.stage_bytes[:1]) + weights.stage_bytes[1:]
    return replace(weights, per_gpu_bytes=weights.per_gpu_bytes + delta if not weights.stage_bytes
                   else max(stages), stage_bytes=stages, notes=(*weights.notes, note))  # fmt: skip
