"""Llama, Mistral, Mixtral, Mistral 3 (its text stack), Ministral 3, GLM-ASR (its Llama ``text_config``), H2OVL (its Llama ``llm_config``): full attention, or Mistral's one sliding window on every layer.

vLLM 0.33: ``LlamaForCausalLM`` / ``MistralForCausalLM`` / ``MixtralForCausalLM`` — one attention
spec per layer (``FullAttentionSpec``, or ``SlidingWindowSpec`` when ``sliding_window`` is set).
"""

from kvcalc.hfconfig import generic
from kvcalc.hfconfig.family import Family, LayoutContext, LayoutsRead
from kvcalc.hfconfig.reader import ConfigReader


def read_llama(r: ConfigReader, ctx: LayoutContext) -> LayoutsRead:
    """The generic reader; H2OVL (``h2ovl_chat``: ``h2ovl.py`` subclasses ``internvl.py``'s
    ``InternVLChatModel``, its text model the ``llm_config``'s Llama) needs the InternVL keys.
    Its processor also reads ``use_msac`` (multi-scale crops: the image tokens, not the cache or
    the weights); vLLM builds a config without it (recorded), and so does kvcalc."""
    if r.raw.get("model_type") == "h2ovl_chat":
        generic.check_internvl_chat(r, what="H2OVL", text_types=("llama",))
    return generic.read_layouts(r, ctx)


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
            "h2ovl_chat",
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
            # H2OVL (h2ovl.py: InternVL chat's structure, a Llama llm_config)
            "H2OVLChatModel",
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
        layouts=read_llama,
        note="full attention per layer; Mistral's sliding_window on every layer",
    ),
)
