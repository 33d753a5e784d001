"""Jamba (``jamba.py`` in vLLM 0.33.0; ``JambaConfig.layers_block_type``): layer ``i`` is attention
when ``i % attn_layer_period == attn_layer_offset``, else a Mamba1 mixer of width
``mamba_expand · hidden_size`` with ``mamba_d_state`` and ``mamba_d_conv``; attention heads are
``hidden_size // num_attention_heads`` wide (:mod:`._mamba`). The weight count counts its Mamba1
mixers
(:func:`jamba_mamba1`) and its MoE layers (:func:`jamba_moe_layers`), both read here.
"""

from __future__ import annotations

import math

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.families._mamba import MAMBA_MIXER_KEYS, attention_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import Mamba1Weights
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import Layout
from kvcalc.model.recurrent_layouts import Mamba1State


def read_jamba(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    period = r.int("attn_layer_period", default=8)
    offset = r.int("attn_layer_offset", default=4, minimum=0)
    if offset >= period:
        raise ConfigError(
            f"{r.source}: attn_layer_offset {offset} must be below attn_layer_period {period}",
            code="config-invalid",
        )
    expand = r.int("mamba_expand", default=2)
    state = r.int("mamba_d_state", default=16)
    kernel = r.int("mamba_d_conv", default=4)
    attention = attention_layer(r, heads, hidden, dtype)
    mamba = Mamba1State(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel,
                        intermediate_size=expand * hidden, state_size=state)  # fmt: skip
    prov["layer pattern"] = (
        f"attn_layer_period {period}, attn_layer_offset {offset}: layer i is attention when "
        f"i % {period} == {offset}, else Mamba1"
    )
    prov["mamba1"] = (
        f"mamba_expand {expand} × hidden_size {hidden} = {expand * hidden} channels, mamba_d_state "
        f"{state}, mamba_d_conv {kernel}; both states in the model dtype"
    )
    return [attention if i % period == offset else mamba for i in range(num_layers)]


def jamba_mamba1(r: ConfigReader, hidden: int) -> Mamba1Weights:
    """Jamba's Mamba1 mixer as JambaConfig sets it: inner ``mamba_expand · hidden_size``,
    ``mamba_dt_rank`` "auto" = ceil(hidden_size / 16)."""
    rank = r.value("mamba_dt_rank", "auto")
    return Mamba1Weights(
        inner=r.int("mamba_expand", default=2) * hidden,
        state_size=r.int("mamba_d_state", default=16),
        conv_kernel=r.int("mamba_d_conv", default=4),
        dt_rank=math.ceil(hidden / 16) if rank == "auto" else r.int("mamba_dt_rank"),
        conv_bias=r.bool("mamba_conv_bias", True),
        proj_bias=r.bool("mamba_proj_bias", False),
    )


def jamba_moe_layers(r: ConfigReader, n: int, experts: int) -> tuple[bool, ...]:
    """Which of ``n`` layers are MoE (``JambaConfig.layers_num_experts``): experts where
    ``i % expert_layer_period == expert_layer_offset``."""
    period = r.int("expert_layer_period", default=2)
    offset = r.int("expert_layer_offset", default=1, minimum=0)
    return tuple(experts > 1 and i % period == offset for i in range(n))


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_jamba(
        r, ctx.num_layers, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance
    )
    return hybrid_weight_kinds(layouts, {Mamba1State: L.MAMBA1})


FAMILIES = (
    Family(
        name="jamba",
        model_types={"jamba"},
        architectures={"JambaForCausalLM"},
        keys={
            "expert_layer_offset",
            "expert_layer_period",  # MoE placement, not cache
            "attn_layer_period",
            "attn_layer_offset",
            *MAMBA_MIXER_KEYS,
        },
        layer_types=frozenset(),
        layouts=_layouts,
        note="Jamba: Mamba1 layers with attention every attn_layer_period-th layer.",
    ),
)
