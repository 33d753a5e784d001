"""gpt-oss: ``layer_types`` alternating sliding (128) and full attention, attention sinks.

Sinks are per-head learned logits, not cached: they do not change the KV layout.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="gpt-oss",
        model_types={"gpt_oss"},
        architectures={"GptOssForCausalLM"},
        keys={"layer_types", "sliding_window"},
        layer_types={"sliding_attention", "full_attention"},
        note="layer_types sliding/full, one KV shape",
    ),
)
