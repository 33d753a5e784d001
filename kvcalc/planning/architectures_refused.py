"""Every architecture of vLLM 0.33's registry that kvcalc does not size, refused by name with the
reason: ``kvcalc models --architectures`` shows them, and ``tests/test_architectures.py`` fails
while an architecture of the recorded registry (``kvcalc/data/vllm_registry.json``) is neither
here nor declared by a family (a new vLLM release's architectures show up there), or is both.

A family added for one of these removes its name here (the same test says which).

Where a public configuration of each text-generation and multimodal architecture without a family
exists (a config class of transformers 5.20 or vLLM 0.33, a published ``config.json``) is
surveyed in ``kvcalc/data/architecture_configs.json``: those with none are refused with
:data:`NO_PUBLIC_CONFIG`, the others name their source in the listing (``config_source``), and
the tests fail while one without a family is not surveyed. The file is read by
:func:`kvcalc.engines.vllm.registry.config_sources`, beside the registry it surveys.
"""

from __future__ import annotations

from kvcalc.engines.vllm.registry import config_sources

#: the reason of an architecture with no public configuration anywhere
#: (``kvcalc/data/architecture_configs.json``: source ``none``)
NO_PUBLIC_CONFIG = (
    "no public configuration found (searched: transformers 5.20 and vLLM 0.33 config classes, "
    "published config.json files)"
)
_NOT_VERIFIED = (
    "no kvcalc family reads its config yet: planning it is refused (config-unverified) rather "
    "than guessed"
)
_NOT_VERIFIED_MM = (
    "no kvcalc family reads its config yet (text decoder cache and vision tower): planning it "
    "is refused (config-unverified) rather than guessed"
)
_DRAFT = (
    "a draft architecture: kvcalc sizes the drafts it models (MTP layers from the target's "
    "config, Llama EAGLE-3 heads, draft models of a registered family), not this one"
)
_POOLING = "a pooling model (embeddings, rewards, classification): kvcalc plans generation"
_TRANSFORMERS = (
    "served by vLLM's Transformers backend, whose cache kvcalc checks only for the families it "
    "registers: refused (config-unverified)"
)
_REMOVED = "vLLM 0.33 no longer builds it (_PREVIOUSLY_SUPPORTED_MODELS)"
#: vLLM's own model code could not be run on the reference harness, so nothing was recorded
_HARNESS = {
    "Rnj1ForCausalLM": (
        "vLLM 0.33's rnj1.py builds every attention layer with chunk_lookback, which only the "
        "Triton backend takes: on the reference harness's H100 vLLM selects FLASH_ATTN and fails "
        "building the model (TypeError: FlashAttentionImpl.__init__() got an unexpected keyword "
        "argument 'chunk_lookback'; recorded on Gemma3TextConfig with rnj-1's published "
        "dimensions, its layer pattern and its defaults), so its sizing was not recorded (kvcalc "
        "does not model --attention-backend): refused (config-unverified)"
    ),
    "FlintForCausalLM": (
        "vLLM 0.33's flint model asserts FlashInfer attention (AssertionError: Flint requires "
        "FlashInfer attention), and on the reference harness's H100 vLLM selects FLASH_ATTN, so "
        "its sizing was not recorded (kvcalc does not model --attention-backend): refused "
        "(config-unverified)"
    ),
}


