"""Beam (``BeamForCausalLM``, ``beam``): vLLM 0.33 ``models/beam/nvidia`` over vLLM's own
``BeamConfig`` (``transformers_utils/configs/beam.py``).

A layer that ``layer_types`` names ``sliding_attention`` slides over ``sliding_window`` (the config
class writes every layer sliding when unset, default 4,096), the others are full attention (the
model clears ``CacheConfig.sliding_window``). Every layer caches ``num_key_value_heads`` KV heads
``head_dim`` wide (the class's default null: ``hidden_size // num_attention_heads``);
``num_attention_heads`` query heads TP must divide. The NoPE full layers' SSMax scaling and the
output gate shape no cache. Only TP 1 was recorded (the model's fused all-reduce asks for a CUDA
driver the reference harness does not have): a larger TP size is refused
(``unsupported-parallelism``), not guessed. Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._windowed import typed_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout

_TYPES = ("sliding_attention", "full_attention")


def read_beam(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    types = r.list("layer_types")
    note = "layer_types"
    if types is None:
        types, note = (
            ["sliding_attention"] * n,
            "no layer_types: BeamConfig writes every layer sliding",
        )
    unknown = sorted({str(t)[:40] for t in types if t not in _TYPES})
    if len(types) != n or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {n} layers as sliding_attention or full_attention "
            "(BeamConfig refuses it: ValueError)",
            code="config-invalid",
        )
    width = r.int("head_dim", default=0, minimum=0)
    if width:
        prov["head_dim"] = f"head_dim = {width}"
    else:
        if ctx.hidden_size < heads:
            raise r.missing(("head_dim", "hidden_size"))
        width = ctx.hidden_size // heads
        prov["head_dim"] = (
            f"no head_dim: hidden_size // num_attention_heads = {ctx.hidden_size} // {heads} = {width}"
        )
    kv = r.int("num_key_value_heads", default=4)
    window = r.int("sliding_window", default=4096) if "sliding_attention" in types else None
    prov["num_kv_heads"] = f"num_key_value_heads = {kv} on every layer"
    prov["layer pattern"] = f"{note}: sliding_attention → a {window}-token window, else full"
    ctx.tp_limit[1] = (
        "Beam was checked at TP 1 only: vLLM 0.33's beam/nvidia fused all-reduce could not be "
        "built on the reference harness above it",
        "unsupported-parallelism",
    )
    layouts: list[Layout] = [
        typed_layer(t, window, dtype=ctx.dtype, kv_heads=kv, head_dim=width) for t in types
    ]
    return layouts, (L.UNCOUNTED,) * n


FAMILIES = (
    Family(
        name="beam",
        model_types={"beam"},
        architectures={"BeamForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "mlp_layer_types",  # dense/sparse MLP per layer (weights)
            "final_logit_softcapping",  # logits, not cache
        },
        layer_types=set(_TYPES),
        layouts=read_beam,
        note="Beam: layer_types sliding/full over sliding_window, num_key_value_heads of head_dim "
        "(vLLM 0.33 models/beam).",
    ),
)
