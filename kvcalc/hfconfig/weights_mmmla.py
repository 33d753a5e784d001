"""Towers read from a config section other than ``vision_config`` (see
:mod:`kvcalc.hfconfig.weights_vision`, which dispatches here by the top-level ``model_type``).

BAGEL (``bagel``, vLLM 0.33 ``bagel.py``): the SigLIP tower of ``vit_config`` when
``visual_und`` is true, as ``SiglipVisionModel`` builds it (every layer, the post-LayerNorm, int64
``position_ids``; no pooling head: ``use_head`` is passed as false), 26 layers where the config
says 27 (the model file rewrites ``vit_config.num_hidden_layers`` to match the checkpoint); the
connector (``fc1`` column-split from the tower's width into the text width, ``fc2`` row-split,
both biased) and the frozen 2D sin-cos position table, an fp32 buffer of
``vit_max_num_patch_per_side² × hidden_size``. The VAE and generation path (``visual_gen``)
are not built by vLLM.

MuseGlimmer (``muse_glimmer``, vLLM 0.33 ``muse_glimmer.py``): its ``MuseGlimmerVisionEncoder`` on
``vision_config`` (:func:`muse_glimmer_tower`), then the adapter and the projection.
"""

from __future__ import annotations

from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import VisionWeights


def bagel_tower(r: ConfigReader, text_hidden: int) -> VisionWeights | None:
    """BAGEL's understanding tower as ``bagel.py`` builds it (``None`` without ``visual_und``)."""
    if not r.bool("visual_und", True):  # BagelConfig's default: true
        return None
    v = r.mapping("vit_config") if r.has("vit_config") else None
    if v is None:
        raise r.missing(("vit_config",))
    vr = ConfigReader(v, source=f"{r.source}: vit_config")
    layers = vr.int("num_hidden_layers")
    side = r.int("vit_max_num_patch_per_side", default=70)  # BagelConfig's default
    return VisionWeights(
        family="bagel",
        tower="siglip",
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        num_layers=26 if layers == 27 else layers,
        image_size=vr.int("image_size"),
        patch_size=vr.int("patch_size"),
        num_channels=vr.int("num_channels", default=3),
        num_heads=vr.int("num_attention_heads"),
        sincos_positions=side * side,
        text_hidden_size=text_hidden,
    )


def muse_glimmer_tower(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """MuseGlimmer's vision encoder as ``muse_glimmer.py`` builds it (``MuseGlimmerVisionEncoder``,
    ``MuseGlimmerVisionAdapter``, ``vision_projection``): the unbiased ``conv1_linear``
    (``patch_temporal`` × 3 × ``patch_size``² → ``hidden_size``), the learned
    ``positional_embedding_vlm`` (``pos_emb_height`` × ``pos_emb_width`` rows), ``ln_pre``; per
    block two LayerNorms, a biased fused qkv and ``o_proj`` split over TP where TP divides the
    heads (whole otherwise: ``is_vit_use_data_parallel``), the biased ``c_fc``/``c_proj`` MLP
    (``nn.Linear``, whole); ``ln_post``; the adapter's unbiased ``c_fc`` (``out_hidden_size`` →
    ``projector_hidden_size``) and ``c_proj`` (→ the same) and the unbiased projection into the
    text width, whole. Its 2D RoPE is computed per image: no buffer."""
    v = r.mapping("vision_config") if r.has("vision_config") else None
    if v is None:
        raise r.missing(("vision_config",))
    vr = ConfigReader(v, source=f"{r.source}: vision_config")
    return VisionWeights(
        family="muse_glimmer",
        hidden_size=vr.int("hidden_size"),
        intermediate_size=vr.int("intermediate_size"),
        num_layers=vr.int("num_hidden_layers"),
        image_size=0,
        patch_size=vr.int("patch_size"),
        num_channels=3,
        temporal_patch_size=vr.int("patch_temporal"),
        num_positions=vr.int("pos_emb_height") * vr.int("pos_emb_width"),
        # the heads for the TP split of qkv and o_proj (num_heads 0: vLLM does not refuse them)
        num_kv_heads=vr.int("num_attention_heads"),
        projector_input_dim=r.int("out_hidden_size"),
        projector_output_dim=r.int("projector_hidden_size"),
        text_hidden_size=text_hidden,
    )
