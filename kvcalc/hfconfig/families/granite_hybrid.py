"""Granite-4.0-H: Mamba2 and attention per layer_types (kvcalc.hfconfig.mamba_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.families._mamba_keys import MAMBA_MIXER_KEYS
from kvcalc.hfconfig.family import Family

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
        layouts=hybrid_family_layouts,
        note="Granite-4.0-H: Mamba2 and attention per layer_types (kvcalc.hfconfig.mamba_families).",
    ),
)
