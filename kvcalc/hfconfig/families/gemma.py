"""Gemma 2 and Gemma 3: interleaved sliding and global layers of one shape."""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="gemma",
        model_types={"gemma2", "gemma3", "gemma3_text"},
        architectures={"Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"},
        keys={
            "sliding_window", "sliding_window_pattern", "layer_types",
            # Gemma 2's duplicate of sliding_window (same value in published configs)
            "sliding_window_size",
        },
        layer_types={"sliding_attention", "full_attention"},
        note="sliding and global layers with the same KV heads and head_dim",
    ),
)  # fmt: skip
