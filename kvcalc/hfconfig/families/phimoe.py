"""Phi-3.5-MoE (``PhiMoEForCausalLM``): one attention cache per layer, every layer within
``sliding_window`` when the config sets one.

vLLM 0.33 ``models/phimoe.py``: heads ``head_dim`` wide (else ``hidden_size / num_attention_heads``);
its attention has no window of its own, so ``CacheConfig.sliding_window`` (the config's
``sliding_window``: Phi3Config has no ``layer_types``) reaches every layer, as for Phi-3.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="phimoe",
        model_types={"phimoe"},
        architectures={"PhiMoEForCausalLM"},
        keys={"sliding_window"},
        note="one cache per layer; sliding_window, when set, on every layer (vLLM 0.33 CacheConfig)",
    ),
)
