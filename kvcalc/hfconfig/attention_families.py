"""Readers of the architecture families whose layers differ by type, chosen by ``model_type``.

Each reader returns one layout per layer; the generic reader in :mod:`kvcalc.hfconfig` handles
every other model. The per-family modules say which engine code they follow.
"""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.dsa_family import DSA_TYPES, read_dsa
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import Layout

#: model types with a family reader
FAMILY_TYPES = (
    *DSA_TYPES,
)  # fmt: skip


def family_layouts(
    r: ConfigReader,
    model_type: str,
    num_layers: int,
    heads: int,
    head_dim: int | None,
    dtype: CacheDtype,
    prov: dict[str, str],
) -> tuple[list[Layout], tuple[str, ...]] | None:
    """(layouts, layer kinds for the weight count), or None when no family reader applies."""
    if model_type in DSA_TYPES:
        layouts = read_dsa(r, num_layers, heads, dtype, prov)
    else:
        return None
    return layouts, tuple(L.weight_kind(x) for x in layouts)
