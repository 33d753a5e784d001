"""AFMoE (``AfmoeForCausalLM``: Arcee Trinity): sliding and full attention layers of one shape, MoE
MLPs after the first dense ones.

vLLM 0.33 ``models/afmoe.py`` (with transformers' ``AfmoeConfig``): a layer slides where
``config.layer_types`` says ``sliding_attention``, over ``config.sliding_window`` (the config class
writes ``layer_types`` from ``global_attn_every_n_layers`` when a checkpoint has none: layer i is
full when (i+1) % n == 0); ``num_key_value_heads`` KV heads (split over TP, or replicated when
fewer than TP), ``head_dim`` wide. Its MoE layers read ``score_func``, ``route_norm``, ``n_group``
and ``topk_group``, which ``AfmoeConfig`` does not default: a config with MoE layers and without
them fails to build (``AttributeError``): refused here. Weights: q/k per-head RMSNorms, a
sigmoid output gate (``gate_proj``, as wide as q), four RMSNorms per layer; layers from
``num_dense_layers`` on are MoE of ``num_experts`` gated experts ``moe_intermediate_size`` wide
behind an fp32 router (``GateLinear(params_dtype=torch.float32)``) and an fp32 ``expert_bias``,
with ``num_shared_experts`` shared experts as wide; the first ones a gated MLP
``intermediate_size`` wide.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import head_dims, kv_heads
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import MoeWeights
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow

#: ``AfmoeConfig`` defaults (transformers), used where the checkpoint leaves the key out
_EVERY, _WINDOW, _DENSE = 4, 1024, 1
#: what afmoe.py's AfmoeMoE reads from the config with no default in AfmoeConfig
_ROUTING = ("score_func", "route_norm", "n_group", "topk_group")


def _dense_layers(r: ConfigReader) -> int:
    return r.int("num_dense_layers", default=_DENSE, minimum=0)


def afmoe_moe(r: ConfigReader, n: int) -> tuple[MoeWeights, tuple[bool, ...]]:
    expert = r.int("moe_intermediate_size", default=1408)
    moe = MoeWeights(
        num_experts=r.int("num_experts", default=64),
        experts_per_token=r.int("num_experts_per_tok", default=6),
        expert_intermediate_size=expert,
        shared_intermediate_size=expert * r.int("num_shared_experts", default=2, minimum=0),
        # expert_bias: one fp32 value per expert, a parameter in transformers and vLLM (as ERNIE 4.5's
        # moe_statics), beside the fp32 router
        statics_bias=True,
        router_fp32=True,
    )
    first = _dense_layers(r)
    return moe, tuple(i >= first for i in range(n))


def read_afmoe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    missing = [k for k in _ROUTING if r.value(k) is None]
    if missing and _dense_layers(r) < n:
        raise ConfigError(
            f"{r.source}: {', '.join(missing)} not set, which vLLM 0.33's afmoe.py reads in its "
            "MoE layers (AttributeError; AfmoeConfig does not default them)",
            hint="Trinity checkpoints write score_func, route_norm, n_group and topk_group",
            code="config-invalid",
        )
    if r.list("layer_types") is not None:
        kinds, note = L.layer_kinds(r, n)
        if set(kinds) - {L.FULL, L.SLIDING}:
            raise ConfigError(f"{r.source}: AFMoE layer_types must be sliding/full attention",
                              code="config-unverified")  # fmt: skip
    else:
        every = r.int("global_attn_every_n_layers", default=_EVERY, minimum=1)
        kinds = [L.FULL if (i + 1) % every == 0 else L.SLIDING for i in range(n)]
        note = (
            f"AFMoE global_attn_every_n_layers {every}: layer i is full when (i+1) % {every} == 0"
        )
    prov["layer pattern"] = note + " (vLLM 0.33 afmoe.py)"
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
        name="afmoe",
        model_types={"afmoe"},
        architectures={"AfmoeForCausalLM"},
        # global_attn_every_n_layers: what the config class built layer_types from
        keys={"sliding_window", "layer_types", "global_attn_every_n_layers"},
        layer_types={"sliding_attention", "full_attention"},
        layouts=read_afmoe,
        note="AFMoE (Trinity): layer_types sliding/full, one KV shape (vLLM 0.33 afmoe.py)",
    ),
)
