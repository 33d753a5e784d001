"""What the multi-head-attention families of vLLM 0.33's registry share (GPT-J, OPT): every
layer full attention with as many KV heads as query heads, each ``hidden_size /
num_attention_heads`` wide, as their model files build them (a ``num_key_value_heads`` or ``head_dim`` is not
read, as their model files read none)."""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.family import LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def full_mha(
    r: ConfigReader, ctx: LayoutContext, model_file: str, what: str
) -> tuple[list[Layout], tuple[str, ...]]:
    heads = ctx.num_attention_heads
    width = split_head_width(r, ctx, model_file)
    ctx.provenance["layer pattern"] = f"{what}: every layer full attention (vLLM 0.33 {model_file})"
    ctx.provenance["num_kv_heads"] = f"num_attention_heads = {heads} (MHA: {model_file})"
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=heads, k_dim=width, v_dim=width)] * ctx.num_layers
    )
