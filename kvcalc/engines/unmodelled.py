"""Layouts an engine module does not size: refused by name instead of sized by a generic rule.

vLLM models every layout in :mod:`kvcalc.model.attention_layouts`. The other engines were not checked
against their code for these families, so they refuse them (``unsupported-model``):

- transformers: DeepSeek Sparse Attention (its ``DynamicIndexedLayer`` keeps the indexer keys in the
  model dtype), DeepSeek-V4's compressed caches, MiMo-V2 (transformers widens the window to
  ``sliding_window_size + 1``);
- SGLang, llama.cpp, TensorRT-LLM: DeepSeek-V4's compressed caches and the sparse-attention indexer;
- every engine but vLLM: the families added from vLLM 0.33's registry (:data:`VLLM_ONLY`), checked
  against vLLM's model code and recorded runs only (llama.cpp keeps Qwen2-MoE: its ``qwen2moe`` graph
  was checked against llama.cpp's own runs, and its pure Mamba-2 graph) (Cohere2's window is vLLM's ``sliding_window + 1``;
  another engine's own rule was not read).
"""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import CompressedSparseAttention, SparseMLA
from kvcalc.model.shape import ModelShape

_WHAT = {
    CompressedSparseAttention: "DeepSeek-V4 compressed sparse attention",
    SparseMLA: "DeepSeek sparse attention (MLA + indexer key cache)",
}
#: model types whose cache an engine keeps differently from the shared layouts
_BY_TYPE = {
    "hf": {"mimo_v2": "MiMo-V2 sliding windows", "mimo_v2_flash": "MiMo-V2 sliding windows"}
}


