"""Vision towers from ``vision_config``, for the parameter count (see :mod:`kvcalc.hfconfig.weights`).

Each family is read as transformers builds it (checked on the meta device): Llama 4's ViT and
pixel-shuffle adapter, SigLIP (Gemma 3), Pixtral (Mistral 3), Qwen3-VL's tower (Qwen3-VL,
Qwen3.5/3.6: ``vision_config.model_type`` ``qwen3_vl``, ``qwen3_5``, ``qwen3_5_moe``), Qwen2.5-VL's
(``model_type`` ``qwen2_5_vl``; its published ``vision_config`` names no model type), Qwen2-VL's
(``qwen2_vl``, as vLLM 0.33's ``qwen2_vl.py`` builds it), GLM-4.1V's and GLM-4.5V's (``glm4v``,
``glm4v_moe``: ``glm4_1v.py``) and Gemma 4's (``gemma4_vision``). Any other tower is noted as not counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import weights_aud2 as aud2
from kvcalc.hfconfig import weights_mmremote as mmremote
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import VisionWeights

#: LLaVA's model types: the tower is CLIP or SigLIP (``vision_config.model_type``)
_LLAVA = {"llava", "llava_next", "llava_next_video", "llava_onevision"}
_LLAVA_TOWERS = {"clip_vision_model": "clip", "siglip_vision_model": "siglip"}
#: Idefics3's and SmolVLM's model types → their tower's ``vision_config.model_type``
_IDEFICS3 = {"idefics3": "idefics3_vision", "smolvlm": "smolvlm_vision"}
#: MiniCPM-V 4.6's and 4.7's model types → their tower's ``vision_config.model_type``
_MINICPMV = {"minicpmv4_6": "minicpmv4_6_vision", "minicpmv4_7": "minicpmv4_7_vision"}
#: GLM-4.1V's and GLM-4.5V's tower: ``vision_config.model_type``, and the text model types whose
#: ``vision_config`` names none
_GLM4V = {"glm4v", "glm4v_vision", "glm4v_moe", "glm4v_moe_vision"}
_GLM4V_TEXT = {"glm4v", "glm4v_text", "glm4v_moe", "glm4v_moe_text"}
#: ``vision_config.model_type`` of the Qwen3-VL tower (Qwen3.5/3.6 reuse it)
_QWEN3_VL = {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen3_vl_vision",
             "qwen3_vl_moe_vision", "qwen3_5_vision", "qwen3_5_moe_vision"}  # fmt: skip


def read_vision(
    r: ConfigReader, model_type: str, text_hidden: int, notes: list[str]
) -> VisionWeights | None:
    if r.raw.get("model_type") == "qwen2_audio":  # an audio tower, no vision_config
        return _qwen2_audio(r, text_hidden)
    if r.raw.get("model_type") in ("qwen2_5_omni", "qwen3_omni_moe"):  # vision and audio towers
        return _omni(r, text_hidden)
    if r.raw.get("model_type") in aud2.TOWERS:  # audio towers (weights_aud2.py)
        return aud2.TOWERS[str(r.raw.get("model_type"))](r, text_hidden)
    if r.raw.get("model_type") in mmremote.TOWERS:  # remote-code towers without a vision_config
        return mmremote.TOWERS[str(r.raw.get("model_type"))](r, text_hidden)
    if r.raw.get("model_type") == "muse_glimmer":  # its own encoder, adapter and projection
        from kvcalc.hfconfig.weights_mmmla import muse_glimmer_tower

        return muse_glimmer_tower(r, text_hidden)
    if r.raw.get("model_type") == "bagel":  # its tower under vit_config
        from kvcalc.hfconfig.weights_mmmla import bagel_tower

        return bagel_tower(r, text_hidden)
    v = r.mapping("vision_config") if r.has("vision_config") else None
    if v is None:
        return None
    vr = ConfigReader(v, source=f"{r.source}: vision_config")
    vision_type = str(vr.str("model_type", "") or "")
    top_type = r.raw.get("model_type")
    if top_type in _LLAVA:
        return _llava(r, vr, str(top_type), vision_type, text_hidden)
    reader = _TOWER_READERS.get(str(top_type))
    if reader is not None:
        return reader(r, vr, vision_type, text_hidden)
    if top_type == "chatglm":
        return _glm4v_9b(r, vr, text_hidden)
    family = {"siglip_vision_model": "siglip", "pixtral": "pixtral"}.get(vision_type)
    if family is not None:
        total = vr.int("num_hidden_layers")
        # LightOnOCR (lightonocr.py, Mistral 3's init_vision_tower_for_mistral3): the Pixtral
        # tower up to the deepest vision_feature_layer, as LLaVA's
        lighton = top_type == "lighton_ocr" and family == "pixtral"
        return VisionWeights(
            family=family,
            hidden_size=vr.int("hidden_size"),
            intermediate_size=vr.int("intermediate_size"),
            num_layers=_feature_depth(r, total, -1)[0] if lighton else total,
            image_size=vr.int("image_size"),
            patch_size=vr.int("patch_size"),
            num_channels=vr.int("num_channels", default=3),
            text_hidden_size=text_hidden,
            projector_bias=r.bool("multimodal_projector_bias", False),
            spatial_merge_size=r.int("spatial_merge_size", default=2) if family == "pixtral" else 1,
            # Pixtral's axial RoPE (its inv_freq buffers): head_dim, else hidden / heads
            # (PixtralVisionConfig's 16 heads where the config names none)
            head_dim=(
                vr.int("head_dim", default=0, minimum=0)
                or vr.int("hidden_size") // vr.int("num_attention_heads", default=16)
            )
            if family == "pixtral"
            else 0,
        )
    if vision_type in _QWEN3_VL:
        return _video_patch_tower(
            vr,
            family="qwen3_vl",
            hidden_size=vr.int("hidden_size"),
            intermediate_size=vr.int("intermediate_size"),
            num_positions=vr.int("num_position_embeddings"),
            projector_output_dim=vr.int("out_hidden_size"),
            deepstack_layers=len(vr.index_list("deepstack_visual_indexes") or ()),
            head_dim=vr.int("hidden_size") // max(1, vr.int("num_heads", default=16)),
            num_heads=vr.int("num_heads", default=16),
            text_hidden_size=text_hidden,
        )
    # vLLM 0.33 hyperclovax_vision_v2.py: Qwen2.5-VL's Qwen2_5_VisionTransformer, then
    # mm_projector, a biased nn.Linear(out_hidden_size, the text hidden size) whole on every rank
    if top_type == "hyperclovax_vision_v2":
        return qwen2_5_vl_tower(vr, "hcx_vision_v2", text_hidden, projector_bias=True)
    if model_type == "qwen2_5_vl" and vision_type in ("", "qwen2_5_vl"):
        return qwen2_5_vl_tower(vr, "qwen2_5_vl", text_hidden, heads=False)
    if vision_type == "exaone4_5_vision":
        # vLLM 0.33 exaone4_5.py: Qwen2.5-VL's tower (Qwen2_5_VisionTransformer) with its blocks
        # rebuilt: grouped-query attention (num_key_value_heads), the gated biased MLP
        # intermediate_size wide, RMSNorms; the merger into out_hidden_size
        heads = vr.int("num_heads")
        return _video_patch_tower(
            vr,
            family="exaone4_5",
            hidden_size=vr.int("hidden_size"),
            intermediate_size=vr.int("intermediate_size"),
            projector_output_dim=vr.int("out_hidden_size"),
            head_dim=vr.int("hidden_size") // heads,
            num_heads=heads,
            num_kv_heads=vr.int("num_key_value_heads", default=heads),
            text_hidden_size=text_hidden,
        )
    if vision_type in ("qwen2_vl", "qwen2_vl_vision") or (
        model_type in ("qwen2_vl", "qwen2_vl_text") and vision_type == ""
    ):
        # vLLM 0.33 qwen2_vl.py: blocks embed_dim wide, MLP int(embed_dim · mlp_ratio), the
        # merger into hidden_size (the text width); in_channels (default 3) as vLLM reads it
        width = vr.int("embed_dim")
        ratio = vr.value("mlp_ratio", 4)
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio <= 0:
            raise vr.bad(vr.path("mlp_ratio"), ratio, "a positive number")
        return _video_patch_tower(
            vr,
            family="qwen2_vl",
            hidden_size=width,
            intermediate_size=int(width * ratio),
            projector_output_dim=vr.int("hidden_size"),
            head_dim=width // max(1, vr.int("num_heads", default=16)),
            num_heads=vr.int("num_heads", default=16),
            text_hidden_size=text_hidden,
        )
    if vision_type in _GLM4V or (model_type in _GLM4V_TEXT and vision_type == ""):
        # vLLM 0.33 glm4_1v.py: blocks hidden_size wide with an out_hidden_size-wide MLP, the
        # merger's MLP intermediate_size wide, (image_size / patch_size)² position rows
        width, image, patch = vr.int("hidden_size"), vr.int("image_size"), vr.int("patch_size")
        return _video_patch_tower(
            vr,
            family="glm4v",
            hidden_size=width,
            intermediate_size=vr.int("intermediate_size"),
            image_size=image,
            num_positions=(image // patch) ** 2,
            projector_output_dim=vr.int("out_hidden_size"),
            head_dim=width // max(1, vr.int("num_heads", default=12)),
            num_heads=vr.int("num_heads", default=12),
            text_hidden_size=text_hidden,
        )
    if vision_type == "glm_ocr_vision":
        # vLLM 0.33 glm_ocr.py GlmOcrVisionTransformer: GLM-4.1V's without its position table and
        # post-conv norm; blocks with q/k norms and a biased gated MLP intermediate_size wide; the
        # merger's MLP as wide as the text model's (context_dim=text_config.intermediate_size)
        width, heads = vr.int("hidden_size"), vr.int("num_heads")
        return _video_patch_tower(
            vr,
            family="glm_ocr",
            hidden_size=width,
            intermediate_size=vr.int("intermediate_size"),
            projector_output_dim=vr.int("out_hidden_size"),
            projector_input_dim=r.int("intermediate_size"),
            head_dim=width // heads,
            num_heads=heads,
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
    heads = vr.int("num_attention_heads", default=0)
    return VisionWeights(
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        num_layers=vr.int("num_hidden_layers"),
        head_dim=vr.int("hidden_size") // heads if heads else 0,
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


def _llava(
    r: ConfigReader, vr: ConfigReader, top_type: str, vision_type: str, text_hidden: int
) -> VisionWeights:
    """LLaVA's tower as vLLM 0.33 builds it (``llava.py`` ``init_vision_tower_for_llava``): CLIP or
    SigLIP up to the deepest ``vision_feature_layer`` (``get_layer_index``: -2 of 24 is 23
    layers), no post-layernorm (``require_post_norm=False``); the projector from the tower's width
    (times the feature layers) into the text width; LLaVA-NeXT's and OneVision's
    ``image_newline``. LLaVA-NeXT-Video (``llava_next_video.py``) builds its projector of
    ``nn.Linear``s (whole on every rank) and no ``image_newline`` (its loader skips it)."""
    tower = _LLAVA_TOWERS.get(vision_type)
    if tower is None:
        raise ConfigError(
            f"{r.source}: vision_config.model_type {vision_type!r}: kvcalc counts LLaVA's CLIP "
            "and SigLIP towers only",
            code="config-unverified",
        )
    depth, layers = _feature_depth(r, vr.int("num_hidden_layers"), -2)
    hv = vr.int("hidden_size")
    return VisionWeights(
        family="llava",
        tower=tower,
        hidden_size=hv,
        intermediate_size=vr.int("intermediate_size"),
        num_layers=depth,
        image_size=vr.int("image_size"),
        patch_size=vr.int("patch_size"),
        num_channels=vr.int("num_channels", default=3),
        num_heads=vr.int("num_attention_heads"),
        projector_input_dim=hv * (len(layers) if isinstance(layers, list) else 1),
        projector_bias=r.bool("multimodal_projector_bias", True),
        projector_replicated=top_type in ("llava_onevision", "llava_next_video"),
        image_newline=top_type in ("llava_next", "llava_onevision"),
        text_hidden_size=text_hidden,
    )


def _feature_depth(r: ConfigReader, total: int, default: int) -> tuple[int, object]:
    """The layers vLLM 0.33 builds of a tower of ``total``: up to the deepest
    ``vision_feature_layer`` (``get_layer_index``: -1 is all, -2 one fewer), and the value read."""
    layers = r.value("vision_feature_layer", default)
    chosen = layers if isinstance(layers, list) else [layers]
    if not chosen or not all(isinstance(x, int) and not isinstance(x, bool) for x in chosen):
        raise r.bad(r.path("vision_feature_layer"), layers, "an integer or a list of integers")
    depth = max(total + x + 1 if x < 0 else x for x in chosen)
    if not 0 < depth <= total:
        raise r.bad(r.path("vision_feature_layer"), layers, f"a layer of the {total}")
    return depth, layers


def _omni(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """The thinkers vLLM 0.33 builds for Qwen2.5-Omni (``qwen2_5_omni_thinker.py``: Qwen2.5-VL's
    tower) and Qwen3-Omni-MoE (``qwen3_omni_moe_thinker.py``: ``Qwen3Omni_VisionTransformer``,
    Qwen3-VL's blocks, DeepStack mergers and a learned position table of ``(image_size /
    patch_size)²`` rows) on ``thinker_config.vision_config``, marked for image and video, and
    beside each (``companion``, marked for audio) the audio encoder on its ``audio_config``
    (:mod:`kvcalc.hfconfig.weights_aud2`)."""
    thinker = r.mapping("thinker_config") if r.has("thinker_config") else None
    v = thinker.get("vision_config") if thinker is not None else None
    if thinker is None or not isinstance(v, Mapping):
        raise ConfigError(f"{r.source}: no thinker_config.vision_config: the Omni towers are "
                          "sized from it", code="config-invalid")  # fmt: skip
    tr = ConfigReader(thinker, source=f"{r.source}: thinker_config")
    vr = ConfigReader(v, source=f"{tr.source}: vision_config")
    if r.raw.get("model_type") == "qwen2_5_omni":
        audio = aud2.qwen2_5_omni_audio(tr, text_hidden)
        return qwen2_5_vl_tower(vr, "qwen2_5_omni", text_hidden, companion=audio)
    heads = vr.int("num_heads", default=16)
    grid = vr.int("image_size") // vr.int("patch_size")
    return _video_patch_tower(
        vr,
        family="qwen3_omni",
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        num_positions=grid * grid,
        projector_output_dim=vr.int("out_hidden_size"),
        deepstack_layers=len(vr.index_list("deepstack_visual_indexes") or ()),
        head_dim=vr.int("hidden_size") // max(1, heads),
        num_heads=heads,
        text_hidden_size=text_hidden,
        companion=aud2.qwen3_omni_audio(tr, text_hidden),
    )


def qwen2_5_vl_tower(
    vr: ConfigReader, family: str, text_hidden: int, *, heads: bool = True, **fields: Any
) -> VisionWeights:
    """Qwen2.5-VL's ``Qwen2_5_VisionTransformer`` read from its ``vision_config``, its merger into
    ``out_hidden_size`` (``heads``: the tower's heads named, for the TP check of its attention)."""
    n = vr.int("num_heads", default=16)
    return _video_patch_tower(
        vr,
        channels=("in_chans", "in_channels"),
        family=family,
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        projector_output_dim=vr.int("out_hidden_size"),
        head_dim=vr.int("hidden_size") // max(1, n),
        text_hidden_size=text_hidden,
        **({"num_heads": n} if heads else {}),
        **fields,
    )


def _video_patch_tower(
    vr: ConfigReader, *, channels: tuple[str, ...] = ("in_channels",), **fields: Any
) -> VisionWeights:
    """A Qwen2-VL-style tower read from its ``vision_config``: ``depth`` blocks over 3D patches
    (``patch_size`` square, ``temporal_patch_size`` frames), merged ``spatial_merge_size``² to
    a token, no fixed image size unless the family gives one; with the family's own fields."""
    fields = {"image_size": 0, **fields}
    return VisionWeights(
        num_layers=vr.int("depth"),
        patch_size=vr.int("patch_size"),
        num_channels=vr.int(*channels, default=3),
        temporal_patch_size=vr.int("temporal_patch_size", default=2),
        spatial_merge_size=vr.int("spatial_merge_size", default=2),
        **fields,
    )


def _siglip(vr: ConfigReader, **fields: Any) -> VisionWeights:
    """A SigLIP tower read from its ``vision_config`` as transformers' ``SiglipVisionConfig`` names
    it (every layer, patches of ``patch_size`` over ``image_size``), with the family's own fields."""
    fields = {"num_layers": vr.int("num_hidden_layers"), **fields}
    return VisionWeights(
        tower="siglip",
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        image_size=vr.int("image_size"),
        patch_size=vr.int("patch_size"),
        num_channels=vr.int("num_channels", default=3),
        num_heads=vr.int("num_attention_heads"),
        **fields,
    )


def _cohere2_vision(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """Command-A Vision's tower as vLLM 0.33 builds it (``cohere2_vision.py``): SigLIP whole
    (``SiglipVisionModel``: every layer, so its post-LayerNorm; no pooling head), and the
    projector after a ``downsample_factor``² pixel shuffle: ``linear_1`` merged gate/up (``hv ·
    factor²`` → 2 × ``alignment_intermediate_size / 2``, column-split) and ``linear_2`` (→ the text
    width, row-split), both biased."""
    _only(r, vision_type, "siglip_vision_model", "Command-A Vision", shown="SigLIP")
    hv, factor = vr.int("hidden_size"), r.int("downsample_factor", default=2)
    alignment = r.int("alignment_intermediate_size", default=36864)
    if alignment % 2:
        raise r.bad(r.path("alignment_intermediate_size"), alignment, "an even width (gate and up)")
    return _siglip(
        vr,
        family="cohere2_vision",
        projector_input_dim=hv * factor**2,
        projector_output_dim=alignment // 2,
        projector_bias=True,
        text_hidden_size=text_hidden,
    )


def _idefics3(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """Idefics3's and SmolVLM's tower as vLLM 0.33 builds it (``idefics3.py``: SmolVLM's class is
    Idefics3's): ``Idefics2VisionTransformer`` whole (every layer, the post-LayerNorm), and the
    connector's unbiased projection from ``hidden_size · scale_factor²`` into the text width."""
    top = str(r.raw.get("model_type"))
    _only(r, vision_type, _IDEFICS3[top], top)
    hv = vr.int("hidden_size")
    return _siglip(
        vr,
        family="idefics3",
        projector_input_dim=hv * r.int("scale_factor", default=2) ** 2,
        text_hidden_size=text_hidden,
    )


def _lfm2_vl(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """LFM2-VL's tower as vLLM 0.33 builds it (``lfm2_vl.py``, ``lfm2_siglip2.py``): SigLIP2 whole
    (``Siglip2Model``: every layer, the post-LayerNorm), its biased linear patch embedding and
    ``num_patches`` position rows; the projector after a ``downsample_factor``² pixel shuffle: a
    LayerNorm (``projector_use_layernorm``), ``linear_1`` (→ ``projector_hidden_size``) and
    ``linear_2`` (→ text), ``ReplicatedLinear``s biased as ``projector_bias`` says, whole on every
    rank."""
    if vision_type != "siglip2_vision_model":
        raise ConfigError(
            f"{r.source}: vision_config.model_type {vision_type!r}: vLLM 0.33's lfm2_vl.py builds "
            "the siglip2_vision_model tower only",
            code="config-invalid",
        )
    hv = vr.int("hidden_size")
    return _siglip2(
        vr,
        family="lfm2_vl",
        num_positions=vr.int("num_patches", default=256),
        projector_input_dim=hv * r.int("downsample_factor", default=2) ** 2,
        projector_output_dim=r.int("projector_hidden_size", default=2560),
        projector_bias=r.bool("projector_bias", True),
        projector_norm=r.bool("projector_use_layernorm", True),
        text_hidden_size=text_hidden,
    )


def _internvl(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """InternVL's tower as vLLM 0.33 builds it (``interns1.py``, ``interns1_vit.py``
    ``InternS1VisionModel``, every ``num_hidden_layers`` layer): the class token, an optional mask
    token, the biased patch convolution, ``np + 1`` absolute positions; per layer ``nn.Linear``
    q/k/v (``attention_bias``) and a biased output projection (whole on every rank), optional q/k
    RMSNorms, a biased fc1/fc2 MLP split over TP, two norms (``norm_type``) and two layer-scale
    vectors; a final LayerNorm unless ``use_mean_pooling``. The projector: a LayerNorm on
    ``hidden_size · (1 / downsample_ratio)²``, ``linear_1`` and ``linear_2`` (biased
    ``nn.Linear``s, whole on every rank)."""
    _only(r, vision_type, "internvl_vision", "InternVL")
    sizes = {}
    for key in ("image_size", "patch_size"):
        value = vr.value(key)
        pair = value if isinstance(value, list) else [value, value]
        if len(pair) != 2 or not all(isinstance(x, int) and x > 0 for x in pair):
            raise vr.bad(vr.path(key), value, "a size or a [height, width] pair")
        sizes[key] = pair
    patches = (sizes["image_size"][0] // sizes["patch_size"][0]) * (
        sizes["image_size"][1] // sizes["patch_size"][1]
    )
    norm = vr.str("norm_type", "layer_norm")
    if norm not in ("layer_norm", "rms_norm"):
        raise vr.bad(vr.path("norm_type"), norm, "layer_norm or rms_norm")
    ratio = r.value("downsample_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise r.bad(r.path("downsample_ratio"), ratio, "a ratio in (0, 1]")
    hv = vr.int("hidden_size")
    return VisionWeights(
        family="internvl",
        tower=norm,
        hidden_size=hv,
        intermediate_size=vr.int("intermediate_size"),
        num_layers=vr.int("num_hidden_layers"),
        image_size=0,
        patch_size=sizes["patch_size"][0] * sizes["patch_size"][1],
        num_channels=vr.int("num_channels", default=3),
        num_positions=patches + 1 if vr.bool("use_absolute_position_embeddings", True) else 0,
        attention_bias=vr.bool("attention_bias", False),
        qk_norm=vr.bool("use_qk_norm", False),
        mask_token=vr.bool("use_mask_token", False),
        projector_norm=not vr.bool("use_mean_pooling", True),
        projector_input_dim=hv * int(1 / ratio) ** 2,
        text_hidden_size=text_hidden,
    )


def _paligemma(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """PaliGemma's tower as vLLM 0.33 builds it (``paligemma.py``): SigLIP whole
    (``SiglipVisionModel``: every layer, the post-LayerNorm, int64 ``position_ids``; no pooling
    head) and the projector, one biased ``nn.Linear`` from the tower's width into
    ``vision_config.projection_dim`` (whole on every rank)."""
    _only(r, vision_type, "siglip_vision_model", "PaliGemma", shown="SigLIP")
    return _siglip(
        vr,
        family="paligemma",
        projector_output_dim=vr.int("projection_dim", default=2048),
        text_hidden_size=text_hidden,
    )


def _qianfan_ocr(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """Qianfan-OCR's tower as vLLM 0.33 builds it (``qianfan_ocr.py`` on ``internvl.py``'s
    ``InternVLChatModel``): :func:`_intern_vit`, its keys spelled as transformers 5.20's
    ``QianfanOCRVisionConfig`` spells them (``attention_bias``, ``use_qk_norm``)."""
    _only(r, vision_type, "qianfan_ocr_vision", "Qianfan-OCR")
    return _intern_vit(
        r, vr, text_hidden,
        attention_bias=vr.bool("attention_bias", True), qk_norm=vr.bool("use_qk_norm", False),
        norm=vr.str("norm_type", "layer_norm"),
    )  # fmt: skip


def _internvl_chat(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """InternVL chat's tower as vLLM 0.33 builds it (``internvl.py``'s ``InternVLChatModel``):
    :func:`_intern_vit`, its keys spelled as the checkpoints' remote ``InternVisionConfig``
    (``configuration_intern_vit.py``) spells them — ``qkv_bias``, ``qk_normalization``,
    ``norm_type``, which ``intern_vit.py`` reads as attributes: a config without them is refused
    (their class defaults are remote code kvcalc has not read)."""
    _only(r, vision_type, "intern_vit_6b", "InternVL chat")
    missing = [k for k in ("qkv_bias", "qk_normalization", "norm_type") if vr.raw.get(k) is None]
    if missing:
        raise ConfigError(
            f"{r.source}: vision_config has no {', '.join(missing)}: vLLM 0.33's intern_vit.py "
            "reads them from the checkpoint's remote InternVisionConfig, whose defaults kvcalc "
            "does not assume",
            hint="give them as the published config.json does",
            code="config-unverified",
        )
    return _intern_vit(
        r, vr, text_hidden,
        attention_bias=vr.bool("qkv_bias"), qk_norm=vr.bool("qk_normalization"),
        norm=vr.str("norm_type"),
    )  # fmt: skip


def _nvlm_d(r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int) -> VisionWeights:
    """NVLM-D's tower as vLLM 0.33 builds it (``nvlm_d.py``'s ``NVLM_D_Model`` on
    ``InternVLChatModel``): InternVL chat's (:func:`_internvl_chat`) with 7 padding heads
    (``num_dummy_heads=7``: qkv, the q/k norms and proj ``(heads + 7) · head_dim`` wide, split
    where TP divides ``heads + 7``), and its own ``mlp1``: the LayerNorm, then two unbiased
    ``nn.Linear``s through the text model's ``intermediate_size``."""
    v = _internvl_chat(r, vr, vision_type, text_hidden)
    return replace(v, dummy_heads=7, projector_output_dim=r.int("intermediate_size"))


def _intern_vit(
    r: ConfigReader,
    vr: ConfigReader,
    text_hidden: int,
    *,
    attention_bias: bool,
    qk_norm: bool,
    norm: str,
) -> VisionWeights:
    """InternViT and ``mlp1`` as vLLM 0.33 builds them (``internvl.py``'s ``InternVLChatModel``,
    ``intern_vit.py``'s ``InternVisionModel``): the class token, the biased patch convolution and
    ``(image_size / patch_size)² + 1`` positions (the first side of each size:
    ``_add_intern_vit_fields``), the layers up to ``select_layer`` (``L + select_layer + 1`` when
    negative); per layer a fused ``QKVParallelLinear`` (biased where the config says) and a biased
    ``RowParallelLinear`` projection, optional q/k RMSNorms whole on every rank, the biased
    fc1/fc2 split over TP, two ``norm_type`` norms and two layer-scale vectors; no final norm.
    ``mlp1``: a LayerNorm on ``hidden_size · (1 / downsample_ratio)²`` and two biased
    ``nn.Linear``s, whole on every rank."""
    sizes = {}
    for key in ("image_size", "patch_size"):
        value = vr.value(key)
        side = value[0] if isinstance(value, list) and value else value
        if isinstance(side, bool) or not isinstance(side, int) or side <= 0:
            raise vr.bad(vr.path(key), value, "a size or a [height, width] pair")
        sizes[key] = side
    if norm not in ("layer_norm", "rms_norm"):
        raise vr.bad(vr.path("norm_type"), norm, "layer_norm or rms_norm")
    ratio = r.value("downsample_ratio", 0.5)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise r.bad(r.path("downsample_ratio"), ratio, "a ratio in (0, 1]")
    total, select = vr.int("num_hidden_layers"), r.raw.get("select_layer")
    if isinstance(select, bool) or not isinstance(select, int) or not -total <= select < total:
        raise r.bad("select_layer", select, f"a layer index in [-{total}, {total})")
    hv = vr.int("hidden_size")
    return VisionWeights(
        family="intern_vit",
        tower=norm,
        hidden_size=hv,
        intermediate_size=vr.int("intermediate_size"),
        num_layers=total + select + 1 if select < 0 else select + 1,
        image_size=sizes["image_size"],
        patch_size=sizes["patch_size"],
        num_channels=3,  # InternVisionEmbeddings: in_channels=3 whatever num_channels says
        num_heads=vr.int("num_attention_heads"),
        attention_bias=attention_bias,
        qk_norm=qk_norm,
        projector_input_dim=hv * int(1 / ratio) ** 2,
        text_hidden_size=text_hidden,
    )


def _paddleocr_vl(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """PaddleOCR-VL's tower as vLLM 0.33 builds it (``paddleocr_vl.py``'s own
    ``SiglipVisionModel``): SigLIP whole (every layer, a fused qkv, the post-LayerNorm, int64
    ``position_ids``) with a 2D RoPE (``SigLIPRotaryEmbedding(head_dim / 2)``: an fp32
    ``inv_freq`` of ``head_dim / 4``), and ``mlp_AR``: a LayerNorm on the tower's width, then two
    biased ``nn.Linear``s from ``hidden_size · 2²`` (its ``merge_kernel_size`` is fixed at 2 × 2,
    whatever ``spatial_merge_size`` says), whole on every rank."""
    _only(r, vision_type, "paddleocr_vl_vision", "PaddleOCR-VL")
    hv, heads = vr.int("hidden_size"), vr.int("num_attention_heads")
    return _siglip(
        vr,
        family="paddleocr_vl",
        head_dim=hv // heads,
        projector_input_dim=hv * 2 * 2,
        text_hidden_size=text_hidden,
    )


def _minicpmv(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """MiniCPM-V 4.6's and 4.7's tower as vLLM 0.33 builds it (``minicpmv4_6.py``; 4.7's class
    subclasses it): ``Idefics2VisionTransformer`` (every layer but the last where 4.6's
    ``drop_vision_last_layer`` says so, never for 4.7; the post-LayerNorm, no ``position_ids``
    buffer); ``vit_merger``, one window-attention block (a biased fused qkv and out_proj split
    over TP, a LayerNorm) and its MLP on the 2 × 2 window (a LayerNorm on ``4 · hidden_size``, two
    biased ``nn.Linear``s ``4 · intermediate_size`` wide); ``merger``, one downsample MLP (its
    ``times`` left at 1 whatever ``merger_times`` says: a LayerNorm and two biased ``nn.Linear``s
    from ``4 · hidden_size`` into the text width); both whole except the window attention."""
    top = str(r.raw.get("model_type"))
    _only(r, vision_type, _MINICPMV[top], top)
    layers = vr.int("num_hidden_layers")
    drop = top == "minicpmv4_6" and r.bool("drop_vision_last_layer", False)
    return _siglip(
        vr,
        family="minicpmv",
        num_layers=layers - 1 if drop else layers,
        projector_input_dim=vr.int("hidden_size") * 4,
        text_hidden_size=text_hidden,
    )


def _step3_vl(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """Step3-VL's tower as vLLM 0.33 builds it (``step3_vl.py``): ``Step3VisionTransformer`` (the
    class embedding, the biased patch convolution, ``(image_size / patch_size)² + 1`` positions
    and their int64 ``position_ids``; every layer a biased fused qkv and out_proj and a biased
    fc1/fc2, split over TP, and two LayerNorms; no pre- or post-norm), then the two biased
    convolutions ``vit_downsampler`` (2 × 2, ``hidden_size`` → ``output_hidden_size``) and
    ``vit_downsampler2`` (3 × 3, → ``2 · output_hidden_size``) and ``vit_large_projector`` into
    the text width (biased with ``projector_bias``), whole on every rank."""
    _only(r, vision_type, "step3_vision_encoder", "Step3-VL")
    return _siglip(
        vr,
        family="step3_vl",
        projector_output_dim=vr.int("output_hidden_size"),
        projector_bias=r.bool("projector_bias", True),
        text_hidden_size=text_hidden,
    )


def _blip2(r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int) -> VisionWeights:
    """BLIP-2's tower as vLLM 0.33 builds it (``blip2.py``): ``BlipVisionModel`` whole (the class
    embedding, the biased patch convolution, ``(image_size / patch_size)² + 1`` positions; per
    layer a fused qkv (``qkv_bias``) and a biased projection, a biased fc1/fc2, split over TP, two
    LayerNorms; the post-LayerNorm), the ``num_query_tokens`` learned queries, the Q-Former
    (``Blip2QFormerModel``: an embedding LayerNorm; per layer biased ``nn.Linear`` query/key/value
    and output dense with a LayerNorm, a cross-attention on the tower's width every
    ``cross_attention_frequency`` layers, the query MLP with a LayerNorm; whole on every rank) and
    the biased ``language_projection`` into the text width (whole)."""
    _only(r, vision_type, "blip_2_vision_model", "BLIP-2")
    q = r.mapping("qformer_config") if r.has("qformer_config") else None
    if q is None:
        raise ConfigError(f"{r.source}: no qformer_config: BLIP-2's Q-Former is sized from it",
                          code="config-invalid")  # fmt: skip
    qr = ConfigReader(q, source=f"{r.source}: qformer_config")
    kind = qr.str("position_embedding_type", "absolute")
    if kind != "absolute":  # blip2.py raises NotImplementedError for any other
        raise qr.bad(qr.path("position_embedding_type"), kind, "absolute (vLLM 0.33 blip2.py)")
    if qr.int("encoder_hidden_size") != vr.int("hidden_size"):
        raise qr.bad(qr.path("encoder_hidden_size"), qr.int("encoder_hidden_size"),
                     "the tower's hidden_size (recorded so)")  # fmt: skip
    return _siglip(
        vr,
        family="blip2",
        attention_bias=vr.bool("qkv_bias", True),
        query_tokens=r.int("num_query_tokens", default=32),
        qformer_layers=qr.int("num_hidden_layers"),
        qformer_hidden_size=qr.int("hidden_size"),
        qformer_intermediate_size=qr.int("intermediate_size"),
        cross_attention_frequency=qr.int("cross_attention_frequency", default=2),
        text_hidden_size=text_hidden,
    )


def _kimi_vl(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """Kimi-VL's tower as vLLM 0.33 builds it (``kimi_vl.py``, ``moonvit.py``
    ``MoonVitPretrainedModel``): the biased patch convolution, a learned 2D position table
    ``init_pos_emb_height × init_pos_emb_width`` (the 2D RoPE is computed, no buffer); every layer
    two LayerNorms, a biased fused qkv and output projection and a biased fc0/fc1 MLP, split over
    TP; the final LayerNorm. The projector: a LayerNorm on the tower's width, then two biased
    ``ReplicatedLinear``s from ``hidden_size · merge_kernel_size`` (whole on every rank)."""
    _only(r, vision_type, "moonvit", "Kimi-VL")
    kernel = vr.index_list("merge_kernel_size") or (2, 2)
    if len(kernel) != 2:
        raise vr.bad(vr.path("merge_kernel_size"), list(kernel), "a [height, width] pair")
    hv = vr.int("hidden_size")
    return VisionWeights(
        family="kimi_vl",
        hidden_size=hv,
        intermediate_size=vr.int("intermediate_size"),
        num_layers=vr.int("num_hidden_layers"),
        image_size=0,
        patch_size=vr.int("patch_size"),
        num_channels=3,  # MoonVisionPatchEmbed: in_dim 3
        num_positions=vr.int("init_pos_emb_height") * vr.int("init_pos_emb_width"),
        num_heads=vr.int("num_attention_heads"),
        projector_input_dim=hv * kernel[0] * kernel[1],
        text_hidden_size=text_hidden,
    )


def _glm4v_9b(r: ConfigReader, vr: ConfigReader, text_hidden: int) -> VisionWeights:
    """GLM-4V's tower as vLLM 0.33 builds it (``glm4v.py``'s ``EVA2CLIPModel``, on a ``chatglm``
    config with a ``vision_config`` dict): the biased patch convolution, the class embedding,
    ``num_positions`` learned positions; every layer a biased fused qkv and dense and a biased
    fc1/fc2, split over TP, and two LayerNorms; then the biased 2 × 2 convolution into the text
    width, the GLU projector (an unbiased ``ReplicatedLinear``, a LayerNorm, the unbiased gate/up
    pair ``ffn_hidden_size`` wide split by columns, the unbiased down projection by rows) and the
    ``boi``/``eoi`` rows."""
    if r.raw.get("architectures") != ["GLM4VForCausalLM"]:
        raise ConfigError(
            f"{r.source}: a chatglm config with a vision_config: kvcalc counts GLM-4V's "
            "(GLM4VForCausalLM) tower only",
            code="config-unverified",
        )
    return VisionWeights(
        family="eva2clip",
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        num_layers=vr.int("num_hidden_layers"),
        image_size=vr.int("image_size"),
        patch_size=vr.int("patch_size"),
        num_channels=vr.int("in_channels", default=3),
        num_positions=vr.int("num_positions"),
        num_heads=vr.int("num_heads"),
        projector_output_dim=r.int("ffn_hidden_size"),
        text_hidden_size=text_hidden,
    )


def _qwen2_audio(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """Qwen2-Audio's audio tower as vLLM 0.33 builds it (``qwen2_audio.py``: transformers'
    ``Qwen2AudioEncoder`` itself, whole on every rank): two biased convolutions (``num_mel_bins``
    → ``d_model``, kernel 3), ``max_source_positions`` learned positions, every encoder layer
    (q/v/out biased, k not; a biased fc1/fc2 ``encoder_ffn_dim`` wide; two LayerNorms), the final
    LayerNorm; the projector, one biased ``nn.Linear`` into the text width (whole)."""
    a = r.mapping("audio_config") if r.has("audio_config") else None
    if a is None:
        raise ConfigError(f"{r.source}: no audio_config: Qwen2-Audio's tower is sized from it",
                          code="config-invalid")  # fmt: skip
    ar = ConfigReader(a, source=f"{r.source}: audio_config")
    kind = ar.str("model_type", "qwen2_audio_encoder")
    if kind != "qwen2_audio_encoder":
        raise ar.bad(ar.path("model_type"), kind, "qwen2_audio_encoder")
    return VisionWeights(
        family="qwen2_audio",
        hidden_size=ar.int("d_model"),
        intermediate_size=ar.int("encoder_ffn_dim"),
        num_layers=ar.int("encoder_layers"),
        image_size=0,
        patch_size=0,
        num_channels=ar.int("num_mel_bins", default=128),
        num_positions=ar.int("max_source_positions", default=1500),
        text_hidden_size=text_hidden,
    )


#: the towers one function reads, by the config's top-level ``model_type``
def _aria(r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int) -> VisionWeights:
    """Aria's tower as vLLM 0.33 builds it (``aria.py``): ``Idefics2VisionTransformer`` with its
    post-LayerNorm replaced by ``nn.Identity``, then ``AriaProjector``: the learned queries
    (``max_value_projector_patch_to_query_dict`` rows of the tower's width), transformers'
    ``AriaCrossAttention`` (unbiased q/k/v, an ``nn.MultiheadAttention``, a biased output linear,
    two LayerNorms) and a LayerNorm, whole; the unbiased feed-forward (tower → text width by
    columns, text → text by rows)."""
    _only(r, vision_type, "idefics3_vision", "Aria")
    return _siglip(
        vr,
        family="aria",
        projector_input_dim=r.int("max_value_projector_patch_to_query_dict"),
        text_hidden_size=text_hidden,
    )


def _cosmos3_edge(
    r: ConfigReader, vr: ConfigReader, vision_type: str, text_hidden: int
) -> VisionWeights:
    """Cosmos 3 Edge's tower as vLLM 0.33 builds it (``cosmos3_edge.py``): SigLIP2
    (``Siglip2VisionTransformer``: every layer, the post-LayerNorm, its biased linear patch
    embedding and ``num_patches`` position rows), then ``Cosmos3EdgePatchMerger``: a LayerNorm of
    the tower's width, the biased ``linear_fc1`` (``hidden_size · spatial_merge_size²`` →
    ``projector_hidden_size``) by columns and ``linear_fc2`` (→ the text width) by rows."""
    _only(r, vision_type, "cosmos3_edge_vision", "Cosmos 3 Edge")
    return _siglip2(
        vr,
        family="cosmos3_edge",
        num_positions=vr.int("num_patches"),
        projector_input_dim=vr.int("hidden_size") * vr.int("spatial_merge_size") ** 2,
        projector_output_dim=r.int("projector_hidden_size"),
        text_hidden_size=text_hidden,
    )


def _siglip2(vr: ConfigReader, **fields: Any) -> VisionWeights:
    """A SigLIP2 tower (``lfm2_siglip2.py``'s ``Siglip2VisionTransformer``) read from its
    ``vision_config``, with the family's own fields."""
    return VisionWeights(
        tower="siglip2",
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        num_layers=vr.int("num_hidden_layers"),
        image_size=0,
        patch_size=vr.int("patch_size"),
        num_channels=vr.int("num_channels", default=3),
        num_heads=vr.int("num_attention_heads"),
        **fields,
    )


def _only(r: ConfigReader, vision_type: str, expected: str, what: str, *, shown: str = "") -> None:
    """Refuse a ``vision_config`` of another model type than the tower kvcalc counts for this
    model (``what``'s; ``shown``: the tower's name in the message, the model type by default)."""
    if vision_type != expected:
        raise ConfigError(
            f"{r.source}: vision_config.model_type {vision_type!r}: kvcalc counts {what}'s "
            f"{shown or expected} tower only",
            code="config-unverified",
        )


_TOWER_READERS: dict[str, Callable[[ConfigReader, ConfigReader, str, int], VisionWeights]] = {
    "aria": _aria,
    "cosmos3_edge": _cosmos3_edge,
    "cohere2_vision": _cohere2_vision,
    **dict.fromkeys(_IDEFICS3, _idefics3),
    "lfm2_vl": _lfm2_vl,
    "internvl": _internvl,
    "paligemma": _paligemma,
    "qianfan_ocr": _qianfan_ocr,
    "internvl_chat": _internvl_chat,
    "NVLM_D": _nvlm_d,
    "h2ovl_chat": _internvl_chat,
    "paddleocr_vl": _paddleocr_vl,
    **dict.fromkeys(_MINICPMV, _minicpmv),
    "step3_vl": _step3_vl,
    "blip-2": _blip2,
    "kimi_vl": _kimi_vl,
}
