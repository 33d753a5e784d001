"""Laguna (``LagunaForCausalLM``, ``laguna``): vLLM 0.33 ``models/laguna.py`` over transformers'
``LagunaConfig`` (which always writes ``layer_types``, ``mlp_layer_types`` and
``num_attention_heads_per_layer``).

A layer that ``layer_types`` names ``sliding_attention`` slides over ``sliding_window``, every other
layer is full attention (no ``layer_types``: all full). Every layer caches ``num_key_value_heads``
KV heads ``head_dim`` wide (the config class's default 128; 0: ``hidden_size //`` the layer's query
heads); its query heads are
``num_attention_heads_per_layer[i]`` (Laguna-XS), which ``LagunaAttention`` asserts TP divides. The
sliding layers' attention sinks (``swa_attention_sink_enabled``), the output gate (``gating``) and
per-layer-type RoPE shape no cache. vLLM refuses a config without ``mlp_layer_types`` (one older
than transformers' class: ``ValueError``), and so does this reader.

Weights (:func:`laguna_weights`): each layer's q/k/v/o of its own query heads with per-head q/k
norms, the output gate (``gating``: ``g_proj``, one value per head, or per element of every head
otherwise) and, on sliding layers with ``swa_attention_sink_enabled``, one sink per head; dense
MLPs and, where ``mlp_layer_types`` says ``sparse``, ``num_experts`` experts with a shared expert
(``shared_expert_intermediate_size``) and an fp32 ``e_score_correction_bias`` parameter; one RoPE
cache per distinct layer-type RoPE and head width (the per-type ``rope_parameters`` the config
class writes; ``swa_rope_parameters``, a top-level ``partial_rotary_factor`` or scaled RoPE are
refused, not guessed).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.families._windowed import typed_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights, MoeWeights
from kvcalc.model.layouts import Layout

_TYPES = ("sliding_attention", "full_attention")


def _layer_list(r: ConfigReader, key: str, n: int, what: str) -> list | None:
    values = r.list(key)
    if values is not None and len(values) != n:
        raise ConfigError(
            f"{r.source}: {key} names {len(values)} layers, not num_hidden_layers {n} "
            f"(LagunaConfig refuses it)",
            code="config-invalid",
        )
    if values is not None and what == "int":
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise r.bad(r.path(key), values, "a list of positive head counts")
    return values


def _uncounted(r: ConfigReader, what: str) -> ConfigError:
    return ConfigError(
        f"{r.source}: Laguna with {what}: its weights are not counted from config.json",
        hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
    )


def laguna_weights(
    r: ConfigReader, n: int, hidden: int
) -> tuple[tuple[AttentionWeights, ...], tuple[str, ...], int, int, int]:
    """Each layer's attention, its mixer (``attention`` sliding, ``attention_global`` full),
    and the RoPE caches: rows, the first cache's width, the other caches' values."""
    heads = r.int("num_attention_heads")
    types = _layer_list(r, "layer_types", n, "str") or ["full_attention"] * n
    per_layer = _layer_list(r, "num_attention_heads_per_layer", n, "int") or [heads] * n
    width = r.int("head_dim", default=128, minimum=0)
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads") or heads)
    gating = r.value("gating", False)
    sinks = r.bool("swa_attention_sink_enabled")
    layers = []
    for t, q in zip(types, per_layer, strict=True):
        dim = width or hidden // q
        layers.append(AttentionWeights(
            num_heads=q, num_kv_heads=kv, head_dim=dim, qk_norm=True,
            head_gate=gating is True or gating == "per-head",
            output_gate=bool(gating) and not (gating is True or gating == "per-head"),
            sinks=sinks and t == "sliding_attention",
        ))  # fmt: skip
    if r.value("swa_rope_parameters") is not None or r.value("partial_rotary_factor") is not None:
        raise _uncounted(r, "swa_rope_parameters or a top-level partial_rotary_factor")
    nested = r.mapping("rope_parameters") or {}
    caches = set()
    for t, a in zip(types, layers, strict=True):
        params = nested.get(t) or nested.get("full_attention") or {}
        if not isinstance(params, dict) or params.get("rope_type", "default") != "default":
            raise _uncounted(r, "scaled or unnested RoPE")
        factor = params.get("partial_rotary_factor", 1.0)
        caches.add((a.head_dim, int(a.head_dim * factor), params.get("rope_theta")))
    rows = r.int("max_position_embeddings")
    widths = sorted(c[1] for c in caches)
    mixers = tuple("attention" if t == "sliding_attention" else "attention_global" for t in types)
    return tuple(layers), mixers, rows, widths[0], rows * sum(widths[1:])


def laguna_moe(r: ConfigReader, n: int) -> tuple[MoeWeights | None, tuple[bool, ...]]:
    flags = tuple(t == "sparse" for t in (_layer_list(r, "mlp_layer_types", n, "str") or []))
    if not any(flags):
        return None, flags
    moe = MoeWeights(
        num_experts=r.int("num_experts"),
        experts_per_token=r.int("num_experts_per_tok", default=1),
        expert_intermediate_size=r.int("moe_intermediate_size"),
        shared_intermediate_size=r.int("shared_expert_intermediate_size", default=0, minimum=0),
        statics_bias=True,
        statics_fp32=True,
    )
    return moe, flags


def read_laguna(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    if _layer_list(r, "mlp_layer_types", n, "str") is None:
        raise ConfigError(
            f"{r.source}: no mlp_layer_types: vLLM 0.33's laguna.py refuses the config (it needs "
            "transformers' LagunaConfig, which writes it)",
            code="config-invalid",
        )
    types = _layer_list(r, "layer_types", n, "str")
    note = "layer_types"
    if types is None:
        types, note = ["full_attention"] * n, "no layer_types: every layer full attention"
    unknown = sorted({str(t)[:40] for t in types if t not in _TYPES})
    if unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name sliding_attention or full_attention layers, got "
            + ", ".join(unknown),
            code="config-invalid",
        )
    per_layer = _layer_list(r, "num_attention_heads_per_layer", n, "int")
    ctx.query_heads.update(per_layer or ())
    layer_heads = per_layer or [heads] * n
    if "head_dim" in r.text and r.text["head_dim"] is None:
        raise ConfigError(
            f"{r.source}: head_dim is null: LagunaConfig's strict validation refuses it (head_dim "
            "expects an int; 0 means hidden_size // each layer's query heads)",
            code="config-invalid",
        )
    width = r.int("head_dim", default=128, minimum=0)  # LagunaConfig's default
    if width:
        prov["head_dim"] = f"head_dim = {width} (LagunaConfig's default 128)"
        widths = [width] * n
    else:  # LagunaAttention: head_dim or hidden_size // the layer's own query heads
        if ctx.hidden_size < max(layer_heads):
            raise r.missing(("head_dim", "hidden_size"))
        widths = [ctx.hidden_size // h for h in layer_heads]
        prov["head_dim"] = (
            f"no head_dim: hidden_size / each layer's query heads = {sorted(set(widths))}"
        )
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads") or heads)
    prov["num_kv_heads"] = f"num_key_value_heads = {kv} on every layer"
    # read without a sliding layer too: vLLM's --disable-sliding-window caps the length at it
    window = r.int("sliding_window") if "sliding_attention" in types else None
    if window is None:
        r.int("sliding_window", default=None)
    prov["layer pattern"] = f"{note}: sliding_attention → a {window}-token window, else full"
    if per_layer is not None and set(per_layer) != {heads}:
        prov["query heads"] = (
            f"num_attention_heads_per_layer: {sorted(set(per_layer))} (TP must divide each)"
        )
    layouts: list[Layout] = [
        typed_layer(t, window, dtype=ctx.dtype, kv_heads=kv, head_dim=w)
        for t, w in zip(types, widths, strict=True)
    ]
    return layouts, tuple(L.weight_kind(x) for x in layouts)


FAMILIES = (
    Family(
        name="laguna",
        model_types={"laguna"},
        architectures={"LagunaForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "num_attention_heads_per_layer",
            "mlp_layer_types",  # dense/sparse MLP per layer (weights)
            "swa_attention_sink_enabled",  # sinks on the sliding layers are logits, not cache
            "swa_rope_parameters",  # the sliding layers' RoPE: not cache
            "gating",  # the output gate: not cache
        },
        layer_types=set(_TYPES),
        layouts=read_laguna,
        note="Laguna: layer_types sliding/full over sliding_window, per-layer query heads (vLLM "
        "0.33 laguna.py).",
    ),
)
