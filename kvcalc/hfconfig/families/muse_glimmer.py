"""MuseGlimmer's text model (``MuseGlimmerForCausalLM`` over transformers' ``MuseGlimmerTextConfig``,
``muse_glimmer_text``): vLLM 0.33 ``models/muse_glimmer.py``, a Gemma-2 derivative.

A layer that ``layer_types`` names ``sliding_attention`` slides over ``sliding_window``, the others
are full attention (the config class writes every 4th layer full, counted from the last); every
layer caches ``num_key_value_heads`` KV heads ``head_dim`` wide (``config.head_dim``, no fallback),
``num_attention_heads`` query heads TP must divide. The per-layer RoPE bases (``layer_rope_theta``,
0: NoPE), the weightless q/k norm, the output gate and the logit soft-cap shape no cache. The
multimodal ``MuseGlimmerConfig`` (``muse_glimmer``, ``MuseGlimmerForConditionalGeneration``: the
same class) reads its ``text_config`` alike; its vision encoder holds no cache
(:func:`kvcalc.hfconfig.weights_mmmla.muse_glimmer_tower`). Weights: q/k/v/o and a full-width sigmoid ``output_gate_proj`` (q_proj's width,
split with it), unweighted q/k norms, four norms per layer, one RoPE cache unless every
``layer_rope_theta`` is 0 (:func:`muse_glimmer_uses_rope`; the bases only switch RoPE per layer,
vLLM's ``get_rope`` reads the shared ``rope_parameters``).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._windowed import typed_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout

_TYPES = ("sliding_attention", "full_attention")


def read_muse_glimmer(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, prov = ctx.num_layers, ctx.provenance
    if r.raw.get("model_type") != "muse_glimmer" and (r.prefix or r.has("vision_config")):
        raise ConfigError(
            f"{r.source}: a MuseGlimmer text config with a vision encoder beside it: the "
            "multimodal config's model type is muse_glimmer (MuseGlimmerConfig)",
            code="config-unverified",
        )
    types = r.list("layer_types")
    note = "layer_types"
    if types is None:
        types = [
            "full_attention" if (n - 1 - i) % 4 == 0 else "sliding_attention" for i in range(n)
        ]
        note = "MuseGlimmerTextConfig's layer_types (every 4th layer full, from the last)"
    unknown = sorted({str(t)[:40] for t in types if t not in _TYPES})
    if len(types) != n or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {n} layers as sliding_attention or full_attention"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    width = r.int("head_dim", default=128)  # MuseGlimmerTextConfig's default
    kv = r.int("num_key_value_heads", default=2)
    window = r.int("sliding_window", default=2048) if "sliding_attention" in types else None
    prov["head_dim"] = f"head_dim = {width} (MuseGlimmerTextConfig's default 128)"
    prov["num_kv_heads"] = f"num_key_value_heads = {kv} on every layer"
    prov["layer pattern"] = f"{note}: sliding_attention → a {window}-token window, else full"
    layouts: list[Layout] = [
        typed_layer(t, window, dtype=ctx.dtype, kv_heads=kv, head_dim=width) for t in types
    ]
    return layouts, tuple(L.weight_kind(x) for x in layouts)


def muse_glimmer_uses_rope(r: ConfigReader) -> bool:
    """``MuseGlimmerTextAttention.use_rope``: any layer with a non-zero ``layer_rope_theta``
    (none given: every layer)."""
    thetas = r.list("layer_rope_theta")
    return thetas is None or any(bool(t) for t in thetas)


FAMILIES = (
    Family(
        name="muse-glimmer",
        model_types={"muse_glimmer_text", "muse_glimmer"},
        architectures={"MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration"},
        keys={
            "layer_types",
            "sliding_window",
            "layer_rope_theta",  # RoPE base per layer (0: NoPE): not cache
            "qk_scale_factor",  # the query's pre-scale: not cache
            "final_logit_softcapping",  # logits, not cache
            "attn_logit_softcapping",  # vLLM passes none: not cache
            "query_pre_attn_scalar",  # overridden by 1/sqrt(head_dim): not cache
        },
        layer_types=set(_TYPES),
        layouts=read_muse_glimmer,
        note="MuseGlimmer (text): layer_types sliding/full over sliding_window, "
        "num_key_value_heads of head_dim (vLLM 0.33 muse_glimmer.py).",
    ),
)
