"""PaliGemma and PaliGemma 2 (``paligemma``: ``PaliGemmaForConditionalGeneration``): vLLM 0.33's
``paligemma.py`` builds the ``text_config`` as ``GemmaForCausalLM`` when its model type is
``gemma``, else as ``Gemma2ForCausalLM`` (``init_vllm_registered_model``): Gemma's full attention on
every layer, or Gemma 2's sliding and global layers (``layer_types`` / ``sliding_window``), the
same caches as those families'. The SigLIP tower holds none.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="paligemma",
        model_types={"paligemma"},
        architectures={"PaliGemmaForConditionalGeneration"},
        keys={"sliding_window", "sliding_window_pattern", "layer_types", "sliding_window_size"},
        layer_types={"sliding_attention", "full_attention"},
        note="the text_config's Gemma or Gemma 2 stack; the SigLIP tower holds no cache",
    ),
)
