"""vLLM's scheduler budgets before sizing: ``max_num_batched_tokens`` and ``max_num_seqs``.

The usage context decides the defaults (``EngineArgs.get_batch_defaults`` for the API server and
the ``LLM`` class, ``SchedulerConfig``'s for ``LLMEngine``/``AsyncLLMEngine``), the GPU and the
release the tier; from 0.12 on a defaulted budget is capped by the other. Read from the wheels
named in each function.
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.extra import extra_choice, version_tuple
from kvcalc.engines.vllm.defaults import VllmProfile
from kvcalc.errors import InputError
from kvcalc.model.layouts import LayerKind
from kvcalc.units import GIB

#: the ``usage_context`` engine option: the API server (``vllm serve``), the ``LLM`` class, or
#: ``LLMEngine``/``AsyncLLMEngine.from_engine_args``
USAGE_CONTEXTS = ("api_server", "llm", "engine")


def scheduler_batch(request: EngineRequest, profile: VllmProfile) -> tuple[int, int, str]:
    """The (max_num_batched_tokens, max_num_seqs) this request runs with and a note on the
    defaults, its ``usage_context`` engine option read."""
    usage = extra_choice(request.extra, "usage_context", "api_server", USAGE_CONTEXTS)
    return resolved_batch(request, profile, usage)


#: vLLM V0's ``_DEFAULT_MAX_NUM_BATCHED_TOKENS`` (the chunked-prefill budget)
V0_CHUNKED_TOKENS = 2048
#: V0's ``_MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS`` (``vllm/config.py``, 0.8.3)
V0_MULTIMODAL_TOKENS = 5120


def batch_defaults(
    request: EngineRequest, profile: VllmProfile, usage: str
) -> tuple[int, int, str]:
    """vLLM's default (max_num_batched_tokens, max_num_seqs) for this GPU and release, and a note.

    The rule per release (``EngineArgs._set_default_args_v1`` / ``get_batch_defaults``, read from the
    wheels): 0.8.0-0.8.4 the larger defaults on a device named H100 or H200; 0.8.5 on any GPU of
    at least 70 GiB; 0.9 on (0.9.2 read) not on an A100; 0.28 on (0.27.0 without, 0.28.0-0.32.0
    with) the >= 160 GiB tier for both contexts; 0.33 leaves GB10 (SM 12.1) out (0.32.0 does not).
    V0: no usage-context defaults (:func:`_v0_batch_defaults`).
    """
    if not profile.v1:
        return _v0_batch_defaults(request)
    if usage == "engine":
        return _engine_context_defaults(request, profile)
    memory = request.gpu_memory_bytes or 0
    name = (request.gpu_name or "").lower()
    llm = usage == "llm"
    version = version_tuple(request.engine_version or "") or profile.since
    if profile.big_gpu_tier and memory >= 160 * GIB:
        large, tier = True, ">= 160 GiB"
    elif version[:3] < (0, 8, 5):
        large, tier = ("h100" in name or "h200" in name), "H100/H200 by name (0.8.0-0.8.4)"
    elif version[:2] < (0, 9):
        large, tier = memory >= 70 * GIB, ">= 70 GiB (0.8.5)"
    else:
        gb10 = profile.gb10_small_tier and request.gpu_compute_capability == (12, 1)
        large, tier = memory >= 70 * GIB and "a100" not in name and not gb10, ">= 70 GiB, not A100"
    if profile.big_gpu_tier and memory >= 160 * GIB:
        tokens, seqs = 16384, 1024
    elif large:
        tokens, seqs = (16384 if llm else 8192), 1024
    else:
        tokens, seqs, tier = (8192 if llm else 2048), 256, "small-GPU"
    where = "the LLM class" if llm else "the API server"
    note = f"max_num_batched_tokens {tokens:,} and max_num_seqs {seqs:,}: vLLM's {tier} default for {where}"
    if not request.gpu_memory_bytes:
        note += " (no GPU memory given, so vLLM's fallback tier)"
    return tokens, seqs, note


#: ``SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS`` / ``DEFAULT_MAX_NUM_SEQS`` (0.12.0-0.33.0 wheels)
ENGINE_CONTEXT_DEFAULTS = (2048, 128)


def _engine_context_defaults(request: EngineRequest, profile: VllmProfile) -> tuple[int, int, str]:
    """``LLMEngine``/``AsyncLLMEngine.from_engine_args`` (usage context ``ENGINE_CONTEXT``):
    ``get_batch_defaults`` has no entry for it, so ``SchedulerConfig``'s class defaults apply, on
    any GPU (read in the 0.12.0, 0.19.0, 0.21.0, 0.28.0 and 0.33.0 wheels; earlier not read)."""
    version = version_tuple(request.engine_version or "") or profile.since
    if version[:2] < (0, 12):
        raise InputError(
            f"usage_context=engine is read for vLLM 0.12 on, not {request.engine_version}",
            hint="give max_num_batched_tokens and max_num_seqs, or usage_context api_server/llm",
            code="invalid-input",
        )
    tokens, seqs = ENGINE_CONTEXT_DEFAULTS
    note = (f"max_num_batched_tokens {tokens:,} and max_num_seqs {seqs}: vLLM's SchedulerConfig "
            "defaults (usage context ENGINE_CONTEXT: LLMEngine/AsyncLLMEngine.from_engine_args)")  # fmt: skip
    return tokens, seqs, note


def resolved_batch(
    request: EngineRequest, profile: VllmProfile, usage: str
) -> tuple[int, int, str]:
    """The (max_num_batched_tokens, max_num_seqs) the engine runs with: the request's, else
    :func:`batch_defaults`, then (V1, 0.12 on: ``_set_default_max_num_seqs_and_batched_tokens_args``,
    read in the 0.12.0, 0.16.0, 0.19.0, 0.21.0, 0.28.0 and 0.33.0 wheels; not in 0.11.0) a defaulted
    token budget capped at ``max_num_seqs · max_model_len`` and a defaulted ``max_num_seqs`` at
    the token budget."""
    tokens, seqs, note = batch_defaults(request, profile, usage)
    tokens = request.max_num_batched_tokens or tokens
    seqs = request.max_num_seqs or seqs
    version = version_tuple(request.engine_version or "") or profile.since
    if not profile.v1 or version[:2] < (0, 12):
        return tokens, seqs, note
    if request.max_num_batched_tokens is None and seqs * request.max_model_len < tokens:
        tokens = seqs * request.max_model_len
        note += f"; capped at max_num_seqs × max_model_len = {tokens:,}"
    if request.max_num_seqs is None and tokens < seqs:
        seqs = tokens
        note += f"; max_num_seqs capped at max_num_batched_tokens = {seqs:,}"
    return tokens, seqs, note


def _v0_batch_defaults(request: EngineRequest) -> tuple[int, int, str]:
    """V0 (``_set_default_args_v0`` and ``SchedulerConfig``, read in 0.8.3 and 0.8.4): chunked
    prefill only for a max_model_len above 32,768 (not for multimodal, MLA or sliding-window
    models), with 2,048 tokens; otherwise one whole max_model_len prompt, at least 2,048 tokens; a
    multimodal model at least ``_MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS`` (5,120). 256 sequences."""
    model = request.model
    sliding = any(layer.kind is LayerKind.SLIDING for layer in model.layers)
    vision = getattr(model.weights, "vision_encoder", False)
    chunked = request.max_model_len > 32768 and not (model.is_mla or sliding or vision)
    tokens = V0_CHUNKED_TOKENS if chunked else max(request.max_model_len, V0_CHUNKED_TOKENS)
    how = "chunked prefill (max_model_len > 32,768)" if chunked else "one max_model_len prompt"
    if vision and tokens < V0_MULTIMODAL_TOKENS:
        tokens, how = V0_MULTIMODAL_TOKENS, "a multimodal model: at least 5,120"
    note = f"max_num_batched_tokens {tokens:,} and max_num_seqs 256: vLLM V0's default ({how})"
    return tokens, 256, note
