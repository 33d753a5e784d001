"""The deployment terms the engine adds to a plan beyond the model: LoRA slots and offloaded
weights in the weights term, the multimodal settings' tower and encoder allowance, the host tiers
and the recurrent-state dtypes (each engine's own rules, asked through
:mod:`kvcalc.planning.engine_asks`). Pure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvcalc.engines.base import Engine, EngineRequest
from kvcalc.estimate.overhead import Overhead, without_vision_band
from kvcalc.planning.engine_asks import lora_slots, mm_terms, weight_offload
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.plan_weights import PlanWeights, with_lora, with_offload, with_tower


def weights_with_terms(
    engine: Engine, request: EngineRequest, inputs: PlanInputs, weights: PlanWeights
) -> tuple[PlanWeights, Any]:
    """``weights`` with the LoRA slots, the weights moved to host memory and the vision tower as
    the engine builds it; and the multimodal terms (None where the engine has none)."""
    given = inputs.weights_memory_bytes is not None
    if inputs.lora is not None:
        _check_lora_experts(request, inputs)
    slots = lora_slots(engine, request)
    if slots is not None:
        # vLLM's "Model loading took" includes its slots; SGLang's "Load weight end ... mem
        # usage" is printed before its LoRA pool is built, so a given figure has it added
        measured = given and slots.measured_with_weights
        notes = slots.notes
        if given and not measured:
            notes = (*notes, f"LoRA pool ({slots.bytes_per_gpu:,} B) added to --weights-memory "
                     "(SGLang prints 'Load weight end' before it builds the pool)")  # fmt: skip
        weights = with_lora(weights, slots.bytes_per_gpu, notes, given=measured)
    moved = weight_offload(engine, request, weights.layer_bytes)
    if moved is not None:
        weights = with_offload(weights, moved[0], moved[1], given=given)
    terms = mm_terms(engine, request)
    if terms is not None:
        weights = with_tower(weights, built=not terms.vision_off,
                             replicated=terms.tower_replicated, given=given,
                             left_out=terms.tower_left_out)  # fmt: skip
    return weights, terms


def _check_lora_experts(request: EngineRequest, inputs: PlanInputs) -> None:
    """LoRA slots of routed experts are sized for experts split over TP alone (each rank holds
    every expert's slot, its intermediate width divided by TP): under expert parallelism, or with
    the experts split over TP × DP × PCP, vLLM's ``FusedMoEWithLoRA`` holds the slots of its local
    experts only — a layout kvcalc has not read, so it is refused rather than sized."""
    from kvcalc.errors import InputError
    from kvcalc.planning.parallel import has_routed_experts, moe_split

    if not has_routed_experts(request.model):
        return
    ranks, whole = moe_split(inputs)
    if ranks > inputs.tensor_parallel_size or inputs.enable_expert_parallel:
        raise InputError(
            f"LoRA slots of {request.model.name}'s routed experts under expert parallelism or "
            f"data/context parallelism (experts over {ranks} ranks) are not modelled",
            hint="plan LoRA on a MoE model with tensor parallelism alone (no -dp, -pcp or -ep)",
            code="lora-not-modelled",
        )


def overhead_with_terms(overhead: Overhead, terms: Any) -> Overhead:
    """The overhead estimate without the vision allowance when no tower is built, with the
    multimodal notes."""
    if terms is None:
        return overhead
    if terms.vision_off:
        overhead = without_vision_band(overhead, "the vision tower is not built")
    overhead = with_encoder_outputs(overhead, terms.held_bytes)
    return replace(overhead, notes=(*overhead.notes, *terms.notes))


def with_encoder_outputs(overhead: Overhead, held_bytes: int) -> Overhead:
    """``overhead`` with the encoder outputs vLLM's profile run holds through the text dummy run
    (``profile_run``: the encoder cache's ``tmp_i`` entries, cleared after it) on the first
    pipeline stage, the one that runs the tower."""
    if not held_bytes:
        return overhead
    stages = overhead.per_stage()
    first = replace(stages[0], activation_bytes=stages[0].activation_bytes + held_bytes)
    stages = (first, *stages[1:])
    return replace(
        overhead,
        stages=stages if overhead.stages else (),
        activation_bytes=stages[-1].activation_bytes,
    )


def with_host_tier(
    result: Any, host: Any, offloaded_bytes: int, state_notes: tuple[str, ...]
) -> Any:
    """The plan with its host tiers (``host_kv_tokens``, ``host_memory_bytes``,
    ``weights_offloaded_bytes``) and the recurrent-state dtypes' note."""
    if state_notes:
        result = replace(result, notes=(*state_notes, *result.notes))
    if host is None:
        return result
    return replace(result, host_kv_tokens=host.kv_tokens, host_memory_bytes=host.host_bytes,
                   weights_offloaded_bytes=offloaded_bytes,
                   notes=tuple(dict.fromkeys((*result.notes, *host.notes))))  # fmt: skip


def with_mm_budget(result: Any, terms: Any) -> Any:
    """The plan with the engine's multimodal encoder budget (``mm_*`` keys), where it has one."""
    budget = getattr(terms, "budget", None)
    if budget is None:
        return result
    return replace(result, mm_max_tokens_per_item=dict(budget.max_tokens_per_item),
                   mm_encoder_budget_tokens=budget.compute_budget_tokens,
                   mm_encoder_cache_tokens=budget.cache_size_tokens,
                   mm_items_per_batch=dict(budget.items_per_batch),
                   mm_profiled_modality=budget.profiled,
                   mm_encoder_outputs_bytes=budget.held_bytes)  # fmt: skip
