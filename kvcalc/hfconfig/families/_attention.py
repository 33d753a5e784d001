"""The adapter from the registry to the per-type attention readers of
:mod:`kvcalc.hfconfig.attention_families` (Gemma 4, Gemma-3n, MiMo-V2, Nemotron-NAS, DSA, DeepSeek-V4)."""

from __future__ import annotations

from kvcalc.hfconfig.family import LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def attention_family_layouts(
    r: ConfigReader, ctx: LayoutContext
) -> tuple[list[Layout], tuple[str, ...]]:
    from kvcalc.hfconfig import plain_head_dim
    from kvcalc.hfconfig.attention_families import family_layouts

    model_type = str(r.str("model_type", "") or "")
    head_dim = plain_head_dim(r, ctx.num_attention_heads, ctx.hidden_size)
    found = family_layouts(
        r, model_type, ctx.num_layers, ctx.num_attention_heads, head_dim, ctx.dtype,
        ctx.provenance,
    )  # fmt: skip
    if found is None:
        raise r.bad(r.path("model_type"), model_type, "a model type with a family reader")
    return found  # (layouts, weight kinds)
