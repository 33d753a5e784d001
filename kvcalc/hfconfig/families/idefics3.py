"""Idefics3 and SmolVLM (``idefics3``, ``smolvlm``): vLLM 0.33's ``idefics3.py`` builds the
``text_config`` as a ``LlamaModel`` whatever its model type (``Idefics3Model``: ``LlamaModel`` on
``vllm_config.with_hf_config(config.text_config)``; ``smolvlm.py``'s class is Idefics3's): full
attention on every layer, Llama's cache. The SigLIP-type tower and the connector hold none. A text
config with a sliding window (which ``LlamaAttention`` would read) was not recorded: refused.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="idefics3",
        model_types={"idefics3", "smolvlm"},
        architectures={"Idefics3ForConditionalGeneration", "SmolVLMForConditionalGeneration"},
        note="the text_config built as LlamaModel (full attention); the tower holds no cache",
    ),
)
