"""Bailing MoE (``BailingMoeForCausalLM``, ``bailing_moe``: Ling 1.5) and Bailing MoE V2
(``BailingMoeV2ForCausalLM``, ``bailing_moe_v2``: Ling 2.0): full attention on every layer; both
config classes are the checkpoints' remote code (``families/_remote.py``).

vLLM 0.33 ``models/bailing_moe.py`` (V2 is the same class) caches ``config.num_key_value_heads``
KV heads ``config.head_dim`` wide (``head_dim`` 0 or null: ``hidden_size //
num_attention_heads``); config.json must carry both (the model file reads them as attributes).
The partial rotary dimension, the q/k norms and the MoE layers shape no cache. Weights are not
counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._remote import full_uncounted, head_width, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_bailing_moe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    width = head_width(r, ctx, "bailing_moe.py")
    kv = required(r, "num_key_value_heads", "bailing_moe.py")
    return full_uncounted(ctx, kv, width, "Bailing MoE: every layer full attention")


FAMILIES = (
    Family(
        name="bailing-moe",
        model_types={"bailing_moe", "bailing_moe_v2"},
        architectures={"BailingMoeForCausalLM", "BailingMoeV2ForCausalLM"},
        keys={
            "max_window_layers",  # a Qwen2-style key Ling 1.5's configs carry: bailing_moe.py has no window
        },
        layouts=read_bailing_moe,
        note="Bailing MoE (Ling): full attention, num_key_value_heads of head_dim (vLLM 0.33 "
        "bailing_moe.py).",
    ),
)
