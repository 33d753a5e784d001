"""What the recurrent and linear-attention hybrid families return alike: each layer's kind for the
weight count, which counts attention and MLA layers and only the mixers a family names (the rest
are ``UNCOUNTED``: their weights are refused, not guessed)."""

from __future__ import annotations

from collections.abc import Mapping

from kvcalc.hfconfig import layers as L
from kvcalc.model.layouts import FullAttention, Layout, MLALatent


def hybrid_weight_kinds(
    layouts: list[Layout], counted: Mapping[type, str]
) -> tuple[list[Layout], tuple[str, ...]]:
    """``layouts`` and the weight-count kind of each: attention and MLA are full layers, a mixer
    of a type in ``counted`` is its kind there, every other mixer uncounted."""
    return layouts, tuple(_kind(x, counted) for x in layouts)


def _kind(layout: Layout, counted: Mapping[type, str]) -> str:
    if isinstance(layout, (FullAttention, MLALatent)):
        return L.FULL
    for cls, kind in counted.items():
        if isinstance(layout, cls):
            return kind
    return L.UNCOUNTED
