"""The multimodal reservation: memory SGLang takes out of the KV budget before sizing any pool.

``mm_runtime_reservation_gb`` (``mem_cache/kv_cache_configurator.py``, 0.5.23): a multimodal model
(``ModelConfig.is_multimodal``: its first architecture in ``multimodal_model_archs`` and multimodal not
switched off for it) reserves ``SGLANG_VLM_CACHE_SIZE_MB`` (100 MiB) for the embedding cache, plus
``SGLANG_MM_FEATURE_CACHE_MB`` (1,024 MiB) when the feature transport is ``cuda_ipc``. The transport
is ``cpu`` on one node except for Qwen3-VL on a Hopper card of 60 GiB or more
(``model_overrides/qwen3_vl.py``), which also sets the embedding cache to 0: 1,024 MiB.

Kimi-K2.5 at a 20 GiB budget: (20 GiB − 100 MiB) // 70,272 B = 304,103 tokens, not 305,595 (SGLang's
own sizing code, recorded). Gemma 4 31B: (20 GiB − 100 MiB) / 737,280 B = 28,984 full-layer tokens.
"""

from __future__ import annotations

from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, MIB

#: ``multimodal_model_archs`` of SGLang 0.5.23 ``configs/model_config.py`` (the families kvcalc
#: reads; a model is multimodal when any of its architectures is listed)
MULTIMODAL_ARCHS = frozenset({
    "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration",
    "Gemma4ForConditionalGeneration", "Glm4vForConditionalGeneration",
    "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration",
    "Llama4ForConditionalGeneration", "LlavaForConditionalGeneration",
    "Mistral3ForConditionalGeneration", "MllamaForConditionalGeneration",
    "PixtralForConditionalGeneration", "Qwen2VLForConditionalGeneration",
    "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "KimiVLForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "Step3VLForConditionalGeneration", "Step3p7ForConditionalGeneration",
    "NemotronH_Nano_VL_V2", "Lfm2VlForConditionalGeneration", "JetVLMForConditionalGeneration",
})  # fmt: skip
#: first architectures SGLang serves text-only unless ``--enable-multimodal`` (``ModelConfig``)
TEXT_ONLY_BY_DEFAULT = frozenset({
    "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
    "Step3VLForConditionalGeneration",
})  # fmt: skip
#: model types that take the large-Hopper Qwen3-VL path (``_HOPPER_QWEN3_VL_TYPES``)
_HOPPER_QWEN3_VL_TYPES = frozenset({"qwen3_vl", "qwen3_vl_moe"})
VLM_CACHE_BYTES = 100 * MIB
FEATURE_CACHE_BYTES = 1024 * MIB


def is_multimodal(model: ModelShape) -> bool:
    """``ModelConfig.is_multimodal`` with SGLang's defaults (no ``--enable-multimodal`` flag)."""
    archs = model.config_architectures or model.architectures
    first = archs[0] if archs else ""
    return bool(MULTIMODAL_ARCHS & set(archs)) and first not in TEXT_ONLY_BY_DEFAULT


def reservation_bytes(
    model: ModelShape, gpu_memory_bytes: int | None, compute_capability: tuple[int, int] | None
) -> int:
    """Bytes ``mm_runtime_reservation_gb`` takes from the KV budget (0 for a text model)."""
    if not is_multimodal(model):
        return 0
    large_hopper = (
        compute_capability is not None
        and compute_capability[0] == 9
        and gpu_memory_bytes is not None
        and gpu_memory_bytes >= 60 * GIB
    )
    if large_hopper and model.model_type.removesuffix("_text") in _HOPPER_QWEN3_VL_TYPES:
        return FEATURE_CACHE_BYTES  # embedding cache 0, cuda_ipc feature transport
    return VLM_CACHE_BYTES


def note(reserved_bytes: int) -> str:
    """The line SGLang logs when it reserves (``Reserving … GB of the KV budget …``)."""
    return (
        f"Reserving {reserved_bytes / GIB:.2f} GB of the KV budget for post-sizing multimodal "
        "allocations (feature-transport pools + embedding cache)."
    )