_CLASS_DEFAULTS = "; no config vLLM builds was recorded: refused (config-unverified)"
#: multimodal architectures whose public config class vLLM 0.33 fails on in the reference harness
#: (the class's defaults, recorded while surveying: ``vllm_reference.py``, TP 1, the length the
#: config allows), with vLLM's error
_MM_NOT_BUILT = {
    "DeepseekVLV2ForCausalLM": (
        "vLLM 0.33 refuses vLLM's own DeepseekVLV2Config() (ValidationError: the text_config "
        "extracted from the model config does not have `num_attention_heads`), and "
        "deepseek_vl2.py builds its tower with timm, which the reference harness does not have"
        + _CLASS_DEFAULTS
    ),
    "DotsOCRForCausalLM": (
        "vLLM 0.33 ships a DotsOCRConfig class but does not load model_type dots_ocr without the "
        "checkpoint's remote code (ValidationError: Transformers does not recognize this "
        "architecture)" + _CLASS_DEFAULTS
    ),
    "Ernie4_5_VLMoeForConditionalGeneration": (
        "vLLM 0.33's ernie45_vl.py fails on transformers 5.20's Ernie4_5_VLMoeConfig() "
        "(AttributeError: 'Ernie4_5_VLMoeVisionConfig' object has no attribute 'embed_dim': it "
        "reads the checkpoints' remote config layout)" + _CLASS_DEFAULTS
    ),
    "Granite4VisionForConditionalGeneration": (
        "vLLM 0.33's granite4_vision.py fails on transformers 5.20's Granite4VisionConfig() "
        "(TypeError: object of type 'NoneType' has no len())" + _CLASS_DEFAULTS
    ),
    "Molmo2ForConditionalGeneration": (
        "vLLM 0.33's molmo2.py fails on transformers 5.20's Molmo2Config() (AttributeError: "
        "'Molmo2Config' object has no attribute 'vit_config': it reads the checkpoints' remote "
        "config layout)" + _CLASS_DEFAULTS
    ),
    "CohereCompassForConditionalGeneration": (
        "vLLM 0.33's cohere_compass.py asserts config.tie_word_embeddings, which transformers "
        "5.20's CohereCompassConfig() leaves false (AssertionError)" + _CLASS_DEFAULTS
    ),
    "Gemma4UnifiedForConditionalGeneration": (
        "vLLM 0.33 fails on transformers 5.20's Gemma4UnifiedConfig() (ValueError: Gemma4 "
        "Unified requires a vision configuration: the class defaults have none)" + _CLASS_DEFAULTS
    ),
    "Glm5NextForConditionalGeneration": (
        "vLLM 0.33 fails on transformers 5.20's Glm5NextConfig() (AttributeError: "
        "'Glm5NextTextConfig' object has no attribute 'mhc')" + _CLASS_DEFAULTS
    ),
    "HfMoondream": (
        "vLLM 0.33 fails on vLLM's own Moondream3Config() (AttributeError: 'dict' object has "
        "no attribute 'hidden_size')" + _CLASS_DEFAULTS
    ),
    "IsaacForConditionalGeneration": (
        "vLLM 0.33's isaac.py resolves its vision token from the tokenizer (assert tokenizer "
        "is not None), which the reference harness does not load, so its sizing was not "
        "recorded: refused (config-unverified)"
    ),
    "MiniMaxM3SparseForConditionalGeneration": (
        "vLLM 0.33 fails on transformers 5.20's MiniMaxM3VLConfig() (AttributeError: "
        "'PreTrainedConfig' object has no attribute 'img_token_compression_config')"
        + _CLASS_DEFAULTS
    ),
    "Moondream3ForCausalLM": (
        "vLLM 0.33 fails on vLLM's own Moondream3Config() (AttributeError: 'dict' object has "
        "no attribute 'hidden_size')" + _CLASS_DEFAULTS
    ),
    "OpenVLAForActionPrediction": (
        "vLLM 0.33's openvla.py builds its DINOv2 and SigLIP featurizers with timm, which the "
        "reference harness does not have, so its sizing was not recorded: refused "
        "(config-unverified)"
    ),
    "Qwen4ExpForConditionalGeneration": (
        "vLLM 0.33 fails on transformers 5.20's Qwen4ExpConfig() (AttributeError: "
        "'Qwen4ExpVisionConfig' object has no attribute 'deepstack_visual_indexes')"
        + _CLASS_DEFAULTS
    ),
    "Step3p7ForConditionalGeneration": (
        "vLLM 0.33 fails on transformers 5.20's Step3p7Config() (AttributeError: "
        "'Step3p7VisionConfig' object has no attribute 'output_dim')" + _CLASS_DEFAULTS
    ),
    "UltravoxModel": (
        "vLLM 0.33 fails on vLLM's own UltravoxConfig() (AttributeError: 'UltravoxConfig' "
        "object has no attribute 'vocab_size')" + _CLASS_DEFAULTS
    ),
    "UnlimitedOCRForCausalLM": (
        "vLLM 0.33 refuses vLLM's own UnlimitedOCRConfig() (ValidationError: the text_config "
        "extracted from the model config does not have `num_attention_heads`)" + _CLASS_DEFAULTS
    ),
    "Ovis": (
        "vLLM 0.33 refuses vLLM's own OvisConfig() (ValidationError: hidden_size is None: the "
        "class names no llm_config)" + _CLASS_DEFAULTS
    ),
    "VoxtralForConditionalGeneration": (
        "vLLM 0.33's voxtral.py fails on transformers 5.20's VoxtralConfig() (AttributeError: "
        "'VoxtralEncoderConfig' object has no attribute 'downsample_factor': it reads the "
        "Mistral-format params.json layout, which sets it)" + _CLASS_DEFAULTS
    ),
    "VoxtralRealtimeGeneration": (
        "vLLM 0.33's voxtral_realtime.py fails on transformers 5.20's VoxtralRealtimeConfig() "
        "(AttributeError: 'VoxtralRealtimeEncoderConfig' object has no attribute "
        "'downsample_factor': it reads the Mistral-format params.json layout, which sets it)"
        + _CLASS_DEFAULTS
    ),
    "CohereAsrForConditionalGeneration": (
        "vLLM 0.33 fails on transformers 5.20's CohereAsrConfig() (AttributeError: "
        "'CohereAsrConfig' object has no attribute 'transf_decoder'), and cohere_asr.py is an "
        "encoder-decoder whose decoder holds a cross-attention cache kvcalc does not model"
        + _CLASS_DEFAULTS
    ),
    "FunAudioChatForConditionalGeneration": (
        "vLLM 0.33's funaudiochat.py fails on vLLM's own FunAudioChatConfig() (TypeError: int() "
        "argument must be a string, a bytes-like object or a real number, not 'NoneType': "
        "FunAudioChatDiscreteEncoder reads audio_config.pad_token_id and codebook_size, None in "
        "the class defaults; no published config.json was at hand)" + _CLASS_DEFAULTS
    ),
    "BailingMoeV3VLForConditionalGeneration": (
        "vLLM 0.33 fails building the model on vLLM's own BailingMoeV3VLConfig() (ValueError: "
        "BailingMoeV3 KDA currently expects no_kda_lora=True)" + _CLASS_DEFAULTS
    ),
    "DeepseekOCRForCausalLM": (
        "vLLM 0.33 refuses vLLM's own DeepseekVLV2Config() (ValidationError: The text_config "
        "extracted from the model config does not have `num_attention_heads` attribute)"
        + _CLASS_DEFAULTS
    ),
    "DeepseekV4ForConditionalGeneration": (
        "vLLM 0.33 fails building the model on transformers 5.20.2 DeepseekV4Config() "
        "(AttributeError: 'DeepseekV4Config' object has no attribute 'vision_n_layers')"
        + _CLASS_DEFAULTS
    ),
    "DeepseekV41ForCausalLM": (
        "vLLM 0.33 fails building the model on vLLM's own DeepseekV41Config() (AttributeError: "
        "'DeepseekV41Config' object has no attribute 'hidden_size')" + _CLASS_DEFAULTS
    ),
    "Dots3NoteForCausalLM": (
        "vLLM 0.33 refuses vLLM's own Dots3NoteConfig() (ValidationError: Model architectures "
        "['Dots3NoteForCausalLM'] failed to be inspected)" + _CLASS_DEFAULTS
    ),
    "KimiK3ForConditionalGeneration": (
        "vLLM 0.33 fails building the model on vLLM's own KimiK3Config() (AssertionError: "
        "assert qk_nope_head_dim is not None)" + _CLASS_DEFAULTS
    ),
    "MuseSparkForConditionalGeneration": (
        "vLLM 0.33 refuses transformers 5.20.2 MuseSparkConfig() (AttributeError: "
        "'MuseSparkTextConfig' object has no attribute 'num_shared_experts')" + _CLASS_DEFAULTS
    ),
    "NemotronH_Omni_Reasoning_V3": (
        "vLLM 0.33 fails building the model on transformers 5.20.2 "
        "NemotronH_Omni_Reasoning_V3_Config() (AttributeError: "
        "'NemotronH_Omni_Reasoning_V3_Config' object has no attribute 'patch_size')"
        + _CLASS_DEFAULTS
    ),
    "Step5ForConditionalGeneration": (
        "vLLM 0.33 fails building the model on vLLM's own Step5VLConfig() (ValueError: No model"
        " architectures are specified)" + _CLASS_DEFAULTS
    ),
    "DeepseekOCR2ForCausalLM": (
        "vLLM 0.33 fails building the model on transformers 5.20.2 DeepseekOcr2Config() "
        "(AttributeError: 'DeepseekOcr2Config' object has no attribute 'projector_config')"
        + _CLASS_DEFAULTS
    ),
    "MiDashengLMModel": (
        "vLLM 0.33's midashenglm.py imports torchaudio, which the reference harness does not "
        "have (ValidationError: Model architectures ['MiDashengLMModel'] failed to be inspected; "
        "ModuleNotFoundError: No module named 'torchaudio'), so its sizing was not recorded: "
        "refused (config-unverified)"
    ),
}


