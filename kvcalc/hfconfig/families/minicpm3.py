"""MiniCPM3 (``MiniCPM3ForCausalLM``): DeepSeek-style latent projections, but a plain multi-head cache.

vLLM 0.33 ``models/minicpm3.py`` projects the latent back to per-head keys and values before its
``Attention`` layer, which caches every head (``num_kv_heads`` = the heads) at one width,
``qk_nope_head_dim + qk_rope_head_dim`` (the values are padded to it): no MLA latent is kept.
``kv_lora_rank``, ``q_lora_rank`` and ``v_head_dim`` shape the weights only.
"""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def read_minicpm3(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    nope, rope = r.int("qk_nope_head_dim"), r.int("qk_rope_head_dim")
    heads, prov = ctx.num_attention_heads, ctx.provenance
    prov["layer pattern"] = "MiniCPM3: every layer full attention"
    prov["num_kv_heads"] = (
        f"num_attention_heads = {heads} (vLLM 0.33 minicpm3.py caches every head; "
        "num_key_value_heads is not read)"
    )
    prov["head_dim"] = (
        f"qk_nope_head_dim + qk_rope_head_dim = {nope} + {rope} = {nope + rope} "
        "(values padded to the same width)"
    )
    width = nope + rope
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=heads, k_dim=width, v_dim=width)] * ctx.num_layers
    )


FAMILIES = (
    Family(
        name="minicpm3",
        model_types={"minicpm3"},
        architectures={"MiniCPM3ForCausalLM"},
        # weights only (see read_minicpm3); qk_head_dim is transformers' own sum of the two
        keys={
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "qk_head_dim",
        },  # fmt: skip
        layouts=read_minicpm3,
        note="per-head cache of qk_nope + qk_rope width for every head (no latent), vLLM 0.33",
    ),
)
