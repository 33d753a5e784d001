"""Orion (``OrionForCausalLM``, ``orion``): full attention on every layer; the config class is the
checkpoints' remote code (``families/_remote.py``).

vLLM 0.33 ``models/orion.py`` gives every head ``hidden_size // num_attention_heads`` (a
``head_dim`` in config.json is not read) and caches ``config.num_key_value_heads`` KV heads.
Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.families._remote import full_uncounted, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_orion(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    width = split_head_width(r, ctx, "orion.py")
    kv = required(r, "num_key_value_heads", "orion.py")
    return full_uncounted(ctx, kv, width, "Orion: every layer full attention (orion.py)")


FAMILIES = (
    Family(
        name="orion",
        model_types={"orion"},
        architectures={"OrionForCausalLM"},
        layouts=read_orion,
        note="Orion: full attention, num_key_value_heads of hidden_size / num_attention_heads "
        "(vLLM 0.33 orion.py).",
    ),
)
