"""MiMo-V2 (Flash): ``hybrid_layer_pattern`` of sliding and full layers with per-type heads and dims
(:mod:`kvcalc.hfconfig.mimo_family`)."""

from kvcalc.hfconfig.families._attention import attention_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="mimo-v2",
        model_types={"mimo_v2", "mimo_v2_flash"},
        architectures={"MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM"},
        keys={
            "hybrid_layer_pattern",
            "sliding_window",
            "sliding_window_size",
            "swa_head_dim",
            "swa_num_key_value_heads",
            "swa_v_head_dim",
            "v_head_dim",
            "attention_chunk_size",
            "add_full_attention_sink_bias",
            "add_swa_attention_sink_bias",
            # query heads and RoPE base of the sliding layers: compute, not cache
            "swa_num_attention_heads",
            "swa_rope_theta",
        },  # fmt: skip
        layouts=attention_family_layouts,
        note="per-type KV heads, K and V head dims; attention sinks",
    ),
)
