"""Falcon-H1: parallel attention and Mamba2 in every layer (kvcalc.hfconfig.mamba_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.families._mamba_keys import MAMBA_MIXER_KEYS
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="falcon-h1",
        model_types={"falcon_h1"},
        architectures={"FalconH1ForCausalLM"},
        keys={
            "ssm_multipliers",
            "ssm_in_multiplier",
            "ssm_out_multiplier",  # muP scales, not cache
            "attn_layer_indices",
            *MAMBA_MIXER_KEYS,
        },
        layer_types=frozenset(),
        layouts=hybrid_family_layouts,
        note="Falcon-H1: parallel attention and Mamba2 in every layer (kvcalc.hfconfig.mamba_families).",
    ),
)
