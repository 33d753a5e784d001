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
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
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
