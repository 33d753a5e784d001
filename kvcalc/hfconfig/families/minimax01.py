"""MiniMax-Text-01 lightning attention: refused with the reason (kvcalc.hfconfig.conv_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="minimax-01",
        model_types={"minimax"},
        architectures={"MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxForCausalLM"},
        # the reader refuses this family with its reason, whatever the keys say
        keys={
            "layer_types",
            "attn_type_list",
            "block_size",
            "linear_attn_type",
            "linear_attn_alpha_factor",
            "linear_attn_beta_factor",
        },  # fmt: skip
        layer_types={"full_attention", "linear_attention"},
        layouts=hybrid_family_layouts,
        note="MiniMax-Text-01 lightning attention: refused with the reason (kvcalc.hfconfig.conv_families).",
    ),
)
