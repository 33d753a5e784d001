"""DeepSeek Sparse Attention (DeepSeek-V3.2 ``deepseek_v32``, GLM-5 ``glm_moe_dsa``): MLA + indexer.

From ``vllm/models/deepseek_v32`` and ``vllm/model_executor/models/deepseek_v2.py`` (vLLM 0.33.0):
every decoder layer has an MLA latent of ``kv_lora_rank + qk_rope_head_dim`` values and an
``Indexer`` whose key cache holds ``index_head_dim`` fp8 values plus a float32 scale per 128
(``DeepseekV32IndexerCache``). ``index_n_heads`` and ``index_topk`` shape the compute, not the cache.
The MTP layer (``num_nextn_predict_layers``) is not built without speculative decoding.
"""

from __future__ import annotations

from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.attention_layouts import SparseMLA
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import Layout


def read_dsa(
    r: ConfigReader, num_layers: int, heads: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    rank = r.int("kv_lora_rank")
    rope = r.int("qk_rope_head_dim")
    index_dim = r.int("index_head_dim")
    r.int("index_n_heads", default=None)
    r.int("index_topk", default=None)
    layer = SparseMLA(
        dtype=dtype,
        kv_lora_rank=rank,
        rope_dim=rope,
        num_heads=heads,
        qk_nope_dim=r.int("qk_nope_head_dim", default=0, minimum=0),
        v_head_dim=r.int("v_head_dim", default=0, minimum=0),
        index_head_dim=index_dim,
    )
    prov["mla"] = (
        f"kv_lora_rank + qk_rope_head_dim = {rank} + {rope} = {rank + rope} (one latent, no separate K/V)"
    )
    prov["indexer"] = (
        f"index_head_dim {index_dim}: fp8 keys + a float32 scale per 128 values = "
        f"{layer.indexer_bytes_per_token} B per token per layer (sparse attention indexer)"
    )
    prov["layer pattern"] = f"every one of {num_layers} layers: MLA latent + indexer keys"
    return [layer] * num_layers


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_dsa(r, ctx.num_layers, ctx.num_attention_heads, ctx.dtype, ctx.provenance)
    return with_weight_kinds(layouts)


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
        layouts=_layouts,
        note="MLA latent + fp8 indexer key cache per layer",
    ),
)
