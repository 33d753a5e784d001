"""Jamba: Mamba1 layers with attention every attn_layer_period-th layer (kvcalc.hfconfig.mamba_families)."""

from kvcalc.hfconfig.families._attention import hybrid_family_layouts
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
            "mamba_d_conv",
            "mamba_d_head",
            "mamba_d_ssm",
            "mamba_d_state",
            "mamba_expand",
            "mamba_n_groups",
            "mamba_n_heads",
            "mamba_dt_rank",
            "mamba_conv_bias",
            "mamba_proj_bias",
            "mamba_chunk_size",
            "use_mamba_kernels",
            "mamba_rms_norm",
            "mamba_use_mlp",
            "mamba_norm_before_gate",
            "time_step_min",
            "time_step_max",
            "time_step_floor",
            "time_step_limit",
            "mamba_dt_min",
            "mamba_dt_max",
            "mamba_dt_init_floor",
            "ssm_state_size",
            "conv_kernel",
            "expand",
            "chunk_size",
            "n_groups",
        },
        layer_types=frozenset(),
        layouts=hybrid_family_layouts,
        note="Jamba: Mamba1 layers with attention every attn_layer_period-th layer (kvcalc.hfconfig.mamba_families).",
    ),
)
