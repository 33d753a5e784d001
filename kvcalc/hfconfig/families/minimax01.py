"""MiniMax-Text-01 lightning attention: refused with the reason (kvcalc.hfconfig.conv_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="minimax-01",
        model_types={"minimax"},
        architectures={"MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM"},
        keys={"layer_types", "attn_type_list", "block_size", "linear_attn_type"},
        layer_types={},
        layouts=hybrid_family_layouts,
        note="MiniMax-Text-01 lightning attention: refused with the reason (kvcalc.hfconfig.conv_families).",
    ),
)
