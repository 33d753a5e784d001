"""What several full-attention families share: every layer one full-attention cache whose head width
is ``hidden_size / num_attention_heads`` whatever ``head_dim`` says, as the vLLM 0.33 model files of
those families compute it (``self.head_dim = hidden_size // self.total_num_heads``)."""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import LayoutContext
from kvcalc.hfconfig.generic import kv_heads
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def split_head_width(r: ConfigReader, ctx: LayoutContext, model_file: str) -> int:
    """``hidden_size // num_attention_heads``, the width ``model_file`` gives every head."""
    heads, hidden = ctx.num_attention_heads, ctx.hidden_size
    if hidden <= 0 or hidden % heads:
        raise ConfigError(
            f"{r.source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}",
            code="config-invalid",
        )
    ctx.provenance["head_dim"] = (
        f"hidden_size / num_attention_heads = {hidden} / {heads} = {hidden // heads} (vLLM 0.33 "
        f"{model_file} computes it so; a head_dim in config.json is not read)"
    )
    return hidden // heads


def full_split_heads(
    r: ConfigReader, ctx: LayoutContext, model_file: str, pattern_note: str
) -> tuple[list[Layout], tuple[str, ...]]:
    """Every layer full attention, heads ``hidden_size // num_attention_heads`` wide."""
    ctx.provenance["layer pattern"] = pattern_note
    width = split_head_width(r, ctx, model_file)
    kv = kv_heads(r, ctx.num_attention_heads, ctx.num_layers, ctx.provenance)
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=k, k_dim=width, v_dim=width) for k in kv]
    )
