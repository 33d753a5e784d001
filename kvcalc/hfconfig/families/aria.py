"""Aria (``AriaForConditionalGeneration``, ``aria``): vLLM 0.33 ``aria.py`` over transformers'
``AriaConfig``, its text model (``aria_text``) Llama's attention with a mixture of experts.

Every layer is Llama's full attention (``LlamaDecoderLayer``): ``num_key_value_heads`` KV heads
``head_dim`` wide, as the generic reader reads them. The MoE (:func:`aria_moe`) and the vision
tower (Idefics2's without its post-LayerNorm, the cross-attention projector: see
``hfconfig/weights_vision.py``) hold no cache.
"""

from __future__ import annotations

from kvcalc.hfconfig.family import Family
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import MoeWeights


def aria_moe(r: ConfigReader, n: int) -> tuple[MoeWeights, tuple[bool, ...]]:
    """``AriaTextMoELayer`` on every layer: ``moe_num_experts`` gated experts ``intermediate_size``
    wide (top ``moe_topk``), ``moe_num_shared_experts`` shared ones as one ``LlamaMLP``
    ``intermediate_size × moe_num_shared_experts`` wide, and the router (``router_weight``, one
    row per expert, in the model dtype)."""
    width = r.int("intermediate_size")
    moe = MoeWeights(
        num_experts=r.int("moe_num_experts"),
        experts_per_token=r.int("moe_topk"),
        expert_intermediate_size=width,
        shared_intermediate_size=width * r.int("moe_num_shared_experts", minimum=0),
    )
    return moe, (True,) * n


FAMILIES = (
    Family(
        name="aria",
        model_types={"aria", "aria_text"},
        architectures={"AriaForConditionalGeneration"},
        note="Aria: Llama attention per layer (vLLM 0.33 aria.py)",
    ),
)
