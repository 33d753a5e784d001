"""Models vLLM 0.33 itself refuses to build, with the reason it gives (checked with its own code).

``EngineArgs.create_engine_config`` validates the architecture against vLLM's model registry; an
architecture it does not register is refused before anything is sized:
``Model architectures ['Step3p7FlashForCausalLM'] are not supported for now.`` (vLLM 0.33.0 registers
``Step3p7ForConditionalGeneration`` only). The ``minimax_m3`` model type has no text-only model class
in 0.33 either.
"""

from __future__ import annotations

from kvcalc.engines.vllm.modelopt import unknown_algo
from kvcalc.errors import InputError
from kvcalc.model.layouts import FullAttention, MLALatent, SlidingWindow
from kvcalc.model.shape import ModelShape

#: architecture → vLLM 0.33's refusal
REFUSED_ARCHITECTURES = {
    "Step3p7FlashForCausalLM": (
        "Model architectures ['Step3p7FlashForCausalLM'] are not supported for now."
    ),
}
#: model type → vLLM 0.33's refusal (architectures named in the config are quoted)
REFUSED_MODEL_TYPES = {"minimax_m3": "Model architectures {archs} are not supported for now."}
#: the (qk_nope_head_dim, qk_rope_head_dim, v_head_dim) vLLM 0.33's MLA prefill backends serve:
#: FlashAttention's list (``v1/attention/backends/mla/prefill/flash_attn.py``
#: ``supports_mla_dimensions``), which holds every Blackwell backend's (TRT-LLM ragged,
#: FlashInfer, TokenSpeed) and is the only one on Hopper and older; any other shape stops
#: ``get_mla_prefill_backend`` (``platforms/interface.py``) with "No valid MLA prefill backend
#: found" while the model is built (recorded: DeepSeek-V3 with a 32-wide RoPE, and with 64-wide
#: nope and value heads)
MLA_PREFILL_DIMENSIONS = frozenset({(128, 64, 128), (192, 64, 256), (64, 64, 128), (256, 0, 256)})


#: the architectures vLLM 0.33 builds on ``qwen2.py``'s ``Qwen2Model`` (qwen2.py, qwen3.py,
#: mimo.py, and the VL and OCR models whose text model is Qwen2 or Qwen3), whose ``__init__``
#: asserts that the config's ``layer_types`` are all one kind
QWEN2_MODEL_ARCHITECTURES = frozenset({
    "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM", "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration", "InternVLForConditionalGeneration",
    "LightOnOCRForConditionalGeneration",
})  # fmt: skip


def refusal_reason(model_type: str, architectures: tuple[str, ...]) -> str | None:
    """vLLM 0.33's reason for refusing a model of this type and architectures, or ``None``."""
    for arch in architectures:
        if arch in REFUSED_ARCHITECTURES:
            return REFUSED_ARCHITECTURES[arch]
    template = REFUSED_MODEL_TYPES.get(model_type)
    if template:
        return template.format(archs="[" + ", ".join(repr(a) for a in architectures) + "]")
    return None


def refuse_unverified(error: Exception, engine: str, version: str | None) -> None:
    """Before a ``config-unverified`` refusal reaches the user planning with vLLM 0.33: raise vLLM's
    own refusal instead when vLLM itself cannot build that architecture (kvcalc knows why)."""
    from kvcalc.engines.vllm.defaults import resolve_profile

    model_type = getattr(error, "model_type", None)
    if engine != "vllm" or model_type is None or resolve_profile(version)[0].name != "0.33":
        return
    reason = refusal_reason(model_type, getattr(error, "architectures", ()))
    if reason:
        raise InputError(
            f"vLLM 0.33 refuses to start: {reason}",
            hint="vLLM does not register this architecture; plan it with another --engine",
            code="unsupported-model",
        ) from None


