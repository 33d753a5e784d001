"""MiniCPM (``MiniCPMForCausalLM``, ``minicpm``: MiniCPM 1 and 2, MiniCPM-MoE, MiniCPM4): full
attention on every layer; the config class is the checkpoints' remote code
(``families/_remote.py``).

vLLM 0.33 ``models/minicpm.py`` gives every head ``hidden_size // num_attention_heads`` (a
``head_dim`` in config.json is not read) and caches ``config.num_key_value_heads`` KV heads; the
muP scales (``scale_emb``, ``scale_depth``, ``dim_model_base``) and the MoE MLP (``num_experts``)
shape no cache, nor does MiniCPM4's ``sparse_config`` (InfLLM v2), which vLLM does not read.
Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.families._remote import full_uncounted, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_minicpm(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    width = split_head_width(r, ctx, "minicpm.py")
    kv = required(r, "num_key_value_heads", "minicpm.py")
    return full_uncounted(ctx, kv, width, "MiniCPM: every layer full attention (minicpm.py)")


FAMILIES = (
    Family(
        name="minicpm",
        model_types={"minicpm"},
        architectures={"MiniCPMForCausalLM"},
        layouts=read_minicpm,
        note="MiniCPM: full attention, num_key_value_heads of hidden_size / num_attention_heads "
        "(vLLM 0.33 minicpm.py).",
    ),
)
