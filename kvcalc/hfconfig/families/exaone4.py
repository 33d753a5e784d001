"""EXAONE 4.0 (``Exaone4ForCausalLM``): sliding and full attention layers of one shape.

vLLM 0.33 ``models/exaone4.py`` reads ``config.layer_types`` (layer i slides where it says
``sliding_attention``, with ``config.sliding_window``); transformers' ``Exaone4Config`` builds the list
from ``sliding_window_pattern`` (default 4: layer i slides unless (i+1) % 4 == 0) when a checkpoint
has none. Heads are ``head_dim`` wide, else ``hidden_size / num_attention_heads``.

EXAONE 4.5 (``exaone4_5``: ``Exaone4_5_ForConditionalGeneration``): vLLM 0.33's ``exaone4_5.py``
builds its ``text_config`` as ``Exaone4ForCausalLM`` (``architectures=["Exaone4ForCausalLM"]``),
the same cache; the vision tower (Qwen2.5-VL's with grouped-query attention) holds none.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import head_dims, kv_heads
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow

#: ``Exaone4Config`` defaults (transformers), used where the checkpoint leaves the key out
_PATTERN, _WINDOW = 4, 4096


def read_exaone4(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    if r.list("layer_types") is not None:
        kinds, note = L.layer_kinds(r, n)
        if set(kinds) - {L.FULL, L.SLIDING}:
            raise ConfigError(f"{r.source}: EXAONE 4 layer_types must be sliding/full attention",
                              code="config-unverified")  # fmt: skip
    else:
        if "sliding_window" in r.text and r.text["sliding_window"] is None:
            raise ConfigError(
                f"{r.source}: sliding_window null and no layer_types: transformers' Exaone4Config "
                "then sets sliding_window_pattern 0 and divides by it (the config does not load)",
                code="config-invalid",
            )
        pattern = r.int("sliding_window_pattern", default=_PATTERN)
        kinds = [L.FULL if (i + 1) % pattern == 0 else L.SLIDING for i in range(n)]
        note = f"EXAONE 4 sliding_window_pattern {pattern}: layer i slides unless (i+1) % {pattern} == 0"
    prov["layer pattern"] = note
    window = r.int("sliding_window", default=_WINDOW) if L.SLIDING in kinds else 0
    if window:
        prov["sliding_window"] = f"{r.path('sliding_window')} = {window}"
    kv = kv_heads(r, heads, n, prov)
    hd = head_dims(r, heads, ctx.hidden_size, n, prov)
    out: list[Layout] = []
    for i, kind in enumerate(kinds):
        if kind is L.SLIDING:
            out.append(SlidingWindow(dtype=ctx.dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i],
                                     sliding_window=window))  # fmt: skip
        else:
            out.append(FullAttention(dtype=ctx.dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i]))
    return L.with_weight_kinds(out)


FAMILIES = (
    Family(
        name="exaone4",
        model_types={"exaone4", "exaone4_5"},
        architectures={"Exaone4ForCausalLM", "Exaone4_5_ForConditionalGeneration"},
        keys={"sliding_window", "sliding_window_pattern", "layer_types"},
        layer_types={"sliding_attention", "full_attention"},
        layouts=read_exaone4,
        note="EXAONE 4: layer_types (or sliding_window_pattern) sliding/full, one KV shape",
    ),
)
