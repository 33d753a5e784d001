"""Hunyuan V3 (``HYV3ForCausalLM``, ``hy_v3``): vLLM 0.33 ``models/hy_v3.py`` over transformers'
``HYV3Config``.

Every layer is full attention (``HYV3Attention`` passes no window): ``num_key_value_heads`` KV heads
(split over TP, or replicated when fewer than the TP size), ``head_dim`` wide where the config sets
one (``HYV3Config``'s default 128; 0: ``hidden_size // num_attention_heads``; null refused, as the
config class's strict validation refuses it, recorded). The MLP of layers below ``first_k_dense_replace``
is dense, the others MoE (``expert_hidden_dim`` wide, ``route_norm``): vLLM reads those three keys,
which ``HYV3Config`` does not define (it writes ``mlp_layer_types``, which vLLM does not read), so
a config without ``first_k_dense_replace`` fails to build (``ValueError``, recorded: the config
class's defaults) and is refused here, as one with MoE layers and no ``expert_hidden_dim`` or
``route_norm`` (``AttributeError``).

Weights (:func:`hy_v3_moe`, :func:`hy_v3_qk_norm`): per-head q/k norms where ``qk_norm`` says
(vLLM's fallback path keeps them in the model dtype, as recorded on the emulated H200; its HPC
kernel path would hold them in fp32), dense ``intermediate_size`` MLPs below
``first_k_dense_replace``, then ``num_experts`` experts of ``expert_hidden_dim`` with
``num_shared_experts`` shared ones as wide, an fp32 router and fp32 ``expert_bias``.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import MoeWeights
from kvcalc.model.layouts import FullAttention, Layout


def _head_width(r: ConfigReader, ctx: LayoutContext) -> int:
    """``config.head_dim`` if truthy, else ``hidden_size // num_attention_heads`` (hy_v3.py);
    ``HYV3Config`` fills 128 where config.json has none, and its strict validation refuses null."""
    if "head_dim" in r.text and r.text["head_dim"] is None:
        raise ConfigError(
            f"{r.source}: head_dim is null: HYV3Config's strict validation refuses it (head_dim "
            "expects an int; 0 means hidden_size / num_attention_heads)",
            code="config-invalid",
        )
    width = r.int("head_dim", default=128, minimum=0)
    if width:
        ctx.provenance["head_dim"] = f"head_dim = {width} (HYV3Config's default 128)"
        return width
    heads, hidden = ctx.num_attention_heads, ctx.hidden_size
    if hidden < heads:
        raise r.missing(("head_dim", "hidden_size"))
    ctx.provenance["head_dim"] = (
        f"head_dim 0: hidden_size // num_attention_heads = {hidden} // {heads} = {hidden // heads} "
        "(vLLM 0.33 hy_v3.py)"
    )
    return hidden // heads


def _check_moe_keys(r: ConfigReader, n: int) -> None:
    """The keys hy_v3.py's decoder layers read that ``HYV3Config`` does not define."""
    if not r.has("first_k_dense_replace"):
        raise ConfigError(
            f"{r.source}: no first_k_dense_replace: vLLM 0.33's hy_v3.py fails building the "
            "model (ValueError: first_k_dense_replace not exist); HYV3Config writes "
            "mlp_layer_types, which it does not read",
            hint="set first_k_dense_replace (the number of dense layers before the MoE ones)",
            code="config-invalid",
        )
    dense = r.int("first_k_dense_replace", minimum=0)
    if dense < n:
        missing = [k for k in ("expert_hidden_dim", "route_norm") if not r.has(k)]
        if missing:
            raise ConfigError(
                f"{r.source}: MoE layers but no {' or '.join(missing)}: vLLM 0.33's hy_v3.py "
                "reads them building each MoE layer (AttributeError)",
                code="config-invalid",
            )
        r.int("expert_hidden_dim")
        r.bool("route_norm")


def hy_v3_moe(r: ConfigReader, n: int) -> tuple[MoeWeights | None, tuple[bool, ...]]:
    """``HYV3DecoderLayer``: MoE from ``first_k_dense_replace`` on (``HYV3MoE``)."""
    first = r.int("first_k_dense_replace", minimum=0)
    flags = tuple(i >= first for i in range(n))
    if not any(flags):
        return None, flags
    width = r.int("expert_hidden_dim")
    moe = MoeWeights(
        num_experts=r.int("num_experts"),
        experts_per_token=r.int("num_experts_per_tok", default=1),
        expert_intermediate_size=width,
        shared_intermediate_size=width * r.int("num_shared_experts", default=0, minimum=0),
        score_bias=True,
        router_fp32=True,
    )
    return moe, flags


def hy_v3_qk_norm(r: ConfigReader) -> bool:
    return r.bool("qk_norm")


def read_hy_v3(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    _check_moe_keys(r, n)
    width = _head_width(r, ctx)
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads") or heads)
    prov["num_kv_heads"] = (
        f"{r.path('num_key_value_heads')} = {kv}"
        if r.has("num_key_value_heads")
        else f"no num_key_value_heads: {heads} (MHA)"
    )
    prov["layer pattern"] = "Hunyuan V3: every layer full attention (hy_v3.py passes no window)"
    layouts: list[Layout] = [FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)]
    return layouts * n, (L.FULL,) * n


FAMILIES = (
    Family(
        name="hy-v3",
        model_types={"hy_v3"},
        architectures={"HYV3ForCausalLM"},
        keys={
            "expert_hidden_dim",  # the experts' width (weights)
            "route_norm",  # top-k renormalisation: not cache
            "mlp_layer_types",  # HYV3Config's MLP pattern, which hy_v3.py does not read
            "qk_norm",  # q/k RMSNorms: not cache
        },
        layouts=read_hy_v3,
        note="Hunyuan V3: full attention per layer, num_key_value_heads of head_dim (vLLM 0.33 "
        "hy_v3.py).",
    ),
)
