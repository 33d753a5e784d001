"""Apertus (``ApertusForCausalLM``): grouped-query attention on every layer.

vLLM 0.33 ``models/apertus.py`` (``ApertusAttention``): ``num_key_value_heads`` KV heads (else the
query heads), split over TP or replicated when fewer (``tp % kv == 0``, asserted), heads
``head_dim`` wide when the config sets it, else ``hidden_size / num_attention_heads``; a layer
slides only where ``layer_types`` says ``sliding_attention`` — no published checkpoint has
``layer_types`` or ``sliding_window``, so a config with either is refused as not recorded. The
xIELU activation's constants change no cache shape (recorded through
``scripts/vllm_meta_readback.py``, which computes them off the meta device). Weights
(``modeling_apertus.py``): Llama's attention with a q/k RMSNorm per head, a non-gated MLP
(``up_proj`` / ``down_proj``) with two xIELU parameters per layer, two RMSNorms per layer.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="apertus",
        model_types={"apertus"},
        architectures={"ApertusForCausalLM"},
        note="Apertus: grouped-query attention per layer (vLLM 0.33 apertus.py)",
    ),
)
