"""Qwen2, Qwen3 (dense and MoE), MiMo (Qwen2-based) and the text stacks of Qwen2-VL, Qwen2.5-VL,
Qwen3-VL and Qwen3-VL-MoE.

Qwen2-VL (``qwen2_vl``) and Qwen2.5-VL (``qwen2_5_vl``) keep their text keys at the top level, as
Qwen2 does (transformers 5's config classes write them under ``text_config``: both are read); vLLM
0.33 builds their text stack as ``Qwen2Model`` (``qwen2_vl.py``, ``qwen2_5_vl.py``). Qwen3-VL-MoE
(``qwen3_vl_moe``) is Qwen3-MoE's decoder under ``text_config`` (``qwen3_vl_moe.py``
``Qwen3MoeLLMModel``; a ``text_config`` without ``norm_topk_prob``, as transformers 5.20's class
defaults write it, fails to build there and is refused). LightOnOCR (``lighton_ocr``,
``lightonocr.py``: Mistral 3's class) builds its ``text_config`` (Qwen3) as that model; it reads
``vision_feature_layer``, ``projector_hidden_act`` and ``multimodal_projector_bias`` as attributes
of the config, which transformers 5.20's ``LightOnOcrConfig`` sets none of (vLLM fails with
AttributeError): a config without them is refused. InternVL (``internvl``: vLLM 0.33 registers
``InternVLForConditionalGeneration`` as ``interns1.py``'s ``InternS1ForConditionalGeneration``)
builds its ``text_config`` (Qwen2 in transformers 5.20's ``InternVLConfig``) as that model.
Qianfan-OCR (``qianfan_ocr``: ``qianfan_ocr.py`` subclasses ``internvl.py``'s
``InternVLChatModel``) builds its ``text_config`` (Qwen3; the only one recorded) as that model; it
reads ``force_image_size``, ``ps_version`` and ``select_layer`` as config attributes, which
transformers 5.20's ``QianfanOCRConfig`` sets none of (vLLM fails with AttributeError): a config
without them is refused. Qwen2-Audio (``qwen2_audio``: ``qwen2_audio.py``) builds its
``text_config`` as ``Qwen2ForCausalLM``, and so does Audio Flamingo 3 (``audioflamingo3``:
``audioflamingo3.py``); MOSS Transcribe-Diarize (``moss_transcribe_diarize``) builds its
``text_config`` as ``Qwen3ForCausalLM``, and Qwen3-ASR (``qwen3_asr``: ``qwen3_asr.py``, and
``qwen3_asr_realtime.py``'s subclass) its ``thinker_config.text_config``; their audio towers hold
no cache. Cosmos 3 (``cosmos3_omni``: ``cosmos3.py`` subclasses ``Qwen3VLForConditionalGeneration``)
is Qwen3-VL's text model and tower under its own model type. Qwen2.5-Omni (``qwen2_5_omni``:
``qwen2_5_omni_thinker.py``, for both its architectures) builds its thinker only, the
``thinker_config.text_config`` as ``Qwen2ForCausalLM``, and so does Qwen3-Omni-MoE
(``qwen3_omni_moe``: ``qwen3_omni_moe_thinker.py``), its text model Qwen3-MoE's; their towers hold
no cache. The vision towers
(``vision_config``) hold no cache.

``use_sliding_window`` with ``max_window_layers``: layers from ``max_window_layers`` on slide (vLLM
drops the window when ``use_sliding_window`` is false). MiMo's MTP layers are not built without
speculative decoding, so they hold no cache.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import generic
from kvcalc.hfconfig.family import Family, LayoutContext, LayoutsRead
from kvcalc.hfconfig.reader import ConfigReader


def read_qwen(r: ConfigReader, ctx: LayoutContext) -> LayoutsRead:
    """The generic reader; Qwen3-VL-MoE's ``text_config`` must say ``norm_topk_prob``."""
    if r.raw.get("model_type") == "qwen3_vl_moe" and r.text.get("norm_topk_prob") is None:
        raise ConfigError(
            f"{r.source}: no {r.prefix}norm_topk_prob: vLLM 0.33 qwen3_moe.py reads "
            "config.norm_topk_prob, and transformers 5.20's Qwen3VLMoeTextConfig has no default "
            "(vLLM fails with AttributeError building the model)",
            hint="Qwen3-MoE checkpoints say norm_topk_prob true; add it to text_config",
            code="config-invalid",
        )
    if r.raw.get("model_type") == "lighton_ocr":
        missing = [k for k in _MISTRAL3_KEYS if r.raw.get(k) is None]
        if missing:
            raise ConfigError(
                f"{r.source}: no {', '.join(missing)}: vLLM 0.33's lightonocr.py (Mistral 3's "
                "class) reads them as config attributes, and transformers 5.20's LightOnOcrConfig "
                "sets none (vLLM fails with AttributeError building the model)",
                hint="add them at the top level as a Mistral 3 config has them (-1, gelu, false)",
                code="config-invalid",
            )
    if r.raw.get("model_type") == "qianfan_ocr":
        _check_qianfan_ocr(r)
    if r.raw.get("model_type") in ("internvl_chat", "NVLM_D"):
        generic.check_internvl_chat(
            r, what="InternVL chat" if r.raw["model_type"] == "internvl_chat" else "NVLM-D",
            text_types=("qwen2", "qwen3", "qwen3_moe", "internlm2"),
        )  # fmt: skip
    return generic.read_layouts(r, ctx)


