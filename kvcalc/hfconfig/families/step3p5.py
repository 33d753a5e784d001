"""Step-3.5 / Step-3.7's text model (``Step3p5ForCausalLM``, ``step3p5``): vLLM 0.33
``models/step3p5.py`` over transformers' ``Step3p7TextConfig`` (vLLM's config registry maps
``step3p5`` to it: the checkpoints' own remote code fails validation).

The config class reads both its own keys and the checkpoints' ones (``num_attention_groups`` for
``num_key_value_heads``, ``attention_other_setting`` for the sliding layers' query heads,
``moe_layers_enum`` for ``mlp_layer_types``); a ``layer_types`` padded with one entry per MTP layer
(``num_nextn_predict_layers``) is cut to ``num_hidden_layers``, any other length refused. Without
``layer_types`` every layer is full attention.

- a ``sliding_attention`` layer slides over ``sliding_window`` (none set: full), every other layer is
  full attention (the decoder clears ``CacheConfig.sliding_window``);
- every layer caches ``num_attention_groups`` KV heads ``head_dim`` wide (else ``hidden_size`` /
  the layer's query heads); the sliding layers' query heads are ``num_sliding_attention_heads``
  (else ``attention_other_setting.num_attention_heads``), which TP must divide as it must
  ``num_attention_heads``;
- an MoE layer (``mlp_layer_types`` ``sparse``; else ``moe_layers_enum``; else layers 3 and up) reads
  ``use_moe_router_bias``, ``need_fp32_gate`` and ``norm_expert_weight``, which ``Step3p7TextConfig``
  does not define: without them vLLM fails building it (``AttributeError``, recorded for the config
  class's defaults), with either flag false it asserts. Refused here as there.

Weights (:func:`step3p5_weights`): each layer type's q/k/v/o of its query heads over
``num_attention_groups`` KV heads, per-head q/k norms and the head-wise output gate
(``use_head_wise_attn_gate``: ``g_proj``, heads × hidden); dense ``intermediate_size`` MLPs, and on
the MoE layers ``moe_num_experts`` of ``moe_intermediate_size`` (top ``moe_top_k``) with the shared
expert (``share_expert_dim``), an fp32 router (``need_fp32_gate``) and fp32 ``router_bias``; one
RoPE cache per distinct layer-type RoPE (``Step3p7TextConfig`` resolves ``rope_theta`` and
``partial_rotary_factors`` per type, from each type's first layer). Counted only where the layout
is uniform: a config with ``per_layer_config``, ``use_rope_layers``, scaled RoPE or no
``head_dim`` is refused, not guessed. transformers' Step3p7TextModel builds the same parameters.
"""

from __future__ import annotations

from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._windowed import typed_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights, MoeWeights
from kvcalc.model.layouts import Layout

_TYPES = ("sliding_attention", "full_attention")


def _trimmed(r: ConfigReader, key: str, n: int, mtp: int) -> list[Any] | None:
    """A per-layer list as ``Step3p7TextConfig`` keeps it: cut to ``n`` when padded with the MTP
    layers, refused at any other length (its strict validation)."""
    values = r.list(key)
    if values is None:
        return None
    if mtp and len(values) == n + mtp:
        return values[:n]
    if len(values) != n:
        raise ConfigError(
            f"{r.source}: {key} names {len(values)} layers, not num_hidden_layers {n}"
            + (f" (+ {mtp} MTP layers)" if mtp else "")
            + " (Step3p7TextConfig refuses it)",
            code="config-invalid",
        )
    return values


def _moe_layers(r: ConfigReader, n: int, mtp: int) -> list[bool]:
    mlp = _trimmed(r, "mlp_layer_types", n, mtp)
    if mlp is not None:
        return [t == "sparse" for t in mlp]
    raw = r.value("moe_layers_enum")
    if raw is None:
        return [i >= 3 for i in range(n)]
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list):
        raise r.bad(r.path("moe_layers_enum"), raw, "a comma-separated string or a list")
    try:
        chosen = {int(i) for i in items if str(i).strip()}
    except ValueError:
        raise r.bad(r.path("moe_layers_enum"), raw, "layer indices") from None
    return [i in chosen for i in range(n)]


