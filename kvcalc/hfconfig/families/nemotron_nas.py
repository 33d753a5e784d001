"""Nemotron-NAS (``DeciLMForCausalLM``, Llama-3.x-Nemotron Super/Ultra): one ``block_configs`` entry per layer.

From ``vllm/model_executor/models/nemotron_nas.py`` (vLLM 0.33.0), ``DeciLMDecoderLayer``: a block
whose ``attention.no_op`` is true has no attention (no cache); otherwise it has
``num_attention_heads // attention.n_heads_in_group`` KV heads of ``head_dim`` (or
``hidden_size // num_attention_heads``). ``replace_with_linear`` attention is refused: vLLM builds
no linear replacement, and kvcalc does not guess what it would cache.

Llama-3.3-Nemotron-Super-49B: 64 heads, n_heads_in_group 8 → 8 KV heads × (128 + 128) × 2 B =
4,096 B per token per attention layer.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, NoCache


def read_nemotron_nas(
    r: ConfigReader,
    num_layers: int,
    heads: int,
    head_dim: int,
    dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:
    blocks = r.list("block_configs")
    if blocks is None:
        raise r.missing(("block_configs",))
    if len(blocks) != num_layers:
        raise ConfigError(
            f"{r.source}: {r.path('block_configs')} has {len(blocks)} entries for {num_layers} layers",
            code="config-invalid",
        )
    out: list[Layout] = []
    for i, block in enumerate(blocks):
        attn = block.get("attention") if isinstance(block, Mapping) else None
        if not isinstance(attn, Mapping):
            raise ConfigError(
                f"{r.source}: block_configs[{i}].attention must be an object", code="config-invalid"
            )
        if attn.get("no_op") is True:
            out.append(NoCache(dtype=dtype))
            continue
        if attn.get("replace_with_linear") is True:
            raise ConfigError(
                f"{r.source}: block_configs[{i}].attention.replace_with_linear is not supported",
                hint="kvcalc sizes no-op and grouped-query attention blocks only",
                code="config-unverified",
            )
        group = attn.get("n_heads_in_group")
        if not isinstance(group, int) or isinstance(group, bool) or group < 1 or heads % group:
            raise ConfigError(
                f"{r.source}: block_configs[{i}].attention.n_heads_in_group is {group!r}, expected "
                f"a divisor of num_attention_heads {heads}",
                code="config-invalid",
            )
        out.append(
            FullAttention(dtype=dtype, kv_heads=heads // group, k_dim=head_dim, v_dim=head_dim)
        )
    attention = [x for x in out if x.has_cache]
    kv_heads = sorted({x.num_kv_heads for x in attention})
    prov["layer pattern"] = (
        f"block_configs: {len(attention)} attention blocks ({num_layers - len(attention)} no-op); "
        f"KV heads = num_attention_heads // n_heads_in_group: {kv_heads}"
    )
    return out


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    from kvcalc.hfconfig import plain_head_dim

    head_dim = plain_head_dim(r, ctx.num_attention_heads, ctx.hidden_size)
    if head_dim is None:
        raise r.missing(("head_dim", "hidden_size"))
    layouts = read_nemotron_nas(
        r, ctx.num_layers, ctx.num_attention_heads, head_dim, ctx.dtype, ctx.provenance
    )
    return with_weight_kinds(layouts)


FAMILIES = (
    Family(
        name="nemotron-nas",
        model_types={"nemotron-nas", "deci", "decilm"},
        architectures={"DeciLMForCausalLM"},
        keys={"block_configs"},
        layouts=_layouts,
        note="block_configs: per-layer KV heads, no-op attention layers",
    ),
)