#: text-generation architectures whose public config class vLLM 0.33 fails on in the reference
#: harness (the class's defaults, recorded 2026-12-07: ``vllm_reference.py``, auto, TP 1, 4,096
#: tokens, 20 GiB, H100), with vLLM's error
_TEXT_NOT_BUILT = {
    "Glm5NextForCausalLM": (
        "vLLM 0.33's glm5next model fails on transformers 5.20's Glm5NextConfig() (AttributeError: "
        "'Glm5NextTextConfig' object has no attribute 'mhc', building the model)" + _CLASS_DEFAULTS
    ),
    "InklingForCausalLM": (
        "vLLM 0.33's inkling model fails on transformers 5.20's InklingTextConfig() "
        "(AttributeError: 'InklingTextConfig' object has no attribute 'padded_vocab_size', "
        "building the model)" + _CLASS_DEFAULTS
    ),
    "MiniMaxM3SparseForCausalLM": (
        "vLLM 0.33 refuses vLLM's own MiniMaxM3TextConfig() (ValidationError: The checkpoint you "
        "are trying to load has model type `minimax_m3_text` but Transformers does not recognize "
        "this architecture)" + _CLASS_DEFAULTS
    ),
    "Step5ForCausalLM": (
        "vLLM 0.33's step5 model refuses vLLM's own Step5Config() (NotImplementedError: Step5 "
        "requires a checkpoint with a sparse_config section; dense-only checkpoints are not "
        "supported.)" + _CLASS_DEFAULTS
    ),
}


