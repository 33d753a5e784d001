"""Granite 3 dense (``GraniteForCausalLM``) and MoE (``GraniteMoeForCausalLM``): full attention on
every layer; the Granite multipliers (embedding, residual, attention, logits) shape no cache.

vLLM 0.33: ``models/granite.py`` takes ``head_dim`` from config.json (else ``hidden_size /
num_attention_heads``); ``models/granitemoe.py`` always ``hidden_size / num_attention_heads``. Both
take a window only where ``layer_types`` marks a layer sliding (``granite_layer_attn_params``):
Granite 3 configs have none, and a config that has one is refused here (not checked).
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import full_split_heads
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_granitemoe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return full_split_heads(r, ctx, "granitemoe.py", "Granite MoE: every layer full attention")


FAMILIES = (
    Family(
        name="granite",
        model_types={"granite"},
        architectures={"GraniteForCausalLM"},
        note="Granite 3 dense: full attention per layer",
    ),
    Family(
        name="granitemoe",
        model_types={"granitemoe"},
        architectures={"GraniteMoeForCausalLM"},
        layouts=read_granitemoe,
        note="Granite 3 MoE: full attention per layer, heads hidden_size / num_attention_heads wide",
    ),
)
