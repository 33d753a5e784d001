"""Bamba: Mamba2 layers with attention at attn_layer_indices (kvcalc.hfconfig.mamba_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.families._mamba_keys import MAMBA_MIXER_KEYS
from kvcalc.hfconfig.family import Family

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
        layouts=hybrid_family_layouts,
        note="Bamba: Mamba2 layers with attention at attn_layer_indices (kvcalc.hfconfig.mamba_families).",
    ),
)
