"""Gemma 4: per-type head shapes and KV sharing, read as transformers and vLLM read them.

Gemma 4 (``Gemma4TextConfig.__post_init__``, transformers 5.x; ``vllm/model_executor/models/gemma4.py``,
vLLM 0.33.0): ``layer_types`` names each layer (the last one is forced to full attention); sliding
layers have ``num_key_value_heads`` heads of ``head_dim``; full ("global") layers have
``global_head_dim`` and, when ``attention_k_eq_v`` is set, ``num_global_key_value_heads`` heads.
K and V are both cached even where the checkpoint ships K only (vLLM loads K into both slots).

KV sharing (Gemma 4 ``gemma4.py``, as Gemma-3n's ``gemma3n.py``; :mod:`._gemma_layers`): the last ``num_kv_shared_layers``
layers read the cache of the last earlier layer of the same type; vLLM gives them no KV-cache spec
and transformers no cache layer, so they are charged nothing.

Gemma-4-31B: sliding 16 KV heads × (256 + 256) × 2 B = 16,384 B per token per layer, global
4 × (512 + 512) × 2 B = 8,192 B; 50 sliding + 10 global layers.
"""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._gemma_layers import layer_types, shared_sources
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.attention_layouts import SharedKV
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow

GEMMA4_TYPES = ("gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text")


def read_gemma4(
    r: ConfigReader, num_layers: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    kinds = layer_types(r, num_layers, prov)
    if kinds[-1] != L.FULL:
        kinds[-1] = L.FULL
        prov["layer pattern"] += "; the last layer is forced to full attention (transformers)"
    kv = r.int("num_key_value_heads")
    head = r.int("head_dim")
    window = r.int("sliding_window")
    global_head = r.int("global_head_dim")
    global_kv = kv
    if r.bool("attention_k_eq_v"):
        global_kv = r.int("num_global_key_value_heads", default=kv)
    prov["sliding layers"] = (
        f"num_key_value_heads {kv} × head_dim {head}, {r.path('sliding_window')} = {window}"
    )
    prov["global layers"] = f"{global_kv} KV heads × global_head_dim {global_head}" + (
        " (attention_k_eq_v: num_global_key_value_heads; V cached as well)"
        if r.bool("attention_k_eq_v")
        else ""
    )
    mode = r.str("use_bidirectional_attention")
    if mode == "all":
        window = window // 2 + 1
        prov["sliding layers"] += (
            f" (use_bidirectional_attention 'all': window // 2 + 1 = {window})"
        )
    shared = shared_sources(r, kinds, 0, prov)
    out: list[Layout] = []
    for i, kind in enumerate(kinds):
        if i in shared:
            out.append(SharedKV(dtype=dtype, source_layer=shared[i]))
        elif kind == L.SLIDING:
            out.append(
                SlidingWindow(
                    dtype=dtype, kv_heads=kv, k_dim=head, v_dim=head, sliding_window=window
                )
            )
        else:
            out.append(
                FullAttention(dtype=dtype, kv_heads=global_kv, k_dim=global_head, v_dim=global_head)
            )
    return out


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return with_weight_kinds(read_gemma4(r, ctx.num_layers, ctx.dtype, ctx.provenance))


FAMILIES = (
    Family(
        name="gemma4",
        model_types={"gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"},
        architectures={"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "num_global_key_value_heads",
            "global_head_dim",
            "num_kv_shared_layers",
            "attention_k_eq_v",
        },  # fmt: skip
        layer_types={"sliding_attention", "full_attention"},
        layouts=_layouts,
        note="per-type KV heads and head dims (global layers wider), KV sharing",
    ),
)
