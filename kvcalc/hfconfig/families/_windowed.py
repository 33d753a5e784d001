"""One attention layer of a ``layer_types`` list: a sliding-window cache for
``sliding_attention`` (where the config gives a window), else a full-attention one — the readers
of Step-3.5, Laguna, MuseGlimmer, Beam, Dory and Granite SWA share it."""

from __future__ import annotations

from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow


def typed_layer(
    layer_type: object, window: int | None, *, dtype: CacheDtype, kv_heads: int, head_dim: int
) -> Layout:
    """The cache of a layer of ``layer_type`` with ``kv_heads`` heads of ``head_dim`` for K and V."""
    if layer_type == "sliding_attention" and window is not None:
        return SlidingWindow(dtype=dtype, kv_heads=kv_heads, k_dim=head_dim, v_dim=head_dim,
                             sliding_window=window)  # fmt: skip
    return FullAttention(dtype=dtype, kv_heads=kv_heads, k_dim=head_dim, v_dim=head_dim)
