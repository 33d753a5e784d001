"""OLMo-2 (``Olmo2ForCausalLM``) and OLMoE (``OlmoeForCausalLM``): full attention on every layer.

vLLM 0.33 has no model file for OLMo-2 and serves it with the Transformers modeling backend
(``registry.py`` ``_TRANSFORMERS_BACKEND_MODELS``; heads from ``head_dim`` or ``hidden_size /
num_attention_heads``); ``models/olmoe.py`` gives every head ``hidden_size / num_attention_heads``.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import full_split_heads
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_olmoe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return full_split_heads(r, ctx, "olmoe.py", "OLMoE: every layer full attention")


FAMILIES = (
    Family(
        name="olmo2",
        model_types={"olmo2"},
        architectures={"Olmo2ForCausalLM"},
        note="OLMo-2: full attention per layer (vLLM's Transformers backend)",
    ),
    Family(
        name="olmoe",
        model_types={"olmoe"},
        architectures={"OlmoeForCausalLM"},
        layouts=read_olmoe,
        note="OLMoE: full attention per layer, heads hidden_size / num_attention_heads wide",
    ),
)
