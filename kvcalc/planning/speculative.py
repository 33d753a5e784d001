"""Speculative decoding in a plan: the draft's weights in the weights term, and the plan's
``speculative`` block. Pure; the draft itself is the engine's
(:func:`kvcalc.planning.engine_asks.speculative_draft`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kvcalc.engines.base import KvCachePlan
from kvcalc.errors import KvcalcError
from kvcalc.model.shape import ModelShape
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.plan_weights import PlanWeights
from kvcalc.planning.result import SpeculativeSummary

if TYPE_CHECKING:  # a draft's types: its module loads only when a deployment speculates
    from kvcalc.engines.speculative import SpeculativeDraft


def draft_weights_bytes(model: ModelShape, inputs: PlanInputs, draft: SpeculativeDraft) -> int:
    """Bytes one GPU holds for the draft's weights (0 for n-gram and suffix decoding)."""
    from kvcalc.engines.speculative import SpecMethod

    if draft.method is SpecMethod.MTP:
        from kvcalc.estimate.draft_weights import mtp_weight_bytes
        from kvcalc.planning.parallel import moe_split, shared_experts_whole

        ranks, whole = moe_split(inputs)  # the target's VllmConfig: its MoE group and EP
        shared_whole = shared_experts_whole(model, inputs)
        if draft.tensor_parallel_size != inputs.tensor_parallel_size:
            ranks, whole, shared_whole = draft.tensor_parallel_size, False, False
        return mtp_weight_bytes(model, tensor_parallel_size=draft.tensor_parallel_size,
                                dtype=inputs.dtype, quantization=inputs.quantization,
                                moe_ranks=ranks, expert_parallel=whole,
                                shared_experts_whole=shared_whole,
                                redundant_experts=inputs.num_redundant_experts if whole else 0)  # fmt: skip
    head = draft.model
    if head is None:
        return 0
    # the draft's ModelConfig takes the target's dtype
    dtype = inputs.dtype or model.dtype.name
    if draft.method is SpecMethod.EAGLE3:
        from kvcalc.estimate.draft_weights import eagle3_weight_bytes

        return eagle3_weight_bytes(head, model, tensor_parallel_size=draft.tensor_parallel_size,
                                   target_max_model_len=inputs.max_model_len or model.max_model_len,
                                   dtype=dtype)  # fmt: skip
    from kvcalc.estimate.draft_weights import draft_model_weight_bytes

    quantization = inputs.speculative_config.quantization if inputs.speculative_config else None
    return draft_model_weight_bytes(head, tensor_parallel_size=draft.tensor_parallel_size,
                                    dtype=dtype, quantization=quantization)  # fmt: skip


def with_draft_weights(
    weights: PlanWeights, model: ModelShape, inputs: PlanInputs, draft: SpeculativeDraft | None
) -> tuple[PlanWeights, int]:
    """``weights`` with the draft's bytes added (not to ``--weights-memory``, which is vLLM's
    "Model loading took" figure and holds the draft already), and the draft's bytes."""
    if draft is None or not draft.method.uses_draft_kv:
        return weights, 0
    from kvcalc.engines.speculative import SpecMethod

    try:
        extra = draft_weights_bytes(model, inputs, draft)
    except KvcalcError as exc:
        if inputs.weights_memory_bytes is None and inputs.kv_cache_memory_bytes is None:
            raise
        note = f"draft weights not estimated: {exc.message}"
        return replace(weights, notes=(*weights.notes, note)), 0
    if inputs.weights_memory_bytes is not None:
        note = (f"draft weights ({extra:,} B per GPU) are taken as part of the --weights-memory "
                "given (vLLM loads the drafter inside the same memory profile; SGLang loads it "
                "before sizing its pool)")  # fmt: skip
        return replace(weights, notes=(*weights.notes, note)), extra
    kept = weights.notes
    if draft.method is SpecMethod.MTP:  # the target's note that its MTP layers are not loaded
        kept = tuple(n for n in kept if "MTP layer(s) in the checkpoint are not counted" not in n)
    weights = replace(weights, notes=kept)
    shared = {SpecMethod.MTP: "the target's embedding and head shared, not counted twice",
              SpecMethod.EAGLE3: "its own head and rotary cache, the target's embedding shared",
              SpecMethod.DRAFT_MODEL: "all of it, at the draft's tensor-parallel size"}  # fmt: skip
    note = (f"draft weights: {extra:,} B per GPU ({draft.method} draft: "
            f"{shared.get(draft.method, '')}), loaded before the KV budget")  # fmt: skip
    stages = tuple(s + extra for s in weights.stage_bytes)
    return replace(weights, per_gpu_bytes=weights.per_gpu_bytes + extra, stage_bytes=stages,
                   notes=(*weights.notes, note)), extra  # fmt: skip


def speculative_summary(
    draft: SpeculativeDraft | None, kv: KvCachePlan, weights_bytes: int
) -> SpeculativeSummary | None:
    if draft is None:
        return None
    return SpeculativeSummary(
        method=draft.method.value, num_speculative_tokens=draft.num_speculative_tokens,
        draft_layers=draft.num_layers, draft_kv_bytes_per_token=kv.draft_kv_bytes_per_token,
        draft_weights_bytes=weights_bytes, lookahead_tokens=draft.lookahead_tokens,
        draft=draft.source,
    )  # fmt: skip
