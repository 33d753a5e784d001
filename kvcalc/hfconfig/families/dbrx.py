"""DBRX (``DbrxForCausalLM``): full attention on every layer, KV heads in a nested ``attn_config``.

vLLM 0.33 ``models/dbrx.py``: heads ``d_model / n_heads`` wide, ``attn_config.kv_n_heads`` KV
heads (split over TP, or replicated when fewer than TP: ``tp % kv_n_heads == 0``), no window; the
rotary embedding reads ``attn_config.rope_theta``, which transformers' ``DbrxAttentionConfig`` does
not default, so a config without it fails to build (``AttributeError``: refused here). Weights
(``modeling_dbrx.py``): LayerNorms without bias (weight only), a fused q/k/v and out_proj without
bias, every layer an MoE of ``ffn_config.moe_num_experts`` gated experts ``ffn_hidden_size`` wide
(``moe_top_k`` per token) behind a router; lm_head not tied.
"""

from __future__ import annotations

from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights, MoeWeights
from kvcalc.model.layouts import FullAttention, Layout


def _sub(r: ConfigReader, key: str) -> ConfigReader:
    """A reader of the nested ``attn_config`` / ``ffn_config`` (an empty one when absent)."""
    raw: Any = r.mapping(key) or {}
    return ConfigReader(raw, source=f"{r.source}: {key}")


def dbrx_kv_heads(r: ConfigReader) -> int:
    # DbrxAttentionConfig's default: one KV head
    return _sub(r, "attn_config").int("kv_n_heads", default=1)


def read_dbrx(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    attn = _sub(r, "attn_config")
    if attn.value("rope_theta") is None:
        raise ConfigError(
            f"{r.source}: attn_config has no rope_theta, which vLLM 0.33's dbrx.py reads "
            "(config.attn_config.rope_theta): vLLM fails to build the model",
            hint="DBRX checkpoints set attn_config.rope_theta (500000); add it to config.json",
            code="config-invalid",
        )
    width = split_head_width(r, ctx, "dbrx.py")
    kv = dbrx_kv_heads(r)
    ctx.provenance["layer pattern"] = "DBRX: every layer full attention (vLLM 0.33 dbrx.py)"
    ctx.provenance["num_kv_heads"] = f"attn_config.kv_n_heads = {kv}"
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)] * ctx.num_layers
    )


def dbrx_attention(r: ConfigReader, heads: int, hidden: int) -> AttentionWeights:
    return AttentionWeights(
        num_heads=heads, num_kv_heads=dbrx_kv_heads(r), head_dim=hidden // heads
    )


def dbrx_moe(r: ConfigReader, n: int) -> tuple[MoeWeights, tuple[bool, ...]]:
    """Every layer MoE, from ``ffn_config`` (DbrxFFNConfig's defaults where a key is absent)."""
    ffn = _sub(r, "ffn_config")
    moe = MoeWeights(
        num_experts=ffn.int("moe_num_experts", default=4),
        experts_per_token=ffn.int("moe_top_k", default=1),
        expert_intermediate_size=ffn.int("ffn_hidden_size", default=3584),
    )
    return moe, (True,) * n


FAMILIES = (
    Family(
        name="dbrx",
        model_types={"dbrx"},
        architectures={"DbrxForCausalLM"},
        layouts=read_dbrx,
        note="DBRX: full attention per layer, attn_config.kv_n_heads KV heads (vLLM 0.33 dbrx.py)",
    ),
)
