"""The Mamba mixer keys the Mamba-hybrid families (Jamba, Bamba, Granite-4.0-H, Falcon-H1) read or
knowingly ignore: one list, so a new Mamba key is accounted for in one place."""

MAMBA_MIXER_KEYS = frozenset(
    {
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
    }
)
