"""DeepSeek V1 (``DeepseekForCausalLM``, ``deepseek``: DeepSeek-MoE): full attention on every
layer; the config class is the checkpoints' remote code (``families/_remote.py``).

vLLM 0.33 builds it in ``models/deepseek_v2.py`` (``DeepseekForCausalLM`` is
``DeepseekV2ForCausalLM``): model type ``deepseek`` takes ``DeepseekAttention``, multi-head
attention with ``config.num_key_value_heads`` KV heads ``hidden_size // num_attention_heads`` wide
(a ``head_dim`` or MLA rank in config.json is not read); no latent, whatever
``kv_lora_rank`` says. The MoE layers (``n_routed_experts`` from ``first_k_dense_replace``, every
``moe_layer_freq``-th) shape no cache. An ``rswa_window`` (a different attention) is not planned.
Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.families._remote import full_uncounted, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_deepseek_v1(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    width = split_head_width(r, ctx, "deepseek_v2.py (DeepseekAttention)")
    kv = required(r, "num_key_value_heads", "deepseek_v2.py")
    return full_uncounted(
        ctx, kv, width, "DeepSeek V1: every layer full attention (deepseek_v2.py DeepseekAttention)"
    )


FAMILIES = (
    Family(
        name="deepseek-v1",
        model_types={"deepseek"},
        architectures={"DeepseekForCausalLM"},
        layouts=read_deepseek_v1,
        note="DeepSeek V1: multi-head full attention, num_key_value_heads of hidden_size / "
        "num_attention_heads (vLLM 0.33 deepseek_v2.py DeepseekAttention).",
    ),
)
