"""Falcon-H1 (``falcon_h1.py`` in vLLM 0.33.0, ``FalconH1ParallelHybrid``): every layer runs attention
*and* a Mamba2 mixer side by side (width ``mamba_d_ssm``, else ``mamba_expand · hidden_size``;
:mod:`._mamba`). The weight count counts both.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.families._mamba import MAMBA_MIXER_KEYS, attention_layer, mamba2_state
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout
from kvcalc.model.recurrent_layouts import ParallelHybrid


def read_falcon_h1(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    if r.value("attn_layer_indices") is not None:
        raise ConfigError(
            f"{r.source}: attn_layer_indices on Falcon-H1 is not supported: vLLM 0.33 builds "
            "attention and Mamba2 in every layer and does not read it",
            hint="kvcalc refuses layouts it cannot size exactly; please file an issue",
            code="config-unsupported",
        )
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads") or heads)
    head_dim = r.int("head_dim", default=None)
    if head_dim is None:
        head_dim = attention_layer(r, heads, hidden, dtype).k_dim
    attention = FullAttention(dtype=dtype, kv_heads=kv, k_dim=head_dim, v_dim=head_dim)
    mamba = mamba2_state(r, hidden, dtype, prov)
    prov["layer pattern"] = "Falcon-H1: attention and Mamba2 side by side in every layer"
    return [ParallelHybrid(dtype=dtype, attention=attention, mixer=mamba)] * num_layers


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_falcon_h1(
        r, ctx.num_layers, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance
    )
    return hybrid_weight_kinds(layouts, {ParallelHybrid: L.PARALLEL})


FAMILIES = (
    Family(
        name="falcon-h1",
        model_types={"falcon_h1"},
        architectures={"FalconH1ForCausalLM"},
        keys={
            "ssm_multipliers",
            "ssm_in_multiplier",
            "ssm_out_multiplier",  # muP scales, not cache
            "attn_layer_indices",
            *MAMBA_MIXER_KEYS,
        },
        layer_types=frozenset(),
        layouts=_layouts,
        note="Falcon-H1: parallel attention and Mamba2 in every layer.",
    ),
)