_MODEL_TYPE_UNKNOWN = (
    "its checkpoints' config.json names remote configuration code (auto_map) and a model_type "
    "that neither vLLM 0.33 nor transformers 5.20 names, and no published config.json of it was "
    "at hand, so no config could be recorded and no family keyed by its model type: refused "
    "(config-unverified)"
)
#: remote-code architectures this project could not record, and why
_NOT_RECORDED = {
    "NemotronHPuzzleForCausalLM": (
        "vLLM 0.33's nemotron_h.py takes each layer's attention, Mamba and MoE shapes from the "
        "config class's get_nemotron_h_config_for_layer, which is the checkpoints' remote code "
        "(model_type nemotron_h_puzzle) and not at hand: refused (config-unverified)"
    ),
    "Plamo3ForCausalLM": (
        "vLLM 0.33's plamo3.py reads config.layer_types and config.interleaved_sliding_window, "
        "which the checkpoints' remote config class derives from config.json in a way not at "
        "hand: refused (config-unverified)"
    ),
    "IQuestLoopCoderForCausalLM": (
        "vLLM 0.33's iquest_loopcoder.py runs loop_num attention passes per layer, each with its "
        "own cache (the first full, the others sliding over loop_window_size), but "
        + _MODEL_TYPE_UNKNOWN
    ),
    "IQuestCoderForCausalLM": "vLLM 0.33 builds it as LlamaForCausalLM, but " + _MODEL_TYPE_UNKNOWN,
    "TeleChat3ForCausalLM": "vLLM 0.33 builds it as LlamaForCausalLM, but " + _MODEL_TYPE_UNKNOWN,
    "TeleChat2ForCausalLM": (
        "vLLM 0.33's telechat2.py builds it (Llama, with the config's n_layer / n_head / "
        "ffn_hidden_size mapped at build), but " + _MODEL_TYPE_UNKNOWN
    ),
    "PanguEmbeddedForCausalLM": "vLLM 0.33's openpangu.py builds it, but " + _MODEL_TYPE_UNKNOWN,
    "SarvamMoEForCausalLM": (
        "vLLM 0.33 builds it as Bailing MoE (sarvam.py), but " + _MODEL_TYPE_UNKNOWN
    ),
    "Step1ForCausalLM": "vLLM 0.33's step1.py builds it, but " + _MODEL_TYPE_UNKNOWN,
}


