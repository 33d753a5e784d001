"""Gemma 1 (``GemmaForCausalLM``): full attention on every layer, heads of ``head_dim`` (256).

vLLM 0.33 ``models/gemma.py`` builds every layer with ``config.head_dim`` and no window; Gemma 2 and
Gemma 3 (interleaved windows) are :mod:`kvcalc.hfconfig.families.gemma`.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="gemma1",
        model_types={"gemma"},
        architectures={"GemmaForCausalLM"},
        note="full attention per layer, head_dim from config.json",
    ),
)
