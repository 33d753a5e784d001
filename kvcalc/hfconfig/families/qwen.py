"""Qwen2, Qwen3 (dense and MoE), MiMo (Qwen2-based) and the text stacks of Qwen2.5-VL and Qwen3-VL.

Qwen2.5-VL (``qwen2_5_vl``) keeps its text keys at the top level, as Qwen2 does; its vision tower
(``vision_config``) holds no cache.

``use_sliding_window`` with ``max_window_layers``: layers from ``max_window_layers`` on slide (vLLM
drops the window when ``use_sliding_window`` is false). MiMo's MTP layers are not built without
speculative decoding, so they hold no cache.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="qwen",
        model_types={"qwen2", "qwen3", "qwen3_moe", "mimo", "qwen2_5_vl", "qwen3_vl"},
        architectures={
            "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiMoForCausalLM",
            "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration",
        },
        keys={"sliding_window", "use_sliding_window", "max_window_layers"},
        note="full attention; use_sliding_window + max_window_layers for Qwen2-style windows",
    ),
)  # fmt: skip
