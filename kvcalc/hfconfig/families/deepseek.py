"""DeepSeek-V2/V3 and Kimi-K2 (K2.5: the text stack of a multimodal config): MLA, one latent per layer.

The latent is ``kv_lora_rank + qk_rope_head_dim`` wide; ``q_lora_rank``, ``qk_nope_head_dim`` and
``v_head_dim`` shape the weights, not the cache. Sparse-attention variants (an ``index_*`` indexer:
DeepSeek-V3.2, GLM-5) are not this family. Kimi-VL (``kimi_vl``: ``kimi_vl.py``) builds its
``text_config`` as ``DeepseekV2ForCausalLM``; its MoonViT tower and projector hold no cache.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="deepseek-mla",
        model_types={"deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "kimi_vl"},
        architectures={
            "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration",
            "KimiVLForConditionalGeneration",
        },
        # qk_head_dim: transformers' DeepseekV2Config writes qk_nope + qk_rope (Kimi-VL's text
        # config); deepseek_v2.py sums the two itself and does not read it
        keys={"kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
              "qk_head_dim"},
        note="MLA latent kv_lora_rank + qk_rope_head_dim per layer",
    ),
)  # fmt: skip
