"""The towers of :mod:`kvcalc.hfconfig.weights_mmmla` (BAGEL's), as vLLM 0.33 builds them; their
buffers (:func:`tower_buffer_bytes`) beside the parameters."""

from __future__ import annotations

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
