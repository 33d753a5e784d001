"""Gemma-3n: sliding/full layers whose last ``num_kv_shared_layers`` reuse earlier layers' caches
(:mod:`kvcalc.hfconfig.gemma_family`)."""

from kvcalc.hfconfig.families._attention import attention_family_layouts
from kvcalc.hfconfig.family import Family

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
        layouts=attention_family_layouts,
        note="KV sharing: shared layers hold no cache of their own",
    ),
)
