"""Qwen3-Next: Gated DeltaNet layers with full attention every ``full_attention_interval``-th layer."""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="qwen3-next",
        model_types={"qwen3_next"},
        architectures={"Qwen3NextForCausalLM"},
        keys={
            "full_attention_interval", "layer_types", "linear_num_key_heads",
            "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
            "linear_conv_kernel_dim", "mamba_ssm_cache_dtype",
            # SGLang's mamba2_state_dtype reads it (engines/sglang/mamba.py); vLLM 0.33 has no
            # config hook for Qwen3-Next and keeps the model dtype (recorded: the same blocks with
            # float32 and bfloat16)
            "mamba_ssm_dtype",
            # Qwen3-Next's attention layers never slide (vLLM ignores these keys for it)
            "use_sliding_window", "sliding_window", "max_window_layers",
        },
        layer_types={"full_attention", "linear_attention"},
        note="Gated DeltaNet state + full attention every full_attention_interval-th layer",
    ),
)  # fmt: skip
