"""MiMo-V2 / MiMo-V2-Flash: ``hybrid_layer_pattern`` with per-type heads and K/V widths.

From ``vllm/model_executor/models/mimo_v2.py`` (vLLM 0.33.0), ``MiMoV2FlashDecoderLayer``: a layer
whose ``hybrid_layer_pattern`` entry is 1 is sliding-window attention with
``swa_num_key_value_heads`` heads, K width ``swa_head_dim`` and V width ``swa_v_head_dim``
(``swa_head_dim`` when absent) over ``sliding_window_size`` tokens; a 0 is full attention with
``num_key_value_heads``, ``head_dim`` and ``v_head_dim``. Attention sinks add no cache.
``attention_chunk_size`` is present in the published config but unused: vLLM deletes it
(``_strip_mimo_v2_attention_chunk_size``). The MTP layers (``num_nextn_predict_layers``) are not
built without speculative decoding.

MiMo-V2-Flash: sliding 8 × (192 + 128) × 2 B = 5,120 B per token per layer, full
4 × (192 + 128) × 2 B = 2,560 B; 39 sliding + 9 full layers.

Weights (``MiMoV2Attention``, ``MiMoV2MoE``): each layer type's q/k/v of its own heads, V
``v_head_dim`` wide and o_proj reading heads × ``v_head_dim``; the sliding layers' one sink per
head (``add_swa_attention_sink_bias``; the full layers build none whatever
``add_full_attention_sink_bias`` says); layer ``i`` is MoE when ``moe_layer_freq`` is a list whose
entry ``i`` is true (``is_moe_layer``: an int, or no key, makes every layer dense), an fp32 router
(``moe_router_dtype``) and fp32 ``e_score_correction_bias``, no shared experts; two RoPE caches
when ``swa_rope_theta`` differs from ``rope_theta`` (``get_rope`` caches one per theta).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow


def read_mimo_v2(
    r: ConfigReader, num_layers: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    pattern = r.list("hybrid_layer_pattern")
    if pattern is None:
        raise r.missing(("hybrid_layer_pattern",))
    if len(pattern) != num_layers or any(v not in (0, 1) or isinstance(v, bool) for v in pattern):
        raise ConfigError(
            f"{r.source}: {r.path('hybrid_layer_pattern')} must list 0 (full) or 1 (sliding) for "
            f"each of {num_layers} layers",
            code="config-invalid",
        )
    kv = r.int("num_key_value_heads")
    k_dim = r.int("head_dim")
    v_dim = r.int("v_head_dim", default=k_dim)
    swa_kv = r.int("swa_num_key_value_heads")
    swa_k = r.int("swa_head_dim")
    swa_v = r.int("swa_v_head_dim", default=swa_k)
    # vLLM reads config.sliding_window_size (transformers' own sliding_window is that + 1)
    window = r.int("sliding_window_size")
    r.int("sliding_window", default=None)
    r.value("attention_chunk_size")  # read and ignored, as vLLM deletes it
    r.bool("add_swa_attention_sink_bias")
    r.bool("add_full_attention_sink_bias")
    prov["layer pattern"] = "hybrid_layer_pattern: 1 sliding window, 0 full attention"
    prov["sliding layers"] = (
        f"swa_num_key_value_heads {swa_kv}, K {swa_k} / V {swa_v}, "
        f"{r.path('sliding_window_size')} = {window}"
    )
    prov["full layers"] = f"num_key_value_heads {kv}, K head_dim {k_dim} / V v_head_dim {v_dim}"
    if r.has("attention_chunk_size"):
        prov["attention_chunk_size"] = "present but unused: vLLM removes it for MiMo-V2"
    out: list[Layout] = []
    for flag in pattern:
        if flag == 1:
            out.append(
                SlidingWindow(
                    dtype=dtype, kv_heads=swa_kv, k_dim=swa_k, v_dim=swa_v, sliding_window=window
                )
            )
        else:
            out.append(FullAttention(dtype=dtype, kv_heads=kv, k_dim=k_dim, v_dim=v_dim))
    return out


def mimo_v2_attention(r: ConfigReader) -> tuple[AttentionWeights, AttentionWeights]:
    """The sliding layers' attention weights and the full layers' (``MiMoV2FlashDecoderLayer``)."""
    bias = r.bool("attention_bias")
    swa_k, k = r.int("swa_head_dim"), r.int("head_dim")
    sliding = AttentionWeights(
        num_heads=r.int("swa_num_attention_heads"),
        num_kv_heads=r.int("swa_num_key_value_heads"),
        head_dim=swa_k,
        v_head_dim=r.int("swa_v_head_dim", default=swa_k),
        qkv_bias=bias,
        sinks=r.bool("add_swa_attention_sink_bias"),
    )
    full = AttentionWeights(
        num_heads=r.int("num_attention_heads"),
        num_kv_heads=r.int("num_key_value_heads"),
        head_dim=k,
        v_head_dim=r.int("v_head_dim", default=k),
        qkv_bias=bias,
    )
    return sliding, full


def mimo_v2_moe_layers(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """``is_moe_layer``: entry ``i`` of a ``moe_layer_freq`` list; an int or no key: none."""
    if not r.has("moe_layer_freq") or isinstance(r.value("moe_layer_freq"), int):
        return (False,) * n
    freq = r.list("moe_layer_freq") or []
    if len(freq) < n or any(v not in (0, 1) for v in freq):
        raise ConfigError(
            f"{r.source}: {r.path('moe_layer_freq')} must list 0 (dense) or 1 (MoE) for each of "
            f"{n} layers",
            code="config-invalid",
        )
    return tuple(bool(v) for v in freq[:n])


def mimo_v2_rope_caches(r: ConfigReader) -> int:
    """RoPE caches vLLM keeps: one per distinct theta of the two layer types."""
    full = r.value("rope_theta", 1000000)
    return 1 if r.value("swa_rope_theta", full) == full else 2


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return with_weight_kinds(read_mimo_v2(r, ctx.num_layers, ctx.dtype, ctx.provenance))


FAMILIES = (
    Family(
        name="mimo-v2",
        model_types={"mimo_v2", "mimo_v2_flash"},
        architectures={"MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM"},
        keys={
            "hybrid_layer_pattern",
            "sliding_window",
            "sliding_window_size",
            "swa_head_dim",
            "swa_num_key_value_heads",
            "swa_v_head_dim",
            "v_head_dim",
            "attention_chunk_size",
            "add_full_attention_sink_bias",
            "add_swa_attention_sink_bias",
            # query heads and RoPE base of the sliding layers: compute, not cache
            "swa_num_attention_heads",
            "swa_rope_theta",
        },  # fmt: skip
        layouts=_layouts,
        note="per-type KV heads, K and V head dims; attention sinks",
    ),
)
