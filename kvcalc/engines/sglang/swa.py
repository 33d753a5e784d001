"""Hybrid SWA: which architectures SGLang sizes as a full pool plus a sliding-window pool.

Read from SGLang's ``model_config.py`` (``is_hybrid_swa_model``): Llama 4, gpt-oss, MiMo-V2,
Step3p5 (newest: Gemma 4). Gemma 2/3 are *not* in it, so SGLang books every Gemma-3 layer for every
token (the sglang-4826 record). The 0.4.x profiles (``"2025.03"``, ``"2025.02"``) have no hybrid SWA at all.
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.extra import extra_bool
from kvcalc.engines.sglang.defaults import LEGACY
from kvcalc.errors import InputError
from kvcalc.model.layouts import WINDOWED_KINDS
from kvcalc.model.shape import ModelShape

HYBRID_SWA_ARCHS = frozenset({
    "Llama4ForConditionalGeneration", "GptOssForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2MTP",
    "Step3p5ForCausalLM", "Step3p5MTP", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
})  # fmt: skip


def hybrid_swa(request: EngineRequest, model: ModelShape, version: str, notes: list[str]) -> bool:
    """Whether sliding/chunked layers get their own pool (``-E hybrid_swa`` overrides)."""
    windowed = any(x.kind in WINDOWED_KINDS for x in model.layers)
    default = version not in LEGACY and bool(HYBRID_SWA_ARCHS & set(model.architectures))
    hybrid = extra_bool(request.extra, "hybrid_swa", default) and windowed
    if windowed and not hybrid:
        notes.append(
            "SGLang books sliding/chunked layers for every token (not a hybrid-SWA architecture)"
        )
    return bool(hybrid)


def pool_too_small(model: ModelShape, swa_tokens: int, page: int) -> str | None:
    """``validate_swa_pool_size``: SGLang stops when the SWA pool cannot admit one request."""
    windows = [w for x in model.layers if x.kind in WINDOWED_KINDS and (w := x.window)]
    if not windows or max(windows) + page < swa_tokens:
        return None
    return (
        f"SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission "
        f"floor is sliding_window_size ({max(windows)}) + page_size ({page}). Increase "
        "--swa-full-tokens-ratio or the total KV budget."
    )


def refuse_request_cap(request: EngineRequest, hybrid: bool) -> None:
    """``SWARequestCapPoolConfigurator``: with the radix cache off and ``--max-running-requests``
    given, SGLang sizes the SWA pool from the request cap instead of ``swa_full_tokens_ratio``."""
    if hybrid and request.max_num_seqs is not None:
        if extra_bool(request.extra, "disable_radix_cache", False):
            raise InputError(
                "sglang: with the radix cache off and --max-running-requests given, SGLang sizes "
                "the sliding-window pool from the request cap (SWARequestCapPoolConfigurator), "
                "which kvcalc does not model",
                hint="drop -E disable_radix_cache=true or --max-num-seqs",
                code="unsupported-model",
            )
