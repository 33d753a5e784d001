"""Falcon (``FalconForCausalLM``): full attention on every layer, KV heads from three spellings.

vLLM 0.33 ``models/falcon.py`` (``FalconAttention``): heads ``hidden_size / num_attention_heads``
wide; KV heads ``num_kv_heads`` when ``new_decoder_architecture`` (Falcon-40B/180B: grouped
query attention; transformers' config class defaults ``num_kv_heads`` to the query heads), else
one when ``multi_query`` (Falcon-7B), else every query head — a ``num_kv_heads`` in such a
config is not read. KV heads split over TP, or are replicated when fewer than TP (``tp %
kv == 0``). The rotary and the ALiBi attention are built without ``cache_config``: the cache
stays in the model dtype whatever ``--kv-cache-dtype`` says (``engines/vllm/defaults.py``). ``alibi``
(Falcon-RW) changes no cache shape: its slopes are numbers handed to the attention (recorded through
``scripts/vllm_meta_readback.py``, which computes them off the meta device). Weights
(``modeling_falcon.py``): the fused q/k/v as wide as those heads, biased with ``dense`` and the
MLP (``dense_h_to_4h`` / ``dense_4h_to_h``, ``ffn_hidden_size`` else 4 × hidden) when ``bias``;
LayerNorms with bias: two per layer (``ln_attn``/``ln_mlp``, or ``input_layernorm`` and
``post_attention_layernorm`` without ``parallel_attn``), one when ``parallel_attn`` without
``new_decoder_architecture`` or with ``num_ln_in_parallel_attn`` 1.
"""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def falcon_kv_heads(r: ConfigReader, heads: int, prov: dict[str, str] | None = None) -> int:
    """The KV heads vLLM's ``FalconAttention`` builds (and transformers' q/k/v is as wide)."""
    if r.bool("new_decoder_architecture"):
        kv = r.int("num_kv_heads", default=heads)
        why = f"new_decoder_architecture: {r.path('num_kv_heads')} = {kv}"
    elif r.bool("multi_query", True):  # FalconConfig's default: multi-query
        kv, why = 1, "multi_query (no new_decoder_architecture): one KV head"
    else:
        kv = heads
        why = f"neither new_decoder_architecture nor multi_query: every query head ({heads})"
    if prov is not None:
        prov["num_kv_heads"] = why + " (vLLM 0.33 falcon.py)"
    return kv


def falcon_norms(r: ConfigReader) -> int:
    """LayerNorms per decoder layer in transformers' ``FalconDecoderLayer``."""
    if not r.bool("parallel_attn", True):
        return 2
    # new_decoder_architecture without num_ln_in_parallel_attn means two (ln_attn, ln_mlp)
    n = r.int("num_ln_in_parallel_attn", default=2 if r.bool("new_decoder_architecture") else 1)
    return 2 if n == 2 else 1


def read_falcon(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    width = split_head_width(r, ctx, "falcon.py")
    kv = falcon_kv_heads(r, ctx.num_attention_heads, ctx.provenance)
    ctx.provenance["layer pattern"] = "Falcon: every layer full attention (vLLM 0.33 falcon.py)"
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)] * ctx.num_layers
    )


FAMILIES = (
    Family(
        name="falcon",
        model_types={"falcon"},
        architectures={"FalconForCausalLM"},
        # the three spellings falcon_kv_heads reads as vLLM's FalconAttention does
        keys={"new_decoder_architecture", "multi_query", "num_kv_heads"},
        layouts=read_falcon,
        note="Falcon: full attention per layer, KV heads as vLLM 0.33 falcon.py picks them",
    ),
)
