"""DeepSeek-V4: compressed, indexer and sliding caches (:mod:`kvcalc.hfconfig.dsv4_family`)."""

from kvcalc.hfconfig.families._attention import attention_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="deepseek-v4",
        model_types={"deepseek_v4"},
        architectures={"DeepseekV4ForCausalLM"},
        keys={
            "compress_ratios",
            "compress_rates",
            "layer_types",
            "sliding_window",
            "index_head_dim",
            "qk_rope_head_dim",
            # query/output low-rank projections, the indexer's top-k and heads, the compressor's
            # RoPE base: weights and compute, not cache
            "q_lora_rank",
            "o_lora_rank",
            "index_n_heads",
            "index_topk",
            "compress_rope_theta",
        },  # fmt: skip
        layer_types=frozenset(),
        layouts=attention_family_layouts,
        note="compressor, indexer and sliding caches per layer",
    ),
)
