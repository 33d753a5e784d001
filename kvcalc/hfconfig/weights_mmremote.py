"""Vision towers of multimodal checkpoints whose config class is remote code (``auto_map``), for
the parameter count (see :mod:`kvcalc.hfconfig.weights`), read as vLLM 0.33's model file builds
them: Phi-3-Vision's and Phi-3.5-Vision's (``phi3_v``: ``phi3v.py``), which have no
``vision_config``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.reader import ConfigReader

if TYPE_CHECKING:  # imported where a tower is read: every weight count asks TOWERS first
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

#: ``phi3v.py`` ``CLIP_VIT_LARGE_PATCH14_336_CONFIG``: the tower is built from these constants,
#: whatever the config says (its ``img_processor.model_name`` is not read)
_PHI3V_CLIP = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
               "image_size": 336, "patch_size": 14, "num_channels": 3}  # fmt: skip


def phi3_v_image_embedding(r: ConfigReader) -> ConfigReader:
    """``img_processor`` of a Phi-3-Vision config vLLM 0.33 can build: ``phi3v.py``
    ``Phi3HDImageEmbedding`` reads it and ``embd_layer``, and asserts ``use_hd_transform`` and
    ``with_learnable_separator`` (refused before the cache is planned, as vLLM fails there)."""
    proc = r.mapping("img_processor") if r.has("img_processor") else None
    embd = r.mapping("embd_layer") if r.has("embd_layer") else None
    if proc is None or embd is None:
        raise ConfigError(
            f"{r.source}: no img_processor or embd_layer: vLLM 0.33's phi3v.py builds the image "
            "embedding from both",
            code="config-invalid",
        )
    er = ConfigReader(embd, source=f"{r.source}: embd_layer")
    for key in ("use_hd_transform", "with_learnable_separator"):  # both asserted by phi3v.py
        if not er.bool(key, False):
            raise er.bad(er.path(key), er.raw.get(key), "true (vLLM 0.33 phi3v.py asserts it)")
    return ConfigReader(proc, source=f"{r.source}: img_processor")


def _phi3_v(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """Phi-3-Vision's tower as vLLM 0.33 builds it (``phi3v.py`` ``Phi3HDImageEmbedding``): CLIP
    ViT-L/14-336 from :data:`_PHI3V_CLIP` up to ``img_processor.layer_idx`` (default -2: 23 of 24
    layers, so no post-LayerNorm; ``clip.py``: the class embedding, the unbiased patch
    convolution, 577 positions and their int64 ``position_ids``, the pre-LayerNorm, fused qkv and
    out_proj, fc1/fc2 split over TP), ``glb_GN`` and ``sub_GN`` (``4 · image_dim_out`` each), the
    biased ``img_projection`` ``nn.Linear``s ``4 · image_dim_out`` → ``hidden_size`` → the same,
    whole on every rank (a config with ``n_embd``, which it projects into, refused), and the class's own ``embed_tokens``
    (vocabulary-split), all inside ``_mark_tower_model(image)``."""
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

    pr = phi3_v_image_embedding(r)
    if r.has("n_embd"):  # phi3v.py projects into n_embd, its embed_tokens is hidden_size wide
        raise ConfigError(f"{r.source}: n_embd beside hidden_size: not counted by kvcalc",
                          code="config-unverified")  # fmt: skip
    depth = _PHI3V_CLIP["num_hidden_layers"]
    layer_idx = pr.int("layer_idx", default=-2, minimum=-depth)
    layers = depth + layer_idx + 1 if layer_idx < 0 else layer_idx + 1
    if not 0 < layers <= depth:
        raise pr.bad(pr.path("layer_idx"), layer_idx, f"a layer of the {depth}-layer CLIP tower")
    if layers == depth:  # clip.py keeps the post-LayerNorm then: not recorded
        raise ConfigError(
            f"{r.source}: img_processor.layer_idx {layer_idx}: the whole CLIP tower (with its "
            "post-LayerNorm) is not counted by kvcalc",
            code="config-unverified",
        )
    return VisionWeights(
        family="phi3_v",
        tower="clip",
        hidden_size=_PHI3V_CLIP["hidden_size"],
        intermediate_size=_PHI3V_CLIP["intermediate_size"],
        num_layers=layers,
        image_size=_PHI3V_CLIP["image_size"],
        patch_size=_PHI3V_CLIP["patch_size"],
        num_channels=_PHI3V_CLIP["num_channels"],
        projector_input_dim=4 * pr.int("image_dim_out"),
        projector_bias=True,
        projector_replicated=True,
        text_hidden_size=text_hidden,
        tower_vocab_rows=r.int("vocab_size"),
    )


#: top-level model types whose tower has no ``vision_config`` → its reader
TOWERS: dict[str, Callable[[ConfigReader, int], VisionWeights]] = {"phi3_v": _phi3_v}
