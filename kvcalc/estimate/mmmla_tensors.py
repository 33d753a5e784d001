"""The towers of :mod:`kvcalc.hfconfig.weights_mmmla` (BAGEL's, MuseGlimmer's), as vLLM 0.33 builds
them; their buffers (:func:`tower_buffer_bytes`) beside the parameters."""

from __future__ import annotations

from dataclasses import replace

from kvcalc.estimate.tensor_base import Tensor, _linear
from kvcalc.hfconfig.weight_shape_extra import VisionWeights

_INT64_BYTES = 8
_FP32_BYTES = 4


def bagel_tensors(v: VisionWeights, siglip: list[Tensor]) -> list[Tensor]:
    """``bagel.py``: ``SiglipVisionModel`` whole (its post-LayerNorm, no head), then the
    connector: ``fc1`` (tower width → text width, ``ColumnParallelLinear``) and ``fc2`` (text →
    text, ``RowParallelLinear``), both biased."""
    out = list(siglip)  # vision_tensors._siglip_whole(v, "vit_model.vision_model")
    h = v.text_hidden_size
    out += _linear("connector.fc1", h, v.hidden_size, None, "column", bias=True)
    out += _linear("connector.fc2", h, h, None, "row", bias=True)
    return out


def tower_buffer_bytes(v: VisionWeights) -> int:
    """BAGEL's buffers: SigLIP's int64 ``position_ids`` (one per patch of ``image_size``) and
    ``PositionEmbedding.pos_embed``, fp32 ``sincos_positions × text width`` (non-persistent, but
    on the device: vLLM's meta build counts it)."""
    ids = (v.image_size // v.patch_size) ** 2 * _INT64_BYTES
    return ids + v.sincos_positions * v.text_hidden_size * _FP32_BYTES


def muse_glimmer_tensors(v: VisionWeights) -> list[Tensor]:
    """``muse_glimmer.py``: see :func:`kvcalc.hfconfig.weights_mmmla.muse_glimmer_tower`."""
    h, inter, heads, p = v.hidden_size, v.intermediate_size, v.num_kv_heads, "vision_encoder"
    patch = v.temporal_patch_size * 3 * v.patch_size**2
    out = _linear(f"{p}.conv1_linear", h, patch, None, "replicated")
    out.append(Tensor(name=f"{p}.positional_embedding_vlm", rows=v.num_positions, cols=h,
                      role="position"))  # fmt: skip
    out.append(Tensor(name=f"{p}.ln_pre", rows=h, copies=2, role="norm"))
    for i in range(v.num_layers):
        q = f"{p}.transformer.{i}"
        out.append(Tensor(name=f"{q}.norms", rows=h, copies=4, role="norm"))
        attn = _linear(f"{q}.attn.qkv_proj", 3 * h, h, None, "column", bias=True)
        attn += _linear(f"{q}.attn.o_proj", h, h, None, "row", bias=True)
        out += [replace(t, split_if_divides=heads) for t in attn]
        out += _linear(f"{q}.mlp.c_fc", inter, h, None, "replicated", bias=True)
        out += _linear(f"{q}.mlp.c_proj", h, inter, None, "replicated", bias=True)
    out.append(Tensor(name=f"{p}.ln_post", rows=h, copies=2, role="norm"))
    proj = v.projector_output_dim
    out += _linear("vision_adapter.c_fc", proj, v.projector_input_dim, None, "replicated")
    out += _linear("vision_adapter.c_proj", proj, proj, None, "replicated")
    return out + _linear("vision_projection", v.text_hidden_size, proj, None, "replicated")
