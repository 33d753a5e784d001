"""Seed-OSS (``SeedOssForCausalLM``): full attention on every layer.

vLLM 0.33 has no model file for Seed-OSS and serves it with the Transformers modeling backend
(``registry.py`` ``_TRANSFORMERS_BACKEND_MODELS``): heads ``head_dim`` wide (Seed-OSS-36B: 80
heads of 128 over a hidden size of 5,120), every layer full attention, no window. Weights:
q/k/v carry a bias when ``attention_bias``, o_proj when ``attention_out_bias``, the MLP when
``mlp_bias`` (``modeling_seed_oss.py``).
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="seed_oss",
        model_types={"seed_oss"},
        architectures={"SeedOssForCausalLM"},
        note="Seed-OSS: full attention per layer (vLLM's Transformers backend)",
    ),
)
