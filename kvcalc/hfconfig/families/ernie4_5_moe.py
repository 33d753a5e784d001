"""ERNIE 4.5 MoE (``Ernie4_5_MoeForCausalLM``): full attention on every layer, MoE from a range.

vLLM 0.33 ``models/ernie45_moe.py``: heads ``head_dim`` wide, else ``hidden_size /
num_attention_heads``, full attention on every layer (no window). A layer is MoE when
``(i + 1) % moe_layer_interval == 0`` and ``moe_layer_start_index <= i <= moe_layer_end_index``
(``use_moe``, default: ``moe_num_experts > 0``); transformers' config class turns an end index of
-1 into the last layer, as vLLM reads it. Each MoE layer: ``moe_num_experts`` routed experts
(``moe_k`` per token, ``moe_intermediate_size`` wide), ``moe_num_shared_experts`` shared ones as one
MLP of ``moe_intermediate_size × moe_num_shared_experts``, the router, and
``moe_statics.e_score_correction_bias`` (one value per expert), a parameter in transformers and an
fp32 parameter in vLLM, both priced in fp32 like the router vLLM keeps in fp32
(``GateLinear(..., params_dtype=torch.float32)``).
"""

from __future__ import annotations

from kvcalc.hfconfig.family import Family
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import MoeWeights


def ernie_moe(r: ConfigReader, n: int) -> tuple[MoeWeights | None, tuple[bool, ...]]:
    """The MoE weights of an ``ernie4_5_moe`` config and which of its ``n`` layers are MoE."""
    # absent keys take Ernie4_5_MoeConfig's defaults, which vLLM reads through the config class
    experts = r.int("moe_num_experts", default=64, minimum=0)
    if not r.bool("use_moe", experts > 0) or not experts:
        return None, (False,) * n
    start = r.int("moe_layer_start_index", default=1, minimum=0)
    end = r.int("moe_layer_end_index", default=-1, minimum=-1)
    end = n - 1 if end == -1 else end
    interval = r.int("moe_layer_interval", default=1)
    flags = tuple((i + 1) % interval == 0 and start <= i <= end for i in range(n))
    width = r.int("moe_intermediate_size", default=1536)
    moe = MoeWeights(
        num_experts=experts,
        experts_per_token=r.int("moe_k", default=6),
        expert_intermediate_size=width,
        shared_intermediate_size=width * r.int("moe_num_shared_experts", default=2, minimum=0),
        statics_bias=True,
        router_fp32=True,
    )
    return moe, flags


FAMILIES = (
    Family(
        name="ernie4_5_moe",
        model_types={"ernie4_5_moe"},
        architectures={"Ernie4_5_MoeForCausalLM"},
        # picks the MoE layers (weights), not the attention: every layer's cache is the same
        keys={"moe_layer_interval"},
        note="ERNIE 4.5 MoE: full attention per layer, MoE layers from a start/end/interval range",
    ),
)