def _check_qianfan_ocr(r: ConfigReader) -> None:
    """Qianfan-OCR as vLLM 0.33 builds it: the InternVL keys ``internvl.py`` reads, a Qwen3 text."""
    missing = [k for k in generic.INTERNVL_KEYS if k not in r.raw]
    if missing:
        raise ConfigError(
            f"{r.source}: no {', '.join(missing)}: vLLM 0.33's qianfan_ocr.py (InternVLChatModel) "
            "reads them as config attributes, and transformers 5.20's QianfanOCRConfig sets none "
            "(vLLM fails with AttributeError building the model)",
            hint="add them at the top level as an InternVL chat config has them (null, v2, -1)",
            code="config-invalid",
        )
    text_type = r.text.get("model_type")
    if text_type != "qwen3":
        raise ConfigError(
            f"{r.source}: text_config.model_type {text_type!r}: kvcalc was checked against "
            "vLLM 0.33 for Qianfan-OCR's Qwen3 text model only",
            code="config-unverified",
        )


#: the top-level keys vLLM's ``mistral3.py`` reads from a LightOnOCR config (``lightonocr.py``)
_MISTRAL3_KEYS = ("vision_feature_layer", "projector_hidden_act", "multimodal_projector_bias")

FAMILIES = (
    Family(
        name="qwen",
        model_types={"qwen2", "qwen3", "qwen3_moe", "mimo", "qwen2_vl", "qwen2_5_vl", "qwen3_vl",
                     "qwen3_vl_moe", "lighton_ocr", "internvl", "qianfan_ocr", "internvl_chat", "NVLM_D",
                     "qwen2_audio",
                     "alpamayo2_super", "bagel", "audioflamingo3",
                     "moss_transcribe_diarize", "qwen3_asr", "cosmos3_omni", "qwen2_5_omni",
                     "qwen3_omni_moe"},
        architectures={
            "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiMoForCausalLM",
            "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
            "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
            "LightOnOCRForConditionalGeneration", "InternVLForConditionalGeneration",
            "QianfanOCRForConditionalGeneration", "InternVLChatModel", "NVLM_D",
            "Qwen2AudioForConditionalGeneration",
            "Alpamayo2Super", "BagelForConditionalGeneration",
            "AudioFlamingo3ForConditionalGeneration",
            "MossTranscribeDiarizeForConditionalGeneration",
            "Qwen3ASRForConditionalGeneration", "Qwen3ASRRealtimeGeneration",
            "Cosmos3ForConditionalGeneration", "Qwen2_5OmniForConditionalGeneration",
            "Qwen2_5OmniModel", "Qwen3OmniMoeForConditionalGeneration",
        },
        # layer_types: transformers 5's Qwen2/Qwen2-VL config classes write it out (from
        # use_sliding_window and max_window_layers); vLLM 0.33's qwen2.py only asserts on it, so a
        # list of full-attention layers alone is accepted (a sliding entry stays refused)
        keys={"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"},
        layer_types={"full_attention"},
        layouts=read_qwen,
        note="full attention; use_sliding_window + max_window_layers for Qwen2-style windows",
    ),
)  # fmt: skip
