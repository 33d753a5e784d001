"""Nemotron-H (Nemotron-3 Nano/Super): ``hybrid_override_pattern`` of Mamba2, attention and MLP/MoE.

Keys accounted for without changing the cache: ``chunk_size`` (the SSD scan's chunk), the
``time_step_*`` bounds, ``use_conv_bias`` / ``mamba_proj_bias`` / ``mamba_hidden_act`` /
``use_mamba_kernels`` (weights and kernels), ``expand`` (the Mamba2 width is
``mamba_num_heads × mamba_head_dim``), ``moe_latent_size`` (MoE projections) and
``mtp_hybrid_override_pattern`` (MTP layers, not built without speculative decoding).
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="nemotron-h",
        model_types={"nemotron_h"},
        architectures={"NemotronHForCausalLM"},
        keys={
            "hybrid_override_pattern", "mamba_num_heads", "mamba_head_dim", "ssm_state_size",
            "n_groups", "conv_kernel", "mamba_ssm_cache_dtype", "chunk_size", "time_step_min",
            "time_step_max", "time_step_floor", "time_step_limit", "use_conv_bias",
            "mamba_proj_bias", "mamba_hidden_act", "use_mamba_kernels", "expand",
            "moe_latent_size", "mtp_hybrid_override_pattern", "sliding_window",
        },
        note="Mamba2 state + full attention per hybrid_override_pattern",
    ),
)  # fmt: skip
