"""LLaVA-1.5, LLaVA-NeXT and LLaVA-OneVision (``llava``, ``llava_next``, ``llava_onevision``): the
text stack of ``text_config`` (Llama, Mistral, Qwen2), whose cache vLLM 0.33 builds as that
model's (``llava.py``, ``llava_next.py``, ``llava_onevision.py``: ``init_vllm_registered_model`` on
``text_config``); the vision tower (CLIP or SigLIP, built up to ``vision_feature_layer``) holds no
cache. The keys are the text families' (Mistral's ``sliding_window`` on every layer; Qwen2's
``use_sliding_window`` / ``max_window_layers``; an all-``full_attention`` ``layer_types``).
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="llava",
        model_types={"llava", "llava_next", "llava_onevision"},
        architectures={
            "LlavaForConditionalGeneration",
            "LlavaNextForConditionalGeneration",
            "LlavaOnevisionForConditionalGeneration",
        },
        keys={"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"},
        layer_types={"full_attention"},
        note="the text_config's stack (Llama, Mistral, Qwen2); the CLIP/SigLIP tower holds no cache",
    ),
)
