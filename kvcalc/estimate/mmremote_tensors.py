"""Tensors of the towers :mod:`kvcalc.hfconfig.weights_mmremote` reads (remote-code multimodal
checkpoints), for :mod:`kvcalc.estimate.vision_tensors`."""

from __future__ import annotations

from collections.abc import Callable

from kvcalc.estimate.tensor_base import Tensor
from kvcalc.hfconfig.weight_shape_extra import VisionWeights


def _phi3_v(v: VisionWeights, llava: list[Tensor]) -> list[Tensor]:
    """Phi-3-Vision (``phi3v.py``): LLaVA's CLIP tower and two-layer replicated projector (see
    :func:`kvcalc.estimate.vision_tensors._llava`), ``glb_GN`` and ``sub_GN``, and the class's
    own vocabulary-split ``embed_tokens``: see :func:`kvcalc.hfconfig.weights_mmremote._phi3_v`.
    ``llava``: LLaVA's tensors for ``v`` (given by the caller, which this module does not import)."""
    out = list(llava)
    out.append(Tensor(name="vision_embed_tokens.glb_sub_GN", rows=v.projector_input_dim,
                      copies=2, role="vector"))  # fmt: skip
    out.append(Tensor(name="embed_tokens", rows=v.tower_vocab_rows, cols=v.text_hidden_size,
                      role="embedding", split="vocab"))  # fmt: skip
    return out


#: ``VisionWeights.family`` → its tensors, from LLaVA's for the same tower
TOWER_TENSORS: dict[str, Callable[[VisionWeights, list[Tensor]], list[Tensor]]] = {
    "phi3_v": _phi3_v
}
