"""LLaVA-1.5, LLaVA-NeXT, LLaVA-NeXT-Video and LLaVA-OneVision (``llava``, ``llava_next``,
``llava_next_video``, ``llava_onevision``): the text stack of ``text_config`` (Llama, Mistral,
Qwen2), whose cache vLLM 0.33 builds as that model's (``llava.py``, ``llava_next.py``,
``llava_next_video.py``, ``llava_onevision.py``: ``init_vllm_registered_model`` on
``text_config``); the vision tower (CLIP or SigLIP, built up to ``vision_feature_layer``) holds no
cache. The keys are the text families' (Mistral's ``sliding_window`` on every layer; Qwen2's
``use_sliding_window`` / ``max_window_layers``; an all-``full_attention`` ``layer_types``).
LLaVA-NeXT-Video's ``spatial_pool_mode``: ``LlavaNextVideoPooler`` builds an average or a max pool
(no weights); any other mode raises ("Unknown pooling mode"), so vLLM builds no model: refused.
"""

from kvcalc.hfconfig import generic
from kvcalc.hfconfig.family import Family, LayoutContext, LayoutsRead
from kvcalc.hfconfig.reader import ConfigReader

#: the ``spatial_pool_mode`` values ``LlavaNextVideoPooler`` builds
_VIDEO_POOLS = ("average", "max")


def read_llava(r: ConfigReader, ctx: LayoutContext) -> LayoutsRead:
    """The text stack's layouts (the generic reader), after LLaVA-NeXT-Video's pool mode."""
    if r.raw.get("model_type") == "llava_next_video":
        pool = r.str("spatial_pool_mode", "average")
        if pool not in _VIDEO_POOLS:
            raise r.bad(r.path("spatial_pool_mode"), pool, " or ".join(_VIDEO_POOLS))
    return generic.read_layouts(r, ctx)


FAMILIES = (
    Family(
        name="llava",
        model_types={"llava", "llava_next", "llava_next_video", "llava_onevision"},
        architectures={
            "LlavaForConditionalGeneration",
            "LlavaNextForConditionalGeneration",
            "LlavaNextVideoForConditionalGeneration",
            "LlavaOnevisionForConditionalGeneration",
        },
        keys={"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"},
        layer_types={"full_attention"},
        layouts=read_llava,
        note="the text_config's stack (Llama, Mistral, Qwen2); the CLIP/SigLIP tower holds no cache",
    ),
)