def refuse_unbuildable(model: ModelShape, version: str, tensor_parallel_size: int = 1) -> None:
    """Raise with vLLM's reason when vLLM ``version`` (a 0.33 profile) cannot build ``model``."""
    if model.gguf:
        # vLLM 0.33.0 has no GGUF loader: "gguf" is gone from QUANTIZATION_METHODS
        # (model_executor/layers/quantization/__init__.py) and from the load formats, and
        # ModelConfig refuses a .gguf path: "Invalid repository ID or local directory specified"
        # (checked with EngineArgs(model=FILE.gguf).create_engine_config on the 0.33.0 wheel)
        raise InputError(
            f"vLLM {version} refuses to start: it cannot load a GGUF file (no GGUF loader or "
            "'gguf' quantization; `vllm serve FILE.gguf` stops with \"Invalid repository ID or "
            'local directory specified")',
            hint="plan the file with --engine llamacpp, or the checkpoint it was converted from "
            "(its config.json) under vLLM; older vLLM releases loaded GGUF (--engine-version; "
            "the release that dropped it is not confirmed)",
            code="unsupported-model",
        )
    for arch in model.architectures:
        reason = REFUSED_ARCHITECTURES.get(arch)
        if reason:
            raise InputError(
                f"vLLM {version} refuses to start: {reason}",
                hint="vLLM does not register this architecture; plan it with another --engine",
                code="unsupported-model",
            )
    if reason := unknown_algo(model.checkpoint_quant_config):
        raise InputError(
            f"vLLM {version} refuses to start: {reason}",
            hint="vLLM maps ModelOpt's FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4 and "
            "MIXED_PRECISION checkpoints only; plan it with another --engine",
            code="unsupported-model",
        )
    dims = {
        (x.qk_nope_dim, x.rope_dim, x.v_head_dim)
        for x in model.layers
        if isinstance(x, MLALatent) and x.qk_nope_dim and x.v_head_dim
    }
    for nope, rope, v in sorted(dims - MLA_PREFILL_DIMENSIONS):
        served = ", ".join(str(d) for d in sorted(MLA_PREFILL_DIMENSIONS))
        raise InputError(
            f"vLLM {version} refuses to start: No valid MLA prefill backend found "
            f"(qk_nope_head_dim={nope}, qk_rope_head_dim={rope}, v_head_dim={v}; its MLA prefill "
            f"backends serve (qk_nope, qk_rope, v) = {served})",
            hint="vLLM cannot serve this MLA shape; plan it with another --engine",
            code="unsupported-model",
        )
    if reason := ungrouped_query_heads(model, tensor_parallel_size):
        raise InputError(
            f"vLLM {version} refuses to start: {reason}",
            hint="vLLM's attention needs the query heads in whole groups per KV head",
            code="unsupported-model",
        )
    # under --disable-sliding-window the refusal is the model's start_refusal, after the length
    if model.start_refusal is None and (reason := mixed_qwen2_windows(model)):
        raise InputError(
            f"vLLM {version} refuses to start: {reason}",
            hint="vLLM's qwen2.py serves a window on every layer or on none (max_window_layers "
            "0 or the layer count); plan it with another --engine",
            code="unsupported-model",
        )
    template = REFUSED_MODEL_TYPES.get(model.model_type)
    if template:
        archs = "[" + ", ".join(repr(a) for a in model.architectures) + "]"
        raise InputError(
            f"vLLM {version} refuses to start: {template.format(archs=archs)}",
            hint="vLLM does not register this architecture; plan it with another --engine",
            code="unsupported-model",
        )


def mixed_qwen2_windows(model: ModelShape) -> str | None:
    """``Qwen2Model.__init__``'s refusal, or None: ``use_sliding_window`` with
    ``max_window_layers`` below the layer count gives transformers' ``layer_types`` both kinds,
    and vLLM stops building the model (recorded: Qwen2.5-7B and Qwen3-8B with a 4,096 window
    from layer 14 and 18; with ``--disable-sliding-window`` too, whose length cap is checked
    first)."""
    if not QWEN2_MODEL_ARCHITECTURES & {*model.architectures, *model.config_architectures}:
        return None
    sliding = [isinstance(x, SlidingWindow) for x in model.layers]
    if not any(sliding) or all(sliding):
        return None
    return (
        "Sliding window for some but all layers is not supported. This model uses sliding "
        f"window but `max_window_layers` = {sliding.index(True)} is less than "
        f"`num_hidden_layers` = {len(sliding)}."
    )


def ungrouped_query_heads(model: ModelShape, tp: int = 1) -> str | None:
    """``Attention.__init__`` (``model_executor/layers/attention/attention.py``) asserts
    ``num_heads % num_kv_heads == 0`` for the heads one rank holds: ``heads // tp`` query heads
    and ``max(1, kv // tp)`` KV heads (recorded: 32 heads over 6 KV heads fail at TP 1, and as 16
    over 3 at TP 2). TP sizes that do not split the heads are refused by :func:`check_tp`'s checks
    first; per-layer query heads are not paired with their layers' KV heads here (not checked)."""
    heads = model.num_attention_heads
    if model.layer_query_heads or not heads or heads % tp:
        return None
    for layer in model.layers:
        kv = getattr(layer, "kv_heads", 0) if isinstance(layer, FullAttention) else 0
        if not kv or (kv >= tp and kv % tp):
            continue
        q, per_rank = heads // tp, max(1, kv // tp)
        if q % per_rank:
            return f"num_heads ({q}) is not divisible by num_kv_heads ({per_rank})"
    return None
