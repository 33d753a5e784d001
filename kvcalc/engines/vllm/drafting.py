"""The draft's layers in vLLM 0.33's KV cache (speculative decoding).

``v1/worker/gpu/attn_utils.py`` ``get_kv_cache_spec`` collects every attention layer, the draft's
with ``is_draft=True`` — a field left out of the spec's equality (``kv_cache_interface.py``), so a
draft layer shaped like the target's joins the target's group, and the grouping of
``v1/core/kv_cache_planning.py`` runs unchanged on target and draft layers together: the group
size, page unification, ``UniformTypeKVCacheSpecs`` and the ``max < 1.5·min`` padding rule all see
the extra layers. The block size and the hybrid alignment are resolved on the target before the
draft is built (``Platform.check_and_update_config``). Each draft layer is stored in the target's
resolved cache dtype unless ``speculative_config.kv_cache_dtype`` is set
(``_DRAFT_VLLM_CONFIG_OVERRIDES``), split over the draft's own tensor-parallel size.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.vllm import defaults as D
from kvcalc.engines.vllm.setup import VllmSetup, check_tp
from kvcalc.errors import InputError
from kvcalc.model.layouts import Layout

if TYPE_CHECKING:  # a draft's types: its module loads only when a deployment speculates
    from kvcalc.engines.speculative import SpeculativeDraft


def draft_layers(
    request: EngineRequest, setup: VllmSetup, draft: SpeculativeDraft
) -> tuple[Layout, ...]:
    """One draft rank's cache layers, in the dtype vLLM stores them in."""
    if draft.model is None:
        return ()
    dtype = setup.model.kv_cache_dtype
    if draft.kv_cache_dtype is not None:
        asked = replace(request, kv_cache_dtype=draft.kv_cache_dtype, model=draft.model)
        dtype = D.resolve_cache_dtype(asked, setup.profile)[0]
    check_tp(draft.model, draft.tensor_parallel_size, [])
    return draft.model.with_cache_dtype(dtype).per_rank(draft.tensor_parallel_size).layers


def with_draft(request: EngineRequest, setup: VllmSetup) -> VllmSetup:
    """``setup`` with the draft's layers after the target's (their index is the layer's position:
    DeepSeek-V3's MTP layer is ``model.layers.61``), and the draft's notes."""
    draft = request.speculative
    if draft is None:
        return setup
    _check_draft_length(request, setup, draft)
    notes = list(setup.notes)
    notes.append(f"speculative decoding: {draft.source}, {draft.num_speculative_tokens} token(s) "
                 "per step")  # fmt: skip
    layers = draft_layers(request, setup, draft)
    if layers:
        notes.append(
            f"{len(layers)} draft layer(s) join the KV cache, grouped with the target's by vLLM's "
            f"rules; a running request holds {draft.lookahead_tokens} lookahead slot(s) past its "
            "tokens (the max-concurrency line at max_model_len has no lookahead term)"
        )
    model = replace(setup.model, layers=setup.model.layers + layers)
    return replace(setup, model=model, notes=tuple(notes))


def _check_draft_length(request: EngineRequest, setup: VllmSetup, draft: SpeculativeDraft) -> None:
    """A draft model shorter than ``max_model_len``: vLLM 0.33 serves the draft's length instead
    (``vllm/config/vllm.py`` ``VllmConfig._limit_max_model_len_to_draft``: model runner V2, the
    default, "can't skip speculation for longer sequences; reducing max_model_len"; the draft's
    length is its own derived one, ``SpeculativeConfig._maybe_override_draft_max_model_len``).
    kvcalc does not re-plan at that length: refused, naming it. (EAGLE heads and MTP layers share
    the target's positions, ``draft_shares_target_positions``, and do not lower it.)"""
    from kvcalc.engines.speculative import SpecMethod

    if draft.method is not SpecMethod.DRAFT_MODEL or draft.model is None or setup.refusal:
        return
    length = draft.model.max_model_len
    if length < request.max_model_len:
        raise InputError(
            f"the draft model {draft.reference or draft.model.name} is shorter "
            f"({length:,} tokens) than max_model_len {request.max_model_len:,}: vLLM 0.33 reduces "
            f"max_model_len to {length:,}, which kvcalc does not re-plan",
            hint=f"plan with --max-model-len {length}, or a draft model as long as the target",
            code="speculative-not-modelled",
        )
