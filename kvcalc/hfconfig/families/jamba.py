"""Jamba: Mamba1 layers with attention every attn_layer_period-th layer (kvcalc.hfconfig.mamba_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.families._mamba_keys import MAMBA_MIXER_KEYS
from kvcalc.hfconfig.family import Family

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
        layouts=hybrid_family_layouts,
        note="Jamba: Mamba1 layers with attention every attn_layer_period-th layer (kvcalc.hfconfig.mamba_families).",
    ),
)
