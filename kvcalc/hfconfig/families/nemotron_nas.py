"""Nemotron-NAS (Llama-3.x-Nemotron Super/Ultra): ``block_configs`` with per-layer KV heads and
attention-free layers (:mod:`kvcalc.hfconfig.nas_family`)."""

from kvcalc.hfconfig.families._attention import attention_family_layouts
from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="nemotron-nas",
        model_types={"nemotron-nas", "deci", "decilm"},
        architectures={"DeciLMForCausalLM"},
        keys={"block_configs"},
        layouts=attention_family_layouts,
        note="block_configs: per-layer KV heads, no-op attention layers",
    ),
)
