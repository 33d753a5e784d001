"""OPT (``OPTForCausalLM``): full multi-head attention on every layer.

vLLM 0.33 ``models/opt.py``: ``num_attention_heads`` heads of ``hidden_size /
num_attention_heads`` (KV as many), learned positions, no window. Weights (``modeling_opt.py``):
an embedding ``word_embed_proj_dim`` wide (with ``project_in``/``project_out`` to the hidden size
when they differ), a learned position table of ``max_position_embeddings + 2`` rows (OPT's offset),
q/k/v/out_proj and ``fc1``/``fc2`` (``ffn_dim``) biased when ``enable_bias``, two LayerNorms per
layer and a final one (``do_layer_norm_before``), lm_head tied to the embedding.

BLIP-2 (``blip-2``: ``blip2.py``) builds its ``text_config`` as the model it names
(``init_vllm_registered_model``; OPT in transformers 5.20's ``Blip2Config``, the only one
recorded); its tower and Q-Former hold no cache.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.families._mha import full_mha
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_opt(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if r.raw.get("model_type") == "blip-2" and r.text.get("model_type") != "opt":
        raise ConfigError(
            f"{r.source}: text_config.model_type {r.text.get('model_type')!r}: kvcalc was checked "
            "against vLLM 0.33 for BLIP-2's OPT text model only",
            code="config-unverified",
        )
    return full_mha(r, ctx, "opt.py", "OPT")


FAMILIES = (
    Family(
        name="opt",
        model_types={"opt", "blip-2"},
        architectures={"OPTForCausalLM", "Blip2ForConditionalGeneration"},
        layouts=read_opt,
        note="OPT: full multi-head attention per layer (vLLM 0.33 opt.py)",
    ),
)
