"""Kimi-Linear: KDA linear attention and MLA layers (kvcalc.hfconfig.conv_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="kimi-linear",
        model_types={"kimi_linear"},
        architectures={"KimiLinearForCausalLM"},
        keys={
            "linear_attn_config",
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
        },
        layer_types=frozenset(),
        layouts=hybrid_family_layouts,
        note="Kimi-Linear: KDA linear attention and MLA layers (kvcalc.hfconfig.conv_families).",
    ),
)
