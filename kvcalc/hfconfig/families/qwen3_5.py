"""Qwen3.5 / Qwen3.6 (dense and MoE, text stack under ``text_config``): Gated DeltaNet + full
attention per ``layer_types``, the recurrent state in ``mamba_ssm_dtype`` (generic reader).
MiniCPM-V 4.6 and 4.7 (``minicpmv4_6``, ``minicpmv4_7``: ``minicpmv4_6.py``, 4.7's class
subclasses it) build their ``text_config`` as ``Qwen3_5ForCausalLM`` (no MTP layers: the loader
drops ``mtp.``); their SigLIP-type tower and mergers hold no cache."""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="qwen3.5",
        model_types={"qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text", "minicpmv4_6",
                     "minicpmv4_7"},
        architectures={
            "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
            "Qwen3_5MoeForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
            "MiniCPMV4_7ForConditionalGeneration",
        },
        keys={
            "layer_types", "full_attention_interval", "linear_num_key_heads",
            "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
            "linear_conv_kernel_dim", "mamba_ssm_dtype",
        },
        layer_types={"full_attention", "linear_attention"},
        note="Gated DeltaNet state + full attention per layer_types",
    ),
)  # fmt: skip