def config_source_text(architecture: str) -> str:
    """Where a public configuration of ``architecture`` is (empty: not surveyed, or none)."""
    entry = config_sources().get(architecture)
    if entry is None or entry["source"] == "none":
        return ""
    if entry["source"] == "config-class":
        where, cls = entry["config_class"].split(":")
        text = f"{where} {cls}"
        return text + (f", model_type {entry['model_type']}" if "model_type" in entry else "")
    if entry["source"] == "published":
        remote = ", remote code" if entry.get("remote_code") else ""
        return f"{entry['config_json']}{remote}"
    return f"config.json not located; {entry['note']}"


def _no_public_config(category: str) -> dict[str, str]:
    return {arch: NO_PUBLIC_CONFIG for arch, entry in config_sources().items()
            if entry["category"] == category and entry["source"] == "none"}  # fmt: skip


#: category → architecture → why kvcalc does not size it
REFUSED_BY_NAME: dict[str, dict[str, str]] = {
    "text-generation": dict.fromkeys(
        (
            "DomynEdgeForCausalLM",
            "InklingForConditionalGeneration",
            "MistralLarge3ForCausalLM",
        ),
        _NOT_VERIFIED,
    )
    | _HARNESS
    | _TEXT_NOT_BUILT
    | _NOT_RECORDED
    | _no_public_config("text-generation"),
    "multimodal": dict.fromkeys(
        (
            "BeeForConditionalGeneration",
            "DiffusionGemmaForBlockDiffusion",
            "Eagle2_5_VLForConditionalGeneration",
            "FireRedASR2ForConditionalGeneration",
            "FunASRForConditionalGeneration",
            "InternS1ForConditionalGeneration",
            "InternS1ProForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration",
            "InternS2PreviewForConditionalGeneration",
            "KananaVForConditionalGeneration",
            "KeyeForConditionalGeneration",
            "KeyeVL1_5ForConditionalGeneration",
            "Llama_Nemotron_Nano_VL",
            "LlavaOnevision2ForConditionalGeneration",
            "MiMoV2OmniForCausalLM",
            "MiniCPMO",
            "MiniCPMOcrForConditionalGeneration",
            "MiniCPMV",
            "MolmoForCausalLM",
            "MoonshotKimiaForCausalLM",
            "MossAudioModel",
            "NemotronH_Nano_Omni_Reasoning_V3",
            "NemotronH_Nano_VL_V2",
            "NemotronH_Super_Omni_Reasoning_V3",
            "NemotronParseForConditionalGeneration",
            "OpenCUAForConditionalGeneration",
            "OpenPanguVLForConditionalGeneration",
            "Ovis2_5",
            "Ovis2_6ForCausalLM",
            "Ovis2_6_MoeForCausalLM",
            "Phi4ForCausalLMV",
            "Phi4MMForCausalLM",
            "PixtralForConditionalGeneration",
            "RForConditionalGeneration",
            "RadioMBartPrefixForCausalLM",
            "SkyworkR1VChatModel",
            "StepVLForConditionalGeneration",
        ),
        _NOT_VERIFIED_MM,
    )
    | _MM_NOT_BUILT
    | _no_public_config("multimodal"),
    "speculative": dict.fromkeys(
        (
            "BailingMoeV25MTPModel",
            "BailingMoeV3MTPModel",
            "DFlash2BeamDraftModel",
            "DFlash2DraftModel",
            "DFlashDraftModel",
            "DFlashLagunaForCausalLM",
            "DFlashMuseGlimmerAssistantModel",
            "DFlashQwen3XPressModel",
            "DSparkDraftModel",
            "DSparkV41DraftModel",
            "DeepSeekMTPModel",
            "DeepSeekV4MTPModel",
            "DeepseekV32MTPModel",
            "Dots3NoteMTPModel",
            "Eagle3DeepseekV2ForCausalLM",
            "Eagle3DeepseekV3ForCausalLM",
            "Eagle3MiniMaxM2ForCausalLM",
            "Eagle3Qwen2_5vlForCausalLM",
            "Eagle3Qwen3ForCausalLM",
            "Eagle3Qwen3vlForCausalLM",
            "EagleCohereForCausalLM",
            "EagleDeepSeekMTPModel",
            "EagleLlama4ForCausalLM",
            "EagleLlamaForCausalLM",
            "EagleMiniCPMForCausalLM",
            "EagleMistralForCausalLM",
            "EagleMistralLarge3ForCausalLM",
            "ErnieMTPModel",
            "Exaone4_5_MTP",
            "ExaoneMoeMTP",
            "ExtractHiddenStatesModel",
            "Gemma4DSparkModel",
            "Gemma4MTPModel",
            "Glm4MoeLiteMTPModel",
            "Glm4MoeMTPModel",
            "Glm5NextMTPModel",
            "GlmOcrMTPModel",
            "HYV3MTPModel",
            "HYV4MTPModel",
            "InklingMTPModel",
            "InternS2MobiusMTP",
            "K3DSparkModel",
            "KimiK3MTPModel",
            "LiLiCorrDraftModel",
            "LongCatFlashMTPModel",
            "MiMoMTPModel",
            "MiMoV2MTPModel",
            "MiMoV2OmniMTPModel",
            "MiniMaxM3MTP",
            "MuseGlimmerAssistantModel",
            "MuseSparkDSparkModel",
            "NemotronHMTPModel",
            "OpenPanguMTPModel",
            "PEagleDraftModel",
            "ParseAuxMTPModel",
            "PeagleLlamaForCausalLM",
            "PeagleQwen3ForCausalLM",
            "Qwen3DSparkModel",
            "Qwen3NextMTP",
            "Qwen3OmniDSparkModel",
            "Qwen3XPressModel",
            "Qwen3_5MTP",
            "Qwen3_5MoeMTP",
            "Qwen4ExpMTP",
            "Step3p5MTP",
            "Step5MTP",
        ),
        _DRAFT,
    ),
    "pooling": dict.fromkeys(
        (
            "BertForMaskedLM",
            "BertForSequenceClassification",
            "BertForTokenClassification",
            "BertModel",
            "BertSpladeSparseEmbeddingModel",
            "BgeM3EmbeddingModel",
            "CLIPModel",
            "ClefFlashForJointSchema",
            "ClefOmniForJointSchema",
            "ColBERTJinaRobertaModel",
            "ColBERTLfm2Model",
            "ColBERTModernBertModel",
            "ColModernVBertForRetrieval",
            "ColPaliForRetrieval",
            "ColQwen3",
            "ColQwen3_5",
            "ColUltraVBertForRetrieval",
            "D3ForSequenceClassification",
            "DeepseekV3BidirectionalModel",
            "EmbeddingGemma2Model",
            "GPT2ForSequenceClassification",
            "Gemma2Model",
            "Gemma3TextModel",
            "GteModel",
            "GteNewForSequenceClassification",
            "GteNewModel",
            "HF_ColBERT",
            "InternLM2ForRewardModel",
            "JambaForSequenceClassification",
            "JinaEmbeddingsV5Model",
            "JinaForRanking",
            "JinaVLForRanking",
            "Lfm2BidirectionalModel",
            "LlamaBidirectionalForSequenceClassification",
            "LlamaBidirectionalModel",
            "LlamaModel",
            "LlamaNemotronVLForSequenceClassification",
            "LlamaNemotronVLModel",
            "MistralModel",
            "ModernBertForSequenceClassification",
            "ModernBertForTokenClassification",
            "ModernBertModel",
            "ModernVBertModel",
            "NomicBertModel",
            "OpenAIPrivacyFilterForTokenClassification",
            "OpsColQwen3Model",
            "Qwen2ForProcessRewardModel",
            "Qwen2ForRewardModel",
            "Qwen2Model",
            "Qwen3ASRForcedAlignerForTokenClassification",
            "Qwen3VLNemotronEmbedModel",
            "RobertaForMaskedLM",
            "RobertaForSequenceClassification",
            "RobertaForTokenClassification",
            "RobertaModel",
            "SiglipModel",
            "TeleChat2ForCausalLM",
            "Terratorch",
            "VoyageQwen3BidirectionalEmbedModel",
            "XLMRobertaForSequenceClassification",
            "XLMRobertaForTokenClassification",
            "XLMRobertaModel",
        ),
        _POOLING,
    ),
    "transformers-backend": dict.fromkeys(
        (
            "ArceeForCausalLM",
            "CwmForCausalLM",
            "Emu3ForConditionalGeneration",
            "FlexOlmoForCausalLM",
            "GPTNeoXForCausalLM",
            "HunYuanDenseV1ForCausalLM",
            "HunYuanMoEV1ForCausalLM",
            "HunYuanVLForConditionalGeneration",
            "Jais2ForCausalLM",
            "Kolibri1ForCausalLM",
            "MellumForCausalLM",
            "NanbeigeForCausalLM",
            "Olmo3ForCausalLM",
            "OlmoForCausalLM",
            "PhiForCausalLM",
            "SmolLM3ForCausalLM",
            "Starcoder2ForCausalLM",
            "TransformersEmbeddingModel",
            "TransformersForCausalLM",
            "TransformersForMTP",
            "TransformersForSequenceClassification",
            "TransformersMoEEmbeddingModel",
            "TransformersMoEForCausalLM",
            "TransformersMoEForMTP",
            "TransformersMoEForSequenceClassification",
            "TransformersMultiModalEmbeddingModel",
            "TransformersMultiModalForCausalLM",
            "TransformersMultiModalForSequenceClassification",
            "TransformersMultiModalMoEForCausalLM",
            "VaultGemmaForCausalLM",
            "VibeVoiceAsrForConditionalGeneration",
        ),
        _TRANSFORMERS,
    ),
    "removed": dict.fromkeys(
        (
            "AquilaForCausalLM",
            "AquilaModel",
            "ArcticForCausalLM",
            "AyaVisionForConditionalGeneration",
            "BaiChuanForCausalLM",
            "BaichuanForCausalLM",
            "ChameleonForConditionalGeneration",
            "Cheers",
            "CheersForConditionalGeneration",
            "DonutForConditionalGeneration",
            "Dots1ForCausalLM",
            "ErnieForSequenceClassification",
            "ErnieForTokenClassification",
            "ErnieModel",
            "Fairseq2LlamaForCausalLM",
            "FireRedLIDForConditionalGeneration",
            "FuyuForCausalLM",
            "GritLM",
            "Grok1ForCausalLM",
            "Grok1ModelForCausalLM",
            "HCXVisionForCausalLM",
            "InternLM2VEForCausalLM",
            "InternLMForCausalLM",
            "JAISLMHeadModel",
            "MPTForCausalLM",
            "MantisForConditionalGeneration",
            "MiniMaxVL01ForConditionalGeneration",
            "MllamaForConditionalGeneration",
            "MotifForCausalLM",
            "MptForCausalLM",
            "MusicFlamingoForConditionalGeneration",
            "OuroForCausalLM",
            "PersimmonForCausalLM",
            "Phi3SmallForCausalLM",
            "Phi4FlashForCausalLM",
            "Phi4MultimodalForCausalLM",
            "Plamo2ForCausalLM",
            "PrithviGeoSpatialMAE",
            "QWenLMHeadModel",
            "QwenVLForConditionalGeneration",
            "RWForCausalLM",
            "StableLMEpochForCausalLM",
            "Tarsier2ForConditionalGeneration",
            "TarsierForConditionalGeneration",
            "TeleChatForCausalLM",
            "XverseForCausalLM",
        ),
        _REMOVED,
    ),
}
