"""Phi-3, Phi-3.5 and Phi-4 (``Phi3ForCausalLM``, text): one attention cache per layer, every layer
within ``sliding_window`` when the config sets one.

vLLM 0.33 serves ``Phi3ForCausalLM`` with its ``LlamaForCausalLM`` (``models/phi3.py``). ``Phi3Config``
has no ``layer_types``, so ``EngineArgs.create_engine_config`` sets ``CacheConfig.sliding_window`` to
the config's ``sliding_window`` and every attention layer, which has no window of its own, takes it
(``layers/attention/attention.py``): Phi-3-mini-4k slides over 2,047 tokens on every layer, Phi-3.5
and Phi-4-mini over 262,144. Heads are ``head_dim`` wide, else ``hidden_size / num_attention_heads``.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="phi3",
        model_types={"phi3"},
        architectures={"Phi3ForCausalLM"},
        keys={"sliding_window"},
        note="one cache per layer; sliding_window, when set, on every layer (vLLM 0.33 CacheConfig)",
    ),
)
