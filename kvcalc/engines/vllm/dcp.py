"""vLLM 0.33 decode context parallelism (``--decode-context-parallel-size``/``-dcp``), and what the
model decides for prefill context parallelism and for the releases these settings are read in.

DCP reuses the TP ranks (``tp % dcp == 0``, checked with the other parallel sizes) and shards each
request's tokens over the DCP group: token ``i`` lives on rank ``(i // interleave) % dcp``. Read in
the vLLM 0.33.0 wheel:

- ``v1/kv_cache_interface.py`` ``AttentionSpec.max_num_blocks_per_req``: a spec with
  ``dcp_sharded`` (every ``AttentionSpec``: full attention and MLA) holds
  ``cdiv(max_len, block_size × dcp)`` blocks per request, and
  ``FullAttentionSpec.max_memory_usage_bytes`` the same with ``cdiv(max_model_len, dcp)``;
  ``SlidingWindowSpec.max_memory_usage_bytes`` asserts "DCP not support sliding window.";
- ``v1/core/kv_cache_utils.py`` ``get_kv_cache_capacity``: tokens = ``int(concurrency ×
  max_model_len)`` with that concurrency (no separate × dcp);
- ``v1/core/kv_cache_planning.py`` ``_layer_tp_replicas``: a DCP-sharded MLA latent is no longer
  a replica of the other TP ranks' (each rank holds a different 1/dcp of the tokens);
- ``config/vllm.py`` ``validate_block_size``: the block must be ≥ and divisible by
  ``cp_kv_cache_interleave_size`` (an assertion, so vLLM stops at start-up);
- the attention backend must support DCP (``supports_dcp``: FLASH_ATTN, FlashInfer and the CUDA
  MLA backends FLASH_ATTN_MLA, FlashMLA, CUTLASS_MLA, FlashInfer-MLA, Triton-MLA).

DeepSeek-V3 TP 8 + DCP 8 at 42.91 GiB per GPU: 40,978 blocks (as without DCP), 250 blocks per
request of 32,000 tokens, 163.91× and 5,245,184 tokens (recorded with vLLM 0.33.0's own code).
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.vllm.defaults import VllmProfile
from kvcalc.errors import InputError
from kvcalc.model.layouts import FullAttention, LayerKind, MLALatent, NoCache
from kvcalc.model.shape import ModelShape

CODE = "invalid-parallelism"


def check_dcp(
    request: EngineRequest,
    profile: VllmProfile,
    model: ModelShape,
    block_size: int,
    notes: list[str],
) -> int:
    """The DCP size vLLM runs (1: off), after its refusals; a note says what it does."""
    dcp = request.decode_context_parallel_size
    interleave = request.cp_kv_cache_interleave_size
    if dcp == 1:
        return 1
    from kvcalc.model.attention_layouts import SparseMLA  # only for a DCP plan (start-up)

    if not profile.in_flight_batches:  # the 0.33 profile
        raise InputError(
            f"--decode-context-parallel-size {dcp}: modelled for vLLM 0.33 only",
            hint="plan it with --engine-version 0.33",
            code="unsupported-parallelism",
        )
    for layer in model.layers:
        if layer.kind in (LayerKind.SLIDING, LayerKind.CHUNKED):
            # v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes: an assertion
            raise InputError(
                f"vLLM refuses -dcp {dcp} for this model: DCP not support sliding window.",
                hint="plan it without --decode-context-parallel-size",
                code=CODE,
            )
        plain = type(layer) in (FullAttention, MLALatent) or isinstance(layer, NoCache)
        if not plain or isinstance(layer, SparseMLA):
            raise InputError(
                f"--decode-context-parallel-size with {layer.kind.value} layers "
                f"({type(layer).__name__}) is not modelled: kvcalc models DCP for full "
                "attention and MLA",
                hint="plan it without --decode-context-parallel-size",
                code="unsupported-parallelism",
            )
    if model.mm_prefix_attention:
        raise InputError(
            "--decode-context-parallel-size on an image-prefix model (composite Triton backend): "
            "whether that backend supports DCP is not confirmed",
            hint="plan it without --decode-context-parallel-size",
            code="unsupported-parallelism",
        )
    if not model.is_mla:
        _check_gqa(request, dcp)
    if interleave > block_size or block_size % interleave:
        raise InputError(
            f"vLLM refuses these settings: Block_size({block_size}) should be greater than or "
            f"equal to and divisible by cp_kv_cache_interleave_size ({interleave}).",
            hint=f"give --cp-kv-cache-interleave-size a divisor of {block_size}",
            code=CODE,
        )
    mla = " (the MLA latent is no longer replicated over those ranks)" if model.is_mla else ""
    notes.append(
        f"decode context parallel {dcp}: each request's tokens are sharded over {dcp} of the TP "
        f"ranks{mla}, so a request of L tokens holds cdiv(cdiv(L, {dcp}), block) blocks per GPU"
    )
    return dcp


def _check_gqa(request: EngineRequest, dcp: int) -> None:
    """``ModelConfig.verify_with_parallel_config`` (vLLM 0.33.0 ``config/model.py``): DCP on
    GQA/MQA shards the tokens over the TP ranks that replicate one KV head."""
    tp = request.tensor_parallel_size
    heads = [x for x in request.model.layers if isinstance(x, FullAttention)]
    if not heads:
        return
    kv = max(x.num_kv_heads for x in heads)
    q = request.model.num_attention_heads or 0
    reason = None
    if tp <= kv:
        reason = (
            "Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` "
            f"({tp}) to be greater than the model's total number of KV heads ({kv}). Increase "
            "`--tensor-parallel-size` or set `--decode-context-parallel-size 1`."
        )
    elif dcp > tp // kv:
        reason = (
            f"`--decode-context-parallel-size` ({dcp}) exceeds the maximum supported value "
            f"({tp // kv}) for `--tensor-parallel-size` ({tp}) and {kv} model KV heads."
        )
    elif q and (q // kv) % dcp:
        reason = (
            f"The model's number of query heads per KV head ({q // kv}) must be divisible by "
            f"`--decode-context-parallel-size` ({dcp}) for GQA/MQA."
        )
    if reason:
        raise InputError(f"vLLM refuses these settings: {reason}",
                         hint="change the parallel sizes as vLLM asks", code=CODE)  # fmt: skip


def check_parallel_release(version: str | None, given: list[str]) -> None:
    """Data, expert and context parallelism are read in vLLM 0.33 only: older releases refuse."""
    from kvcalc.engines.vllm.defaults import resolve_profile

    profile = resolve_profile(version)[0]
    if given and not profile.in_flight_batches:  # the 0.33 profile
        raise InputError(
            f"{', '.join(given)}: modelled for vLLM 0.33 only (read in its code), not {profile.name}",
            hint="plan it with --engine-version 0.33",
            code="unsupported-parallelism",
        )


def check_pcp(model: ModelShape, pcp: int) -> None:
    """Only MLA attention supports prefill context parallelism in vLLM 0.33.0
    (``MLAAttentionImpl.supports_pcp``; every other backend's ``supports_pcp`` is false), so the
    attention selector finds no backend for other layers (recorded: Llama-3.1-8B TP 2 × PCP 2)."""
    if pcp == 1:
        return
    others = sorted(
        {x.kind.value for x in model.layers if x.kind not in (LayerKind.MLA, LayerKind.NONE)}
    )
    if others:
        raise InputError(
            f"vLLM refuses -pcp {pcp} for this model: no valid attention backend for its "
            f"{', '.join(others)} attention layers (FLASH_ATTN, FLASHINFER, TRITON_ATTN, "
            "FLEX_ATTENTION: PCP not supported); only MLA attention supports prefill context "
            "parallelism",
            hint="drop --prefill-context-parallel-size, or use -dcp / -tp",
            code=CODE,
        )
