"""StableLM (``StableLmForCausalLM``): full attention on every layer.

vLLM 0.33 ``models/stablelm.py``: heads ``hidden_size / num_attention_heads`` wide (the model file
computes it and reads no ``head_dim``), KV heads split over TP (or replicated when fewer than TP),
no window. Weights: LayerNorm with bias, q/k/v biased when ``use_qkv_bias``, o_proj unbiased, a
gated MLP without bias (``modeling_stablelm.py``).
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="stablelm",
        model_types={"stablelm"},
        architectures={"StableLmForCausalLM"},
        note="StableLM: full attention per layer (vLLM 0.33 stablelm.py)",
    ),
)
