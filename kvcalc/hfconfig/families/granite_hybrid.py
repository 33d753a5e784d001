"""Granite-4.0-H (``granitemoehybrid.py`` in vLLM 0.33.0): ``layer_types`` of ``mamba``/``attention``
(or transformers' ``linear_attention``/``full_attention``), Mamba2 of width
``mamba_expand · hidden_size`` with ``mamba_n_heads`` × ``mamba_d_head``, ``mamba_n_groups``
(:mod:`._mamba`). The weight count counts its Mamba2 mixers.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.families._mamba import MAMBA_MIXER_KEYS, attention_layer, mamba2_state
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import Layout
from kvcalc.model.recurrent_layouts import Mamba2State

_GRANITE_KINDS = {"mamba": "mamba", "linear_attention": "mamba",
                  "attention": "attention", "full_attention": "attention"}  # fmt: skip


def read_granite_hybrid(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    key = "layer_types" if r.has("layer_types") or not r.has("layers_block_type") else None
    # transformers' attribute_map makes layers_block_type another name for layer_types
    types = r.list(key or "layers_block_type")
    if types is None:
        types = ["mamba"] * num_layers  # transformers' default: every layer a Mamba2 mixer
    unknown = sorted({str(t)[:40] for t in types if t not in _GRANITE_KINDS})
    if len(types) != num_layers or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {num_layers} layers as mamba or attention"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    kinds = [_GRANITE_KINDS[t] for t in types]
    attention = attention_layer(r, heads, hidden, dtype) if "attention" in kinds else None
    mamba = mamba2_state(r, hidden, dtype, prov) if "mamba" in kinds else None
    prov["layer pattern"] = (
        f"{key or 'layers_block_type'}: mamba → Mamba2, attention → full attention"
    )
    return [attention if k == "attention" else mamba for k in kinds]  # type: ignore[misc]


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_granite_hybrid(
        r, ctx.num_layers, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance
    )
    return hybrid_weight_kinds(layouts, {Mamba2State: L.MAMBA2})


FAMILIES = (
    Family(
        name="granite-hybrid",
        model_types={"granitemoehybrid"},
        architectures={"GraniteMoeHybridForCausalLM"},
        keys={
            "layer_types",
            "layers_block_type",
            *MAMBA_MIXER_KEYS,
        },
        layer_types={"mamba", "attention", "linear_attention", "full_attention"},
        layouts=_layouts,
        note="Granite-4.0-H: Mamba2 and attention per layer_types.",
    ),
)
