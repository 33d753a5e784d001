"""Vision towers from ``vision_config``, for the parameter count (see :mod:`kvcalc.hfconfig.weights`).

Each family is read as transformers builds it (checked on the meta device): Llama 4's ViT and
pixel-shuffle adapter, SigLIP (Gemma 3), Pixtral (Mistral 3), Qwen3-VL's tower (Qwen3-VL,
Qwen3.5/3.6: ``vision_config.model_type`` ``qwen3_vl``, ``qwen3_5``, ``qwen3_5_moe``), Qwen2.5-VL's
(``model_type`` ``qwen2_5_vl``; its published ``vision_config`` names no model type) and Gemma 4's
(``gemma4_vision``). Any other tower is noted as not counted.
"""

from __future__ import annotations

from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import VisionWeights

#: ``vision_config.model_type`` of the Qwen3-VL tower (Qwen3.5/3.6 reuse it)
_QWEN3_VL = {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen3_vl_vision",
             "qwen3_vl_moe_vision", "qwen3_5_vision", "qwen3_5_moe_vision"}  # fmt: skip


def read_vision(
    r: ConfigReader, model_type: str, text_hidden: int, notes: list[str]
) -> VisionWeights | None:
    v = r.mapping("vision_config") if r.has("vision_config") else None
    if v is None:
        return None
    vr = ConfigReader(v, source=f"{r.source}: vision_config")
    vision_type = str(vr.str("model_type", "") or "")
    family = {"siglip_vision_model": "siglip", "pixtral": "pixtral"}.get(vision_type)
    if family is not None:
        return VisionWeights(
            family=family,
            hidden_size=vr.int("hidden_size"),
            intermediate_size=vr.int("intermediate_size"),
            num_layers=vr.int("num_hidden_layers"),
            image_size=vr.int("image_size"),
            patch_size=vr.int("patch_size"),
            num_channels=vr.int("num_channels", default=3),
            text_hidden_size=text_hidden,
            projector_bias=r.bool("multimodal_projector_bias", False),
            spatial_merge_size=r.int("spatial_merge_size", default=2) if family == "pixtral" else 1,
        )
    if vision_type in _QWEN3_VL:
        return VisionWeights(
            family="qwen3_vl",
            hidden_size=vr.int("hidden_size"),
            intermediate_size=vr.int("intermediate_size"),
            num_layers=vr.int("depth"),
            image_size=0,
            patch_size=vr.int("patch_size"),
            num_channels=vr.int("in_channels", default=3),
            temporal_patch_size=vr.int("temporal_patch_size", default=2),
            num_positions=vr.int("num_position_embeddings"),
            spatial_merge_size=vr.int("spatial_merge_size", default=2),
            projector_output_dim=vr.int("out_hidden_size"),
            deepstack_layers=len(vr.index_list("deepstack_visual_indexes") or ()),
            head_dim=vr.int("hidden_size") // max(1, vr.int("num_heads", default=16)),
            text_hidden_size=text_hidden,
        )
    if model_type == "qwen2_5_vl" and vision_type in ("", "qwen2_5_vl"):
        return VisionWeights(
            family="qwen2_5_vl",
            hidden_size=vr.int("hidden_size"),
            intermediate_size=vr.int("intermediate_size"),
            num_layers=vr.int("depth"),
            image_size=0,
            patch_size=vr.int("patch_size"),
            num_channels=vr.int("in_chans", "in_channels", default=3),
            temporal_patch_size=vr.int("temporal_patch_size", default=2),
            spatial_merge_size=vr.int("spatial_merge_size", default=2),
            projector_output_dim=vr.int("out_hidden_size"),
            head_dim=vr.int("hidden_size") // max(1, vr.int("num_heads", default=16)),
            text_hidden_size=text_hidden,
        )
    if vision_type == "gemma4_vision":
        return VisionWeights(
            family="gemma4",
            hidden_size=vr.int("hidden_size"),
            intermediate_size=vr.int("intermediate_size"),
            num_layers=vr.int("num_hidden_layers"),
            image_size=0,
            patch_size=vr.int("patch_size"),
            num_channels=3,
            num_positions=vr.int("position_embedding_size"),
            head_dim=vr.int("head_dim"),
            text_hidden_size=text_hidden,
            default_output_length=vr.int("default_output_length", default=0),
            audio=r.has("audio_config"),
        )
    if not model_type.startswith("llama4"):
        notes.append(f"vision tower of model_type {model_type!r} is not counted")
        return None
    ratio = vr.value("pixel_shuffle_ratio", 0.5)
    return VisionWeights(
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        num_layers=vr.int("num_hidden_layers"),
        image_size=vr.int("image_size"),
        patch_size=vr.int("patch_size"),
        num_channels=vr.int("num_channels", default=3),
        pixel_shuffle_ratio=float(ratio)
        if isinstance(ratio, (int, float)) and 0 < ratio <= 1
        else 0.5,
        projector_input_dim=vr.int("projector_input_dim"),
        projector_output_dim=vr.int("projector_output_dim"),
        vision_output_dim=vr.int("vision_output_dim"),
        text_hidden_size=text_hidden,
        projector_bias=vr.bool("multi_modal_projector_bias", False),
    )
