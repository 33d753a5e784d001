"""Bamba (``BambaConfig.layers_block_type``): attention at ``attn_layer_indices``, Mamba2 elsewhere
(:mod:`._mamba`). The weight count counts its Mamba2 mixers as Granite-4.0-H's keys size them
(``mamba_n_heads`` × ``mamba_d_head``, inner ``mamba_expand · hidden_size``:
:func:`kvcalc.hfconfig.weights_mixers.granite_mamba2`), as transformers' BambaMixer and vLLM 0.33's
``bamba.py`` (``MambaMixer2``) build them.
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


def read_bamba(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    indices = r.index_list("attn_layer_indices") or ()
    if any(i >= num_layers for i in indices):
        raise ConfigError(
            f"{r.source}: attn_layer_indices names a layer beyond num_hidden_layers {num_layers}",
            code="config-invalid",
        )
    attention = attention_layer(r, heads, hidden, dtype)
    mamba = mamba2_state(r, hidden, dtype, prov)
    prov["layer pattern"] = f"attn_layer_indices {list(indices)}: attention there, Mamba2 elsewhere"
    return [attention if i in indices else mamba for i in range(num_layers)]


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_bamba(
        r, ctx.num_layers, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance
    )
    return hybrid_weight_kinds(layouts, {Mamba2State: L.MAMBA2})


FAMILIES = (
    Family(
        name="bamba",
        model_types={"bamba"},
        architectures={"BambaForCausalLM"},
        keys={
            "attn_layer_indices",
            *MAMBA_MIXER_KEYS,
        },
        layer_types=frozenset(),
        layouts=_layouts,
        note="Bamba: Mamba2 layers with attention at attn_layer_indices.",
    ),
)