#: model types whose family was checked against vLLM 0.33 alone: the other engines refuse them
VLLM_ONLY = {
    "phi3": "Phi-3", "gemma": "Gemma 1", "glm": "GLM-4", "glm4": "GLM-4-0414",
    "glm4_moe": "GLM-4.5", "cohere": "Command-R", "cohere2": "Command-R7B / Command-A",
    "granite": "Granite 3", "granitemoe": "Granite 3 MoE", "qwen2_moe": "Qwen2-MoE",
    "olmo2": "OLMo-2", "olmoe": "OLMoE", "exaone4": "EXAONE 4", "ernie4_5": "ERNIE 4.5",
    "phimoe": "Phi-3.5-MoE", "minicpm3": "MiniCPM3", "ernie4_5_moe": "ERNIE 4.5 MoE",
    "seed_oss": "Seed-OSS", "stablelm": "StableLM", "dbrx": "DBRX", "falcon": "Falcon",
    "gptj": "GPT-J", "opt": "OPT", "nemotron": "Nemotron-4",
    "ministral3": "Ministral 3", "glm4_moe_lite": "GLM-4.7-Flash", "cohere2_moe": "Command-A MoE",
    "exaone_moe": "K-EXAONE", "granitemoeshared": "Granite 3 MoE (shared MLP)", "chatglm": "ChatGLM",
    "hyperclovax": "HyperCLOVA X", "hyperclovax_vision_v2": "HyperCLOVA X Vision V2",
    "step3_text": "Step3 (text)",
    "afmoe": "AFMoE (Trinity)", "mamba": "Mamba", "falcon_mamba": "FalconMamba",
    "mamba2": "Mamba2", "zamba2": "Zamba2", "granite_swa": "Granite SWA",
    "granitemoe_swa": "Granite MoE SWA", "olmo_hybrid": "OLMo-Hybrid",
    "longcat_flash": "LongCat-Flash",
    "beam": "Beam",
    "dory": "Dory", "hy_v4": "HY V4", "qwen4_exp_text": "Qwen4-Exp (text)",
    "aria": "Aria", "aria_text": "Aria (text)", "cosmos3_edge": "Cosmos 3 Edge",
    "cosmos3_edge_text": "Cosmos 3 Edge (text)",
    "hrm_text": "HRM-Text",
    "muse_glimmer_text": "MuseGlimmer (text)",
    "axk1": "A.X K1",
    "laguna": "Laguna",
    "hy_v3": "Hunyuan V3",
    "step3p5": "Step-3.5 (text)",
    "bloom": "BLOOM", "apertus": "Apertus", "whisper": "Whisper (cross-attention)",
    # config classes that are the checkpoints' remote code (families/_remote.py)
    "internlm2": "InternLM2", "internlm3": "InternLM3", "minicpm": "MiniCPM", "exaone": "EXAONE 3",
    "solar": "Solar", "orion": "Orion", "deepseek": "DeepSeek V1", "bailing_moe": "Bailing MoE",
    "bailing_moe_v2": "Bailing MoE V2", "teleflm": "TeleFLM",
    "bailing_hybrid": "Bailing MoE V3", "pangu_ultra_moe": "openPangu Ultra MoE",
    "sarvam_mla": "Sarvam-MLA", "k2_horizon": "K2 Horizon", "param2moe": "Param-2 MoE",
    "alice_ai": "AliceAI",
    # multimodal wrappers: their text config's model type (transformers 5 writes one) and the
    # top-level one (a published config with the text keys at the top level)
    "qwen2_vl": "Qwen2-VL", "qwen2_vl_text": "Qwen2-VL", "qwen3_vl_moe": "Qwen3-VL-MoE",
    "qwen3_vl_moe_text": "Qwen3-VL-MoE", "glm4v": "GLM-4.1V", "glm4v_text": "GLM-4.1V",
    "glm4v_moe": "GLM-4.5V", "glm4v_moe_text": "GLM-4.5V",
    "glm_ocr": "GLM-OCR", "glm_ocr_text": "GLM-OCR",
}  # fmt: skip
#: multimodal architectures checked against vLLM 0.33 alone whose text stack's model type is a
#: family the other engines size (LLaVA's Llama, Mistral or Qwen2): refused by the config's
#: architecture
VLLM_ONLY_ARCHITECTURES = {
    "LlavaForConditionalGeneration": "LLaVA", "LlavaNextForConditionalGeneration": "LLaVA-NeXT",
    "LlavaOnevisionForConditionalGeneration": "LLaVA-OneVision",
    "LlavaNextVideoForConditionalGeneration": "LLaVA-NeXT-Video",
    "Cohere2VisionForConditionalGeneration": "Command-A Vision",
    "Idefics3ForConditionalGeneration": "Idefics3", "SmolVLMForConditionalGeneration": "SmolVLM",
    "LightOnOCRForConditionalGeneration": "LightOnOCR", "Lfm2VlForConditionalGeneration": "LFM2-VL",
    "InternVLForConditionalGeneration": "InternVL", "PaliGemmaForConditionalGeneration": "PaliGemma",
    "QianfanOCRForConditionalGeneration": "Qianfan-OCR", "InternVLChatModel": "InternVL chat", "NVLM_D": "NVLM-D",
    "H2OVLChatModel": "H2OVL", "Cosmos3ForConditionalGeneration": "Cosmos 3",
    "Qwen2_5OmniForConditionalGeneration": "Qwen2.5-Omni", "Qwen2_5OmniModel": "Qwen2.5-Omni",
    "Qwen3OmniMoeForConditionalGeneration": "Qwen3-Omni-MoE",
    "PaddleOCRVLForConditionalGeneration": "PaddleOCR-VL",
    "MiniCPMV4_6ForConditionalGeneration": "MiniCPM-V 4.6",
    "MiniCPMV4_7ForConditionalGeneration": "MiniCPM-V 4.7",
    "Step3VLForConditionalGeneration": "Step3-VL", "Blip2ForConditionalGeneration": "BLIP-2",
    "KimiVLForConditionalGeneration": "Kimi-VL", "GLM4VForCausalLM": "GLM-4V",
    "Qwen2AudioForConditionalGeneration": "Qwen2-Audio",
    "Phi3VForCausalLM": "Phi-3-Vision",
    "Alpamayo2Super": "Alpamayo 2 Super", "BagelForConditionalGeneration": "BAGEL",
    "AudioFlamingo3ForConditionalGeneration": "Audio Flamingo 3",
    "GlmAsrForConditionalGeneration": "GLM-ASR",
    "MossTranscribeDiarizeForConditionalGeneration": "MOSS Transcribe-Diarize",
    "Qwen3ASRForConditionalGeneration": "Qwen3-ASR", "Qwen3ASRRealtimeGeneration": "Qwen3-ASR",
    "GraniteSpeechForConditionalGeneration": "Granite Speech",
    "GraniteSpeechPlusForConditionalGeneration": "Granite Speech Plus",
}  # fmt: skip
#: the engines besides vLLM a :data:`VLLM_ONLY` type was checked on: llama.cpp's ``qwen2moe`` graph
#: against llama.cpp's own runs (``tests/test_verify_llamacpp.py``, Qwen1.5-MoE), and its pure
#: ``mamba2`` graph (``engines/llamacpp/graph_ssm.py``, Mamba-2 130M's shape)
_ALSO_CHECKED = {"qwen2_moe": ("llamacpp",), "mamba2": ("llamacpp",)}


def refuse_unmodelled(engine: str, model: ModelShape, *, skip: tuple[type, ...] = ()) -> None:
    """Raise ``unsupported-model`` when ``model`` has a layout ``engine`` does not size."""
    for cls, what in _WHAT.items():
        if cls in skip:
            continue
        if any(isinstance(layer, cls) for layer in model.layers):
            raise InputError(
                f"{engine}: {what} ({model.model_type}) is not modelled for this engine",
                hint="plan it with --engine vllm, whose sizing of this layout is checked",
                code="unsupported-model",
            )
    by_type = _BY_TYPE.get(engine, {}).get(model.model_type)
    if model.model_type in VLLM_ONLY and engine not in _ALSO_CHECKED.get(model.model_type, ()):
        by_type = f"{VLLM_ONLY[model.model_type]} caches (checked against vLLM 0.33 only)"
    arch = next((a for a in model.config_architectures if a in VLLM_ONLY_ARCHITECTURES), None)
    if arch is not None:
        by_type = f"{VLLM_ONLY_ARCHITECTURES[arch]} caches (checked against vLLM 0.33 only)"
    if by_type:
        raise InputError(
            f"{engine}: {by_type} ({model.model_type}) are not modelled for this engine",
            hint="plan it with --engine vllm, whose sizing of this layout is checked",
            code="unsupported-model",
        )
