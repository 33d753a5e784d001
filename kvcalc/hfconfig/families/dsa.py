"""DeepSeek-V3.2 and GLM-5: MLA with a sparse-attention indexer key cache
(:mod:`kvcalc.hfconfig.dsa_family`)."""

from kvcalc.hfconfig.families._attention import attention_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="deepseek-sparse",
        model_types={"deepseek_v32", "glm_moe_dsa"},
        architectures={"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"},
        keys={
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "index_head_dim",
            "index_n_heads",
            "index_topk",
            # the indexer's RoPE layout and GLM-5's q/k head width: no effect on the cache
            "indexer_rope_interleave",
            "qk_head_dim",
        },  # fmt: skip
        layouts=attention_family_layouts,
        note="MLA latent + fp8 indexer key cache per layer",
    ),
)
