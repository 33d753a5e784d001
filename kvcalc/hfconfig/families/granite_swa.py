"""Granite with sliding windows (``GraniteSWAForCausalLM``, ``granite_swa``) and its MoE
(``GraniteMoeSWAForCausalLM``, ``granitemoe_swa``): vLLM 0.33 serves them with ``granite.py`` and
``granitemoeshared.py``, whose ``granite_layer_attn_params`` gives a layer ``sliding_window`` where
``layer_types`` says ``sliding_attention`` (full attention elsewhere), a per-head attention sink
(``attention_sinks``, default: on whenever ``layer_types`` is set) and a per-layer RoPE base
(``layer_rope_theta``, 0 for NoPE); neither the sinks nor the RoPE bases shape the cache.

transformers' ``GraniteSWAConfig`` / ``GraniteMoeSWAConfig`` always write ``layer_types`` (every
4th layer full from layer 0 when unset). Heads are ``head_dim`` wide (else ``hidden_size /
num_attention_heads``) in ``granite.py``, always ``hidden_size / num_attention_heads`` in
``granitemoe.py``'s attention. The weights add each layer's ``sinks`` (one per head).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.families._windowed import typed_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import kv_heads
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout

_TYPES = ("sliding_attention", "full_attention")


def read_granite_swa(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, prov = ctx.num_layers, ctx.provenance
    types = r.list("layer_types")
    note = "layer_types"
    if types is None:
        types = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n)]
        note = "the config class's layer_types (every 4th layer full from layer 0)"
    unknown = sorted({str(t)[:40] for t in types if t not in _TYPES})
    if len(types) != n or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {n} layers as sliding_attention or full_attention"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    window = r.int("sliding_window", default=128) if "sliding_attention" in types else None
    if r.str("model_type", "") == "granitemoe_swa":
        width = split_head_width(r, ctx, "granitemoe.py")
    else:
        width = r.int("head_dim", default=None) or split_head_width(r, ctx, "granite.py")
    kv = kv_heads(r, ctx.num_attention_heads, n, prov)
    prov["layer pattern"] = f"{note}: sliding_attention → a {window}-token window, else full"
    layouts: list[Layout] = [
        typed_layer(t, window, dtype=ctx.dtype, kv_heads=k, head_dim=width)
        for t, k in zip(types, kv, strict=True)
    ]
    return L.with_weight_kinds(layouts)


def granite_swa_sinks(r: ConfigReader) -> bool:
    """transformers builds every layer's ``sinks``; vLLM's ``attention_sinks`` (default on) too."""
    return r.bool("attention_sinks", True)


_KEYS = {
    "layer_types",
    "sliding_window",
    "layer_rope_theta",  # RoPE base per layer (0: NoPE): not cache
    "attention_sinks",  # sinks are logits, not cache
}

FAMILIES = (
    Family(
        name="granite-swa",
        model_types={"granite_swa"},
        architectures={"GraniteSWAForCausalLM"},
        keys=_KEYS,
        layer_types=set(_TYPES),
        layouts=read_granite_swa,
        note="Granite SWA: layer_types sliding/full over sliding_window, attention sinks.",
    ),
    Family(
        name="granitemoe-swa",
        model_types={"granitemoe_swa"},
        architectures={"GraniteMoeSWAForCausalLM"},
        keys=_KEYS,
        layer_types=set(_TYPES),
        layouts=read_granite_swa,
        note="Granite MoE SWA: layer_types sliding/full, heads hidden_size / num_attention_heads.",
    ),
)
