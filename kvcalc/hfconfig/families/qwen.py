"""Qwen2, Qwen3 (dense and MoE), MiMo (Qwen2-based) and the text stack of Qwen3-VL.

``use_sliding_window`` with ``max_window_layers``: layers from ``max_window_layers`` on slide (vLLM
drops the window when ``use_sliding_window`` is false). MiMo's MTP layers are not built without
speculative decoding, so they hold no cache.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="qwen",
        model_types={"qwen2", "qwen3", "qwen3_moe", "mimo", "qwen3_vl"},
        architectures={
            "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiMoForCausalLM",
            "Qwen3VLForConditionalGeneration",
        },
        keys={"sliding_window", "use_sliding_window", "max_window_layers"},
        note="full attention; use_sliding_window + max_window_layers for Qwen2-style windows",
    ),
)  # fmt: skip
