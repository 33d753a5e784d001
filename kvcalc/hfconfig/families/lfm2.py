"""LFM2 (``lfm2.py``, ``lfm2_moe.py`` in vLLM 0.33.0): ``layer_types`` of ``conv`` / ``full_attention``,
or (older configs) ``full_attn_idxs`` with every other layer a convolution (transformers'
``Lfm2Config``). The conv state is ``(conv_L_cache − 1, conv_dim)`` (LFM2) or
``(conv_L_cache − 1, hidden_size)`` (LFM2-MoE); attention heads are
``hidden_size // num_attention_heads`` wide. The weight count counts the short convolutions of
both (:func:`lfm2_short_conv`), LFM2's feed-forward width :func:`lfm2_ffn` and LFM2-MoE's
placement of its experts (:func:`lfm2_moe_layers`: dense ``intermediate_size`` MLPs in the first
``num_dense_layers`` layers, ``vllm/model_executor/models/lfm2_moe.py``).

LFM2-VL (``lfm2_vl``: ``Lfm2VlForConditionalGeneration``, ``lfm2_vl.py``) builds its ``text_config``
as LFM2 (``init_vllm_registered_model``), but sizes the conv state from its own
``get_mamba_state_shape_from_config``: ``(conv_L_cache − 1, text hidden_size)``, not ``conv_dim``
(which its conv layers still read). ``lfm2.py`` reads ``block_dim`` and ``conv_dim`` as config
attributes, which transformers 5.20's ``Lfm2Config`` sets neither of: ``Lfm2VlConfig()`` fails to
build (``AttributeError``, recorded) and a ``text_config`` without them is refused. The SigLIP2
tower holds no cache.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import ShortConvWeights
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout
from kvcalc.model.recurrent_layouts import ShortConvState

_LFM2_KINDS = {"conv": "conv", "full_attention": "attention"}


def read_lfm2(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    types = r.list("layer_types")
    if types is not None:
        note = "layer_types: conv → short convolution, full_attention → attention"
    else:
        idxs = r.index_list("full_attn_idxs")
        idxs = tuple(range(num_layers)) if idxs is None else idxs
        types = ["full_attention" if i in idxs else "conv" for i in range(num_layers)]
        note = f"full_attn_idxs {list(idxs)}: attention there, short convolution elsewhere"
    unknown = sorted({str(t)[:40] for t in types if t not in _LFM2_KINDS})
    if len(types) != num_layers or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {num_layers} layers as conv or full_attention"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    if hidden <= 0 or hidden % heads:
        raise r.missing(("hidden_size",))
    head_dim = hidden // heads
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads") or heads)
    attention = FullAttention(dtype=dtype, kv_heads=kv, k_dim=head_dim, v_dim=head_dim)
    moe = r.str("model_type", "") == "lfm2_moe"
    vl = r.raw.get("model_type") == "lfm2_vl"  # lfm2_vl.py sizes the state from hidden_size
    # lfm2.py reads block_dim (every layer's MLP) and conv_dim (each conv layer) as attributes,
    # which transformers 5.20's Lfm2Config sets neither of (vLLM fails with AttributeError)
    needed = ["block_dim"] + (["conv_dim"] if "conv" in types else [])
    missing = [k for k in needed if r.text.get(k) is None]
    if vl and missing:
        raise ConfigError(
            f"{r.source}: no {', '.join(r.prefix + k for k in missing)}: vLLM 0.33's lfm2.py "
            "reads them as config attributes, and transformers 5.20's Lfm2Config sets none "
            "(vLLM fails with AttributeError building the model)",
            hint="LFM2 checkpoints say block_dim and conv_dim (the hidden size); add them",
            code="config-invalid",
        )
    width = hidden if moe or vl else r.int("conv_dim")
    kernel = r.int("conv_L_cache", default=3)
    conv = ShortConvState(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel, conv_dim=width)
    prov["layer pattern"] = note
    prov["short_conv"] = (
        f"conv state ({kernel} − 1, {'hidden_size' if moe or vl else 'conv_dim'} {width}) in the model "
        "dtype (conv_L_cache − 1 columns)"
    )
    return [attention if _LFM2_KINDS[t] == "attention" else conv for t in types]


def lfm2_ffn(r: ConfigReader) -> int:
    """transformers' Lfm2MLP width: ``block_ff_dim`` (else ``intermediate_size``), auto-adjusted
    to 2/3, times ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of``
    (LFM2-1.2B: 12,288 → 8,192)."""
    size = r.int("block_ff_dim", "intermediate_size")
    if r.bool("block_auto_adjust_ff_dim", True):
        size = int(2 * size / 3)
        mult = r.value("block_ffn_dim_multiplier", 1.0)
        if isinstance(mult, (int, float)) and not isinstance(mult, bool) and 0 < mult < 1e3:
            multiple = r.int("block_multiple_of", default=256)
            size = multiple * -(-int(mult * size) // multiple)
    return size


def lfm2_short_conv(r: ConfigReader) -> ShortConvWeights:
    """LFM2's short-convolution mixer weights: a ``conv_L_cache``-wide kernel, ``conv_bias``."""
    return ShortConvWeights(conv_kernel=r.int("conv_L_cache", default=3), bias=r.bool("conv_bias"))


def lfm2_moe_layers(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """LFM2-MoE: layer ``i`` is MoE unless ``i < num_dense_layers`` (Lfm2MoeConfig default 2)."""
    dense = r.int("num_dense_layers", default=2, minimum=0)
    return tuple(i >= dense for i in range(n))


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_lfm2(
        r, ctx.num_layers, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance
    )
    return hybrid_weight_kinds(layouts, {ShortConvState: L.SHORT_CONV})


FAMILIES = (
    Family(
        name="lfm2",
        model_types={"lfm2", "lfm2_moe", "lfm2_vl"},
        architectures={"Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Lfm2VlForConditionalGeneration"},
        keys={
            "layer_types",
            "full_attn_idxs",
            "conv_L_cache",
            "conv_dim",
            "conv_bias",
            "conv_dim_out",
            "block_dim",
            "block_ff_dim",
            "conv_use_xavier_init",
        },
        layer_types={"conv", "full_attention"},
        layouts=_layouts,
        note="LFM2: short convolution layers and full attention.",
    ),
)
