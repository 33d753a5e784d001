"""Zamba2's hybrid-layer tensors beside the Mamba2 mixer (transformers' Zamba2HybridLayer and
Zamba2AttentionDecoderLayer), split over TP as vLLM 0.33's ``zamba2.py`` builds them, for
:mod:`kvcalc.estimate.tensors`.

Each hybrid layer: ``linear`` hidden × hidden (``ReplicatedLinear``) and its LoRA adapters
(``Zamba2LoRA``: A rank × input, ``ColumnParallelLinear`` split by the rank; B output × rank, split
by the output): on the MLP's gate_up (2 × intermediate) and, with ``use_shared_attention_adapter``,
on q, k and v (the attention width each). The first hybrid layer to use a shared block (hybrid
layer ``j`` uses block ``j % num_mem_blocks``) holds that block's weights: q, k, v ``width`` × ``2 ×
hidden`` (``QKVParallelLinear``: as many KV heads as heads), o_proj hidden × width, gate_up 2 ×
intermediate × hidden, down_proj, input_layernorm ``2 × hidden`` and pre_ff_layernorm.
Zamba2-2.7B's defaults (hidden 2,560, 32 heads × 160, intermediate 10,240, rank 128): the block
3 × 5,120² + 2,560 × 5,120 + 3 × 10,240 × 2,560 + 5,120 + 2,560 = 170,401,280; each hybrid layer
2,560² + 128 × 2,560 + 20,480 × 128 = 9,502,720.
"""

from __future__ import annotations

from kvcalc.estimate.tensor_base import Tensor, _linear
from kvcalc.hfconfig.weight_shape_extra import Zamba2Weights


def _lora(name: str, rank: int, inputs: int, outputs: int, i: int) -> list[Tensor]:
    return _linear(f"{name}.A", rank, inputs, i, "column") + _linear(
        f"{name}.B", outputs, rank, i, "column"
    )


def zamba2_hybrid(z: Zamba2Weights, h: int, p: str, i: int) -> list[Tensor]:
    j = z.hybrid_layers.index(i)
    out = _linear(f"{p}.linear", h, h, i, "replicated")
    s = f"{p}.shared_transformer"
    inter2 = 2 * z.intermediate_size
    if j < z.mem_blocks:  # the block's first use holds its weights
        out += _linear(f"{s}.self_attn.q_proj", z.width, 2 * h, i, "column")
        for name in ("k_proj", "v_proj"):
            out += _linear(f"{s}.self_attn.{name}", z.width, 2 * h, i, "kv", heads=z.num_heads)
        out += _linear(f"{s}.self_attn.o_proj", h, z.width, i, "row")
        out += _linear(f"{s}.feed_forward.gate_up_proj", inter2, h, i, "column", bias=z.bias)
        out += _linear(f"{s}.feed_forward.down_proj", h, z.intermediate_size, i, "row",
                       bias=z.bias)  # fmt: skip
        out.append(Tensor(name=f"{s}.input_layernorm", rows=2 * h, role="norm", layer=i))
        out.append(Tensor(name=f"{s}.pre_ff_layernorm", rows=h, role="norm", layer=i))
    out += _lora(f"{s}.feed_forward.gate_up_proj_adapter", z.adapter_rank, h, inter2, i)
    if z.attention_adapters:
        for name in ("q", "k", "v"):
            out += _lora(f"{s}.self_attn.linear_{name}_adapter", z.adapter_rank, z.width,
                         z.width, i)  # fmt: skip
    return out
