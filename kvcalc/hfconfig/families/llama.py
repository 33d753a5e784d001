"""Llama, Mistral, Mixtral, Mistral 3 (its text stack), Ministral 3, GLM-ASR (its Llama ``text_config``): full attention, or Mistral's one sliding window on every layer.

vLLM 0.33: ``LlamaForCausalLM`` / ``MistralForCausalLM`` / ``MixtralForCausalLM`` — one attention
spec per layer (``FullAttentionSpec``, or ``SlidingWindowSpec`` when ``sliding_window`` is set).
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="llama",
        model_types={
            "llama",
            "mistral",
            "mixtral",
            "mistral3",
            "ministral3",
            "glmasr",
        },
        architectures={
            "LlamaForCausalLM",
            "LLaMAForCausalLM",  # registry.py: the older spelling, ("llama", "LlamaForCausalLM")
            "MistralForCausalLM",
            "MixtralForCausalLM",
            "Mistral3ForConditionalGeneration",
            "Ministral3ForCausalLM",  # registry.py: ("mistral", "MistralForCausalLM")
            # GLM-ASR (glmasr.py: LlamaForCausalLM on text_config, an audio tower beside)
            "GlmAsrForConditionalGeneration",
            # EAGLE-3 heads (one Llama decoder layer; kvcalc.hfconfig.eagle reads their own keys)
            "LlamaForCausalLMEagle3",
            "Eagle3LlamaForCausalLM",
        },
        keys={
            "sliding_window",
            "draft_vocab_size",
            "target_hidden_size",
            "eagle_config",
            "num_aux_hidden_states",
            "fc_norm",
            "norm_before_fc",
        },
        note="full attention per layer; Mistral's sliding_window on every layer",
    ),
)
