"""The recurrent and linear-attention hybrid families, chosen by ``model_type``.

Each reader (:mod:`~kvcalc.hfconfig.mamba_families`, :mod:`~kvcalc.hfconfig.conv_families`) returns
one layout per layer; :func:`hybrid_layouts` also names each layer's kind for the weight count,
which counts LFM2's short convolutions, Granite-4.0-H's and Falcon-H1's Mamba2 and Jamba's Mamba1
mixers, and no other of these mixers
(``UNCOUNTED``: the weights are refused, not guessed).
"""

from __future__ import annotations

from kvcalc.hfconfig import conv_families as C
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig import mamba_families as M
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, MLALatent
from kvcalc.model.recurrent_layouts import Mamba1State, Mamba2State, ParallelHybrid, ShortConvState

_READERS = {
    **dict.fromkeys(M.JAMBA_TYPES, M.read_jamba),
    **dict.fromkeys(M.BAMBA_TYPES, M.read_bamba),
    **dict.fromkeys(M.GRANITE_HYBRID_TYPES, M.read_granite_hybrid),
    **dict.fromkeys(M.FALCON_H1_TYPES, M.read_falcon_h1),
    **dict.fromkeys(C.LFM2_TYPES, C.read_lfm2),
    **dict.fromkeys(C.KIMI_LINEAR_TYPES, C.read_kimi_linear),
}
#: model types read here
HYBRID_TYPES = (*_READERS, *C.MINIMAX01_TYPES)


def hybrid_layouts(
    r: ConfigReader, model_type: str, num_layers: int, heads: int, hidden: int,
    dtype: CacheDtype, prov: dict[str, str],
) -> tuple[list[Layout], tuple[str, ...]] | None:  # fmt: skip
    """(layouts, layer kinds for the weight count), or None for other model types."""
    if model_type in C.MINIMAX01_TYPES:
        C.refuse_minimax01(r)
    reader = _READERS.get(model_type)
    if reader is None:
        return None
    layouts = reader(r, num_layers, heads, hidden, dtype, prov)
    return layouts, tuple(_weight_kind(x, model_type) for x in layouts)


def _weight_kind(layout: Layout, model_type: str) -> str:
    if isinstance(layout, (FullAttention, MLALatent)):
        return L.FULL
    if isinstance(layout, ShortConvState) and model_type == "lfm2":
        return L.SHORT_CONV
    if isinstance(layout, Mamba2State) and model_type in M.GRANITE_HYBRID_TYPES:
        return L.MAMBA2
    if isinstance(layout, Mamba1State) and model_type in M.JAMBA_TYPES:
        return L.MAMBA1
    if isinstance(layout, ParallelHybrid) and model_type in M.FALCON_H1_TYPES:
        return L.PARALLEL
    return L.UNCOUNTED
