"""Gemma-3n: sliding/full layers whose last ``num_kv_shared_layers`` reuse earlier layers' caches.

KV sharing (``vllm/model_executor/models/gemma3n.py``, vLLM 0.33.0): the shared layers get no
KV-cache spec and transformers no cache layer, so they are charged nothing; ``num_kv_shared_layers`` is 15
when the config names none.
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


def read_gemma3n(
    r: ConfigReader, num_layers: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    kinds = layer_types(r, num_layers, prov)
    kv = r.int("num_key_value_heads")
    head = r.int("head_dim")
    window = r.int("sliding_window")
    prov["attention"] = f"num_key_value_heads {kv} × head_dim {head}, sliding_window {window}"
    shared = shared_sources(r, kinds, 15, prov)
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
            out.append(FullAttention(dtype=dtype, kv_heads=kv, k_dim=head, v_dim=head))
    return out


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return with_weight_kinds(read_gemma3n(r, ctx.num_layers, ctx.dtype, ctx.provenance))


FAMILIES = (
    Family(
        name="gemma3n",
        model_types={"gemma3n", "gemma3n_text"},
        architectures={"Gemma3nForConditionalGeneration", "Gemma3nForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "num_kv_shared_layers",
            # which MLP activations are sparsified per layer: compute, not cache
            "activation_sparsity_pattern",
        },  # fmt: skip
        layer_types={"sliding_attention", "full_attention"},
        layouts=_layouts,
        note="KV sharing: shared layers hold no cache of their own",
    ),
)
