"""Multimodal models under SGLang 0.5.23: which ones it treats as multimodal, and what that costs.

Read from SGLang 0.5.23 (``configs/model_config.py``, ``arg_groups/memory_hook.py``,
``arg_groups/model_overrides/qwen3_vl.py``, ``mem_cache/kv_cache_configurator.py``) and checked
on the recorded Qwen3-VL, Qwen3.5 and Kimi-K2.5 scenarios:

- ``is_multimodal``: the first architecture is not one SGLang serves text-only by default
  (Gemma 3, Llama 4, Step3-VL), and the architecture is in ``multimodal_model_archs`` or the
  config wraps a ``text_config``;
- the default ``mem_fraction_static`` is multiplied by ``0.95 · clamp(1 − 0.1 · (r − 1), 0.8,
  1.05)``, r = ``num_hidden_layers · hidden_size²`` of the ``vision_config`` over ViT-L/14's
  24 · 1024² (SGLang's defaults 24 and 1024 where the keys are absent: Qwen3-VL writes ``depth``);
- prefill CUDA graphs are off for multimodal models outside SGLang's allow-list (so their graph
  reserve is smaller);
- ``SGLANG_VLM_CACHE_SIZE_MB`` (100 MiB) comes off the KV budget; Qwen3-VL on a Hopper GPU (SM 9.x,
  ``is_sm90_supported``) of 60 GiB or more moves to CUDA-IPC feature transport instead: 1,024 MiB,
  no embedding cache (recorded: 1,024 MiB on an emulated H100, 100 MiB on a B200).
"""

from __future__ import annotations

from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, MIB

#: ``multimodal_model_archs`` of SGLang 0.5.23 (``configs/model_config.py``)
MULTIMODAL_ARCHS = frozenset({
    "CLIPModel", "Cohere2VisionForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration",
    "DeepseekVL2ForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration", "Gemma3ForConditionalGeneration",
    "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model",
    "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "GlmOcrForConditionalGeneration",
    "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration", "Grok1VForCausalLM",
    "Grok1AForCausalLM", "LlavaLlamaForCausalLM", "Llama4ForConditionalGeneration",
    "LlavaMistralForCausalLM", "LlavaQwenForCausalLM", "LlavaForConditionalGeneration",
    "LlavaVidForCausalLM", "Lfm2VlForConditionalGeneration", "LightOnOCRForConditionalGeneration",
    "MiMoV2ASRForCausalLM", "MiniCPMO", "MiniCPMV", "Mistral3ForConditionalGeneration",
    "MultiModalityCausalLM", "MllamaForConditionalGeneration", "MossVLForConditionalGeneration",
    "NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "PixtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration", "Qwen3ASRForConditionalGeneration",
    "Qwen3OmniMoeForConditionalGeneration", "KimiVLForConditionalGeneration",
    "LocateAnythingForConditionalGeneration", "InternVLChatModel",
    "InternS1ForConditionalGeneration", "InternS1ProForConditionalGeneration", "Phi4MMForCausalLM",
    "VoxtralForConditionalGeneration", "WhisperForConditionalGeneration",
    "Step3VLForConditionalGeneration", "POINTSV15ChatModel", "DotsVLMForCausalLM",
    "Dots3NoteForCausalLM", "DotsOCRForCausalLM", "Sarashina2VisionForCausalLM",
    "NVILAForConditionalGeneration", "NVILALiteForConditionalGeneration", "DeepseekOCRForCausalLM",
    "UnlimitedOCRForCausalLM", "JetVLMForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "MiDashengLMModel", "StepVLForConditionalGeneration",
    "Step3p7ForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "BailingMMNativeForConditionalGeneration", "BailingMM2NativeForConditionalGeneration",
    "BailingMoeV3VLForConditionalGeneration",
})  # fmt: skip
#: served text-only unless ``--enable-multimodal`` (the first architecture decides)
TEXT_ONLY_BY_DEFAULT = frozenset({
    "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
    "Step3VLForConditionalGeneration", "InklingForConditionalGeneration",
})  # fmt: skip
#: multimodal architectures whose prefill CUDA graph stays on
#: (``multimodal_breakable_cuda_graph_supported_model_archs``)
PREFILL_GRAPH_ALLOWED = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "MiniMaxM3SparseForCausalLM",
})  # fmt: skip
#: ``SGLANG_VLM_CACHE_SIZE_MB`` and ``SGLANG_MM_FEATURE_CACHE_MB`` defaults
VLM_CACHE_BYTES = 100 * MIB
FEATURE_CACHE_BYTES = 1024 * MIB
#: the overrides registered for these (``_qwen3vl_hopper_serving_overrides``)
_HOPPER_QWEN3_VL_ARCHS = frozenset(
    {"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"}
)


def architectures(model: ModelShape) -> tuple[str, ...]:
    """The architectures SGLang reads: the config file's own (a wrapper's, not its text model's)."""
    return model.config_architectures or model.architectures


def is_multimodal(model: ModelShape) -> bool:
    """SGLang's ``ModelConfig.is_multimodal`` with default flags."""
    arch = architectures(model)
    if arch and arch[0] in TEXT_ONLY_BY_DEFAULT:
        return False
    wrapped = any(k.startswith("text_config.") for k in model.config_keys)
    return wrapped or bool(MULTIMODAL_ARCHS & set(arch))


def prefill_graph_allowed(model: ModelShape) -> bool:
    """False where SGLang turns the prefill CUDA graph off for a multimodal model."""
    return not is_multimodal(model) or bool(PREFILL_GRAPH_ALLOWED & set(architectures(model)))


def vision_factor(model: ModelShape) -> float:
    """``adjust_mem_fraction_for_vlm``: 1.0 for text models and towers without a vision_config."""
    if not is_multimodal(model) or model.vision_tower is None:
        return 1.0
    layers, hidden = model.vision_tower
    ratio = (layers or 24) * (hidden or 1024) ** 2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def reservation_bytes(
    model: ModelShape, gpu_memory_bytes: int | None, capability: tuple[int, int] | None
) -> int:
    """``mm_runtime_reservation_gb``: what multimodal models take off the KV budget."""
    if not is_multimodal(model):
        return 0
    if large_hopper_qwen3_vl(model, gpu_memory_bytes, capability):
        return FEATURE_CACHE_BYTES  # CUDA-IPC transport, embedding cache off
    return VLM_CACHE_BYTES


def large_hopper_qwen3_vl(
    model: ModelShape, gpu_memory_bytes: int | None, capability: tuple[int, int] | None
) -> bool:
    """``large_hopper_qwen3_vl_model_type``: SM 9.x (not Blackwell) with at least 60 GiB."""
    return (
        bool(_HOPPER_QWEN3_VL_ARCHS & set(architectures(model)))
        and capability is not None
        and capability[0] == 9
        and gpu_memory_bytes is not None
        and gpu_memory_bytes >= 60 * GIB
    )


def note(reserved_bytes: int) -> str:
    """The line SGLang logs when it reserves (``Reserving … GB of the KV budget …``)."""
    return (
        f"Reserving {reserved_bytes / GIB:.2f} GB of the KV budget for post-sizing multimodal "
        "allocations (feature-transport pools + embedding cache)."
    )