def _check_moe_keys(r: ConfigReader) -> None:
    """``FusedMoEBlock`` reads these three attributes and asserts the two flags."""
    missing = [k for k in ("use_moe_router_bias", "need_fp32_gate", "norm_expert_weight")
               if r.value(k) is None]  # fmt: skip
    if missing:
        raise ConfigError(
            f"{r.source}: MoE layers but no {', '.join(missing)}: vLLM 0.33's step3p5.py reads "
            "them building each MoE layer (AttributeError; Step3p7TextConfig does not define them)",
            hint="Step-3.5 checkpoints set use_moe_router_bias and need_fp32_gate true",
            code="config-invalid",
        )
    for key in ("use_moe_router_bias", "need_fp32_gate"):
        if not r.bool(key):
            raise ConfigError(
                f"{r.source}: {key} is false: vLLM 0.33's step3p5.py asserts it is true",
                code="config-invalid",
            )
    r.bool("norm_expert_weight")


def _sliding_heads(r: ConfigReader, heads: int) -> int:
    if r.value("num_sliding_attention_heads") is not None:
        return r.int("num_sliding_attention_heads")
    other = r.value("attention_other_setting")
    if isinstance(other, dict) and other.get("num_attention_heads") is not None:
        value = other["num_attention_heads"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise r.bad(f"{r.path('attention_other_setting')}.num_attention_heads", value,
                        "a positive head count")  # fmt: skip
        return value
    return heads


def _uncounted(r: ConfigReader, what: str) -> ConfigError:
    return ConfigError(
        f"{r.source}: Step-3.5 with {what}: its weights are not counted from config.json",
        hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
    )


def step3p5_weights(
    r: ConfigReader, n: int
) -> tuple[AttentionWeights, AttentionWeights, tuple[str, ...], MoeWeights, tuple[bool, ...], int]:
    """The sliding and full layers' attention, each layer's (``attention`` for a
    ``sliding_attention`` layer, with or without a window; ``attention_global`` for a full one),
    the MoE and its layers, and the RoPE cache rows (``max_position_embeddings`` per distinct
    layer-type RoPE; the width is ``head_dim`` × the factor)."""
    for key in ("per_layer_config", "use_rope_layers", "rope_scaling"):
        if r.value(key) is not None:
            raise _uncounted(r, key)
    width = r.int("head_dim", default=128, minimum=0)
    if not width:
        raise _uncounted(r, "no head_dim (widths per layer)")
    mtp = r.int("num_nextn_predict_layers", default=0, minimum=0)
    heads = r.int("num_attention_heads")
    kv = r.int("num_attention_groups", "num_key_value_heads", default=8)
    gate = r.bool("use_head_wise_attn_gate")
    full = AttentionWeights(num_heads=heads, num_kv_heads=kv, head_dim=width, qk_norm=True,
                            head_gate=gate)  # fmt: skip
    sliding = AttentionWeights(num_heads=_sliding_heads(r, heads), num_kv_heads=kv,
                               head_dim=width, qk_norm=True, head_gate=gate)  # fmt: skip
    flags = tuple(_moe_layers(r, n, mtp))
    moe = MoeWeights(
        num_experts=r.int("moe_num_experts"),
        experts_per_token=r.int("moe_top_k"),
        expert_intermediate_size=r.int("moe_intermediate_size"),
        shared_intermediate_size=r.int("share_expert_dim"),
        score_bias=True,
        router_fp32=True,
    )
    types = _trimmed(r, "layer_types", n, mtp) or ["full_attention"] * n
    thetas = r.value("rope_theta", 10000.0)
    factors = r.list("partial_rotary_factors")
    ropes = set()
    for kind in set(types):
        first = types.index(kind)  # Step3p7TextConfig: each type's first layer's values
        theta = thetas[first] if isinstance(thetas, list) else thetas
        factor = factors[first] if factors else 1.0
        if factor not in (1, 0.5):  # Step3p5Attention asserts 1 or 0.5
            raise _uncounted(r, f"partial_rotary_factors {factor}")
        ropes.add((theta, factor))
    if len({f for _, f in ropes}) > 1:
        raise _uncounted(r, "RoPE widths that differ by layer type")
    mixers = tuple("attention" if t == "sliding_attention" else "attention_global" for t in types)
    return sliding, full, mixers, moe, flags, r.int("max_position_embeddings") * len(ropes)


def read_step3p5(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    if r.str("att_impl_type", "GQA") != "GQA":
        raise ConfigError(
            f"{r.source}: att_impl_type {r.str('att_impl_type')!r}: vLLM 0.33's step3p5.py "
            "supports GQA only (ValueError)",
            code="config-invalid",
        )
    mtp = r.int("num_nextn_predict_layers", default=0, minimum=0)
    if any(_moe_layers(r, n, mtp)):
        _check_moe_keys(r)
    types = _trimmed(r, "layer_types", n, mtp)
    note = "layer_types" + (f" (cut to {n} layers: {mtp} MTP entries)" if mtp else "")
    if types is None:
        types, note = ["full_attention"] * n, "no layer_types: every layer full attention"
    unknown = sorted({str(t)[:40] for t in types if t not in _TYPES})
    if unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name sliding_attention or full_attention layers, got "
            + ", ".join(unknown),
            code="config-invalid",
        )
    slide_heads = _sliding_heads(r, heads)
    layer_heads = [slide_heads if t == "sliding_attention" else heads for t in types]
    ctx.query_heads.update(layer_heads)
    kv = r.int("num_attention_groups", "num_key_value_heads", default=8)
    prov["num_kv_heads"] = (
        f"{r.path('num_attention_groups') if r.has('num_attention_groups') else 'num_key_value_heads'}"
        f" = {kv} on every layer (Step3p7TextConfig's default 8)"
    )
    if "head_dim" in r.text and r.text["head_dim"] is None:
        raise ConfigError(
            f"{r.source}: head_dim is null: Step3p7TextConfig's strict validation refuses it "
            "(head_dim expects an int)",
            code="config-invalid",
        )
    width = r.int("head_dim", default=128, minimum=0)  # the config class's default
    if width:
        prov["head_dim"] = f"head_dim = {width} (Step3p7TextConfig's default 128)"
        widths = [width] * n
    else:  # Step3p5Attention: head_dim or hidden_size // the layer's query heads
        if ctx.hidden_size < max(layer_heads):
            raise r.missing(("head_dim", "hidden_size"))
        widths = [ctx.hidden_size // h for h in layer_heads]
        prov["head_dim"] = (
            f"no head_dim: hidden_size / each layer's query heads = {sorted(set(widths))}"
        )
    window = r.int("sliding_window", default=None)
    prov["layer pattern"] = (
        f"{note}: sliding_attention → a {window}-token window, else full"
        if window is not None
        else f"{note}: no sliding_window, so every layer full attention"
    )
    if slide_heads != heads and "sliding_attention" in types:
        prov["query heads"] = f"{slide_heads} on the sliding layers, {heads} on the others"
    layouts: list[Layout] = [
        typed_layer(t, window, dtype=ctx.dtype, kv_heads=kv, head_dim=w)
        for t, w in zip(types, widths, strict=True)
    ]
    return L.with_weight_kinds(layouts)


FAMILIES = (
    Family(
        name="step3p5",
        model_types={"step3p5"},
        architectures={"Step3p5ForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "num_attention_groups",
            "num_sliding_attention_heads",
            "attention_other_setting",  # the checkpoints' sliding-layer query heads
            "mtp_layer_types",  # the MTP layers' own types (the draft's, not these layers')
            "mtp_mlp_layer_types",
            "mlp_layer_types",  # dense/sparse MLP per layer (weights)
            "moe_layers_enum",  # the checkpoints' MoE layer list (weights)
            "use_moe_router_bias",  # must be true (asserted)
            "need_fp32_gate",  # must be true (asserted)
            "norm_expert_weight",  # top-k renormalisation: not cache
            "per_layer_config",  # transformers' per-layer overrides: the sliding layers' heads
            "att_impl_type",  # GQA only
            "use_head_wise_attn_gate",  # the output gate: not cache
            "use_rope_layers",  # RoPE per layer: not cache
            "yarn_only_types",  # RoPE scaling per layer type: not cache
            "partial_rotary_factors",  # RoPE width per layer: not cache
            "swiglu_limits",  # MLP clamps: not cache
            "swiglu_limits_shared",
            "query_pre_attn_scalar",  # attention scale: not cache
        },
        layer_types=set(_TYPES),
        layouts=read_step3p5,
        note="Step-3.5: layer_types sliding/full over sliding_window, num_attention_groups KV "
        "heads on every layer (vLLM 0.33 step3p5.py).",
    ),
)
