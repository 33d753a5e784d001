"""Speculative decoding in a plan: the draft's weights in the weights term, and the plan's
``speculative`` block. Pure; the draft itself is the engine's
(:func:`kvcalc.planning.engine_asks.speculative_draft`)."""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.base import KvCachePlan
from kvcalc.engines.speculative import SpecMethod, SpeculativeDraft
from kvcalc.errors import KvcalcError
from kvcalc.model.shape import ModelShape
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.plan_weights import PlanWeights
from kvcalc.planning.result import SpeculativeSummary


def draft_weights_bytes(model: ModelShape, inputs: PlanInputs, draft: SpeculativeDraft) -> int:
    """Bytes one GPU holds for the draft's weights (0 for n-gram and suffix decoding)."""
    if draft.method is SpecMethod.MTP:
        from kvcalc.estimate.draft_weights import mtp_weight_bytes

        return mtp_weight_bytes(model, tensor_parallel_size=draft.tensor_parallel_size,
                                dtype=inputs.dtype, quantization=inputs.quantization)  # fmt: skip
    return 0


def with_draft_weights(
    weights: PlanWeights, model: ModelShape, inputs: PlanInputs, draft: SpeculativeDraft | None
) -> tuple[PlanWeights, int]:
    """``weights`` with the draft's bytes added (not to ``--weights-memory``, which is vLLM's
    "Model loading took" figure and holds the draft already), and the draft's bytes."""
    if draft is None or not draft.method.uses_draft_kv:
        return weights, 0
    try:
        extra = draft_weights_bytes(model, inputs, draft)
    except KvcalcError as exc:
        if inputs.weights_memory_bytes is None and inputs.kv_cache_memory_bytes is None:
            raise
        note = f"draft weights not estimated: {exc.message}"
        return replace(weights, notes=(*weights.notes, note)), 0
    if inputs.weights_memory_bytes is not None:
        note = (f"draft weights ({extra:,} B per GPU) are part of the --weights-memory given "
                "(vLLM loads the drafter inside the same memory profile)")  # fmt: skip
        return replace(weights, notes=(*weights.notes, note)), extra
    kept = weights.notes
    if draft.method is SpecMethod.MTP:  # the target's note that its MTP layers are not loaded
        kept = tuple(n for n in kept if "MTP layer(s) in the checkpoint are not counted" not in n)
    weights = replace(weights, notes=kept)
    note = (f"draft weights: {extra:,} B per GPU ({draft.method} draft; the target's embedding and "
            "head are shared, not counted twice), loaded before the KV budget")  # fmt: skip
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
