"""Cosmos 3 Edge (``Cosmos3EdgeForConditionalGeneration``, ``cosmos3_edge``): vLLM 0.33
``cosmos3_edge.py`` over transformers' ``Cosmos3EdgeConfig``.

Its text model (``cosmos3_edge_text``) is rebuilt as a Nemotron-H backbone of
``num_hidden_layers`` attention and MLP pairs (``layers_block_type`` ``["full_attention", "mlp"]``
repeated): one full-attention cache per pair, ``num_key_value_heads`` KV heads ``head_dim`` wide
(``Cosmos3EdgeTextConfig``'s 8 and 128 where config.json omits them, whatever the query heads),
the MLP layers none. Weights (``hfconfig/weights.py``): each pair as
one Llama-style layer with a non-gated ``relu2`` MLP and a norm per block; the SigLIP2 tower and
its patch merger hold no cache (``hfconfig/weights_vision.py``).
"""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def read_cosmos3_edge(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads"), minimum=1)
    width = r.int("head_dim", default=class_default(r, "head_dim"), minimum=1)
    prov = ctx.provenance
    prov["num_kv_heads"] = (
        f"num_key_value_heads = {kv} (Cosmos3EdgeTextConfig's default where absent)"
    )
    prov["head_dim"] = f"head_dim = {width} (Cosmos3EdgeTextConfig's default where absent)"
    prov["layer pattern"] = "Cosmos 3 Edge: full attention on every attention/MLP pair"
    layer = FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)
    return L.with_weight_kinds([layer] * ctx.num_layers)


FAMILIES = (
    Family(
        name="cosmos3-edge",
        model_types={"cosmos3_edge", "cosmos3_edge_text"},
        architectures={"Cosmos3EdgeForConditionalGeneration"},
        layouts=read_cosmos3_edge,
        note="Cosmos 3 Edge: full attention on every attention/MLP pair (vLLM 0.33 "
        "cosmos3_edge.py's Nemotron-H backbone)",
    ),
)
