"""SGLang 0.5.23's DP attention and speculative decoding as they reach the pool: the checks, the
attention TP, the request cap.

DP attention (``--enable-dp-attention --dp N``; ``arg_groups/parallel_hook.py``
``handle_deprecated_dp_attention`` makes it ``attn_dp_size = N``, ``dp_size = 1``): the N attention
ranks live inside the TP group (``tp_size % attn_dp_size == 0``), each with its own requests and
its own pool; attention TP = TP / N, so an MHA layer keeps KV heads / (TP / N) per GPU (MLA's
latent is TP-independent). ``resolve_max_num_reqs``: a given ``--max-running-requests`` (or
speculation's 48) is per DP rank, ``max(1, n // N)``; the default estimate is not divided.
``handle_data_parallelism``: ``chunked_prefill_size // N``, after the memory fraction was resolved
(``memory_hook.py`` ``reserve_for_graph_mb`` adds ``max_bs × N × 3`` MB, ``× 1.5`` more when
``max_bs > 300``: :func:`~kvcalc.engines.sglang.defaults.memory_defaults`).
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.speculative import SpecMethod
from kvcalc.errors import InputError
from kvcalc.model.layouts import LayerKind

#: ``_handle_eagle_family`` / ``_handle_ngram``: ``max_running_requests`` unless given
SPEC_MAX_RUNNING_REQUESTS = 48


def attention_tp(request: EngineRequest) -> int:
    """The attention TP size one DP-attention rank splits KV heads over."""
    return request.tensor_parallel_size // request.attention_data_parallel_size


def check(request: EngineRequest, profile: str, notes: list[str]) -> int:
    """Refuse what SGLang refuses or kvcalc does not model; the draft layers the pool prices."""
    from kvcalc.engines.sglang import mamba

    dp, tp = request.attention_data_parallel_size, request.tensor_parallel_size
    draft = request.speculative
    if profile != "latest" and dp > 1:
        raise InputError(f"SGLang {profile}: DP attention is modelled for SGLang 0.5.23 only",
                         hint="plan it with --engine-version latest",
                         code="unsupported-parallelism")  # fmt: skip
    if profile != "latest" and draft is not None:
        raise InputError(f"SGLang {profile}: speculative decoding is modelled for SGLang 0.5.23 "
                         "only", hint="plan it with --engine-version latest",
                         code="speculative-not-modelled")  # fmt: skip
    if dp > 1:
        if tp % dp:
            raise InputError(f"SGLang refuses it: tp_size {tp} must be divisible by attn_dp_size "
                             f"{dp} (--enable-dp-attention --dp {dp})",
                             hint="a --dp that divides --tp", code="invalid-parallelism")  # fmt: skip
        if mamba.is_hybrid(request.model) or any(
            x.kind is LayerKind.SLIDING for x in request.model.layers
        ):
            raise InputError("SGLang DP attention on a hybrid (Mamba or sliding-window) model is not "
                             "modelled (its state and SWA pools per DP rank are not recorded)",
                             hint="plan it without --enable-dp-attention",
                             code="unsupported-parallelism")  # fmt: skip
        if draft is not None and draft.method in (SpecMethod.NGRAM, SpecMethod.DRAFT_MODEL):
            what = "ngram" if draft.method is SpecMethod.NGRAM else "standalone"
            raise InputError(f"SGLang refuses it: Currently {what} speculative decoding does not "
                             "support dp attention.", hint="drop --enable-dp-attention",
                             code="invalid-parallelism")  # fmt: skip
        notes.append(f"DP attention: {dp} attention ranks inside TP {tp}, each with its own "
                     f"requests and pool; attention TP {tp // dp}; chunked_prefill_size divided by "
                     f"{dp}; the graph reserve grows by max_bs × {dp} × 3 MB")  # fmt: skip
    if draft is None:
        return 0
    notes.append(f"speculative decoding: {draft.source}")
    priced = draft.num_layers if draft.pool_layers is None else draft.pool_layers
    if not priced:
        return 0
    notes.append(f"{priced} draft layer(s) priced at the target's per-layer bytes "
                 "(cell × (1 + draft layers / layers), pool_configurator.py); SGLang frees a "
                 "request's unaccepted draft slots after each verify step, so no lookahead is "
                 "counted; the draft's weights are kvcalc's estimate of its modules, loaded "
                 "before the pool is sized (from source, unconfirmed against SGLang)")  # fmt: skip
    return priced


def asked_running_requests(request: EngineRequest, notes: list[str]) -> int | None:
    """``max_running_requests`` as the resolved arguments hold it before ``resolve_max_num_reqs``:
    ``--max-running-requests``, else 48 under speculative decoding, else None (the estimate)."""
    if request.max_num_seqs is not None:
        return request.max_num_seqs
    if request.speculative is None:
        return None
    dp = request.attention_data_parallel_size
    per_rank = f" // {dp} DP ranks = {max(1, SPEC_MAX_RUNNING_REQUESTS // dp)}" if dp > 1 else ""
    notes.append(f"max_running_requests = {SPEC_MAX_RUNNING_REQUESTS}{per_rank}: SGLang's default "
                 "under speculative decoding (--max-running-requests raises it), at most half the "
                 "tokens")  # fmt: skip
    return SPEC_MAX_RUNNING_REQUESTS
