"""LFM2: short convolution layers and full attention (kvcalc.hfconfig.conv_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="lfm2",
        model_types={"lfm2", "lfm2_moe"},
        architectures={"Lfm2ForCausalLM", "Lfm2MoeForCausalLM"},
        keys={
            "layer_types",
            "full_attn_idxs",
            "conv_L_cache",
            "conv_dim",
            "conv_bias",
            "conv_dim_out",
            "block_dim",
            "block_ff_dim",
            "conv_use_xavier_init",
        },
        layer_types={"conv", "full_attention"},
        layouts=hybrid_family_layouts,
        note="LFM2: short convolution layers and full attention (kvcalc.hfconfig.conv_families).",
    ),
)
