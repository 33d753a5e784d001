"""Cosmos 3 Edge (``Cosmos3EdgeForConditionalGeneration``, ``cosmos3_edge``): vLLM 0.33
``cosmos3_edge.py`` over transformers' ``Cosmos3EdgeConfig``.

Its text model (``cosmos3_edge_text``) is rebuilt as a Nemotron-H backbone of
``num_hidden_layers`` attention and MLP pairs (``layers_block_type`` ``["full_attention", "mlp"]``
repeated): one full-attention cache per pair, ``num_key_value_heads`` KV heads ``head_dim`` wide
(the generic reader's rule), the MLP layers none. Weights (``hfconfig/weights.py``): each pair as
one Llama-style layer with a non-gated ``relu2`` MLP and a norm per block; the SigLIP2 tower and
its patch merger hold no cache (``hfconfig/weights_vision.py``).
"""

from __future__ import annotations

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="cosmos3-edge",
        model_types={"cosmos3_edge", "cosmos3_edge_text"},
        architectures={"Cosmos3EdgeForConditionalGeneration"},
        note="Cosmos 3 Edge: full attention on every attention/MLP pair (vLLM 0.33 "
        "cosmos3_edge.py's Nemotron-H backbone)",
    ),
)
