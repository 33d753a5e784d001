"""Gemma 4: sliding and global layers with different KV heads and head dims
(:mod:`kvcalc.hfconfig.gemma_family`)."""

from kvcalc.hfconfig.families._attention import attention_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="gemma4",
        model_types={"gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"},
        architectures={"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "num_global_key_value_heads",
            "global_head_dim",
            "num_kv_shared_layers",
            "attention_k_eq_v",
        },  # fmt: skip
        layer_types={"sliding_attention", "full_attention"},
        layouts=attention_family_layouts,
        note="per-type KV heads and head dims (global layers wider), KV sharing",
    ),
)
