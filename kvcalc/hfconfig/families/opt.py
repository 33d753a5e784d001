"""OPT (``OPTForCausalLM``): full multi-head attention on every layer.

vLLM 0.33 ``models/opt.py``: ``num_attention_heads`` heads of ``hidden_size /
num_attention_heads`` (KV as many), learned positions, no window. Weights (``modeling_opt.py``):
an embedding ``word_embed_proj_dim`` wide (with ``project_in``/``project_out`` to the hidden size
when they differ), a learned position table of ``max_position_embeddings + 2`` rows (OPT's offset),
q/k/v/out_proj and ``fc1``/``fc2`` (``ffn_dim``) biased when ``enable_bias``, two LayerNorms per
layer and a final one (``do_layer_norm_before``), lm_head tied to the embedding.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._mha import full_mha
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_opt(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return full_mha(r, ctx, "opt.py", "OPT")


FAMILIES = (
    Family(
        name="opt",
        model_types={"opt"},
        architectures={"OPTForCausalLM"},
        layouts=read_opt,
        note="OPT: full multi-head attention per layer (vLLM 0.33 opt.py)",
    ),
)
