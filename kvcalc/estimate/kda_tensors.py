"""Kimi Delta Attention's tensors (Kimi-Linear), for :mod:`kvcalc.estimate.tensors`, split over TP
as vLLM 0.33's ``KimiGatedDeltaNetAttention`` (``kimi_gdn_linear_attn.py``) builds them.

Kimi-Linear-48B-A3B (hidden 2,304, 32 heads × 128 = 4,096 wide, kernel 4): q, k, v 3 × 4,096 ×
2,304 (column; one merged ``in_proj_qkvgfab`` with b and f_a in vLLM), b 32 × 2,304 (column), f_a
128 × 2,304 (replicated: the merge's replicated shard), f_b 4,096 × 128 (column), dt_bias 4,096 and
A_log 32 (fp32, split by heads), conv1d 3 × 4,096 × 4 (fp32: ``params_dtype=torch.float32``,
column), g_a 128 × 2,304 (replicated), g_b 4,096 × 128 (column), o_norm 128, o_proj 2,304 × 4,096
(row).
"""

from __future__ import annotations

from kvcalc.estimate.tensor_base import Tensor, _linear
from kvcalc.hfconfig.weight_shape_extra import KdaWeights


def kda_layer(k: KdaWeights, h: int, p: str, i: int) -> list[Tensor]:
    width = k.num_heads * k.head_dim
    out = _linear(f"{p}.qkv_proj", 3 * width, h, i, "column")
    out += _linear(f"{p}.b_proj", k.num_heads, h, i, "column")
    out += _linear(f"{p}.f_a_proj", k.head_dim, h, i, "replicated")
    out += _linear(f"{p}.f_b_proj", width, k.head_dim, i, "column")
    out.append(Tensor(name=f"{p}.dt_bias", rows=width, role="vector", layer=i, split="column",
                      fp32=True))  # fmt: skip
    out.append(Tensor(name=f"{p}.A_log", rows=k.num_heads, role="vector", layer=i,
                      split="column", fp32=True))  # fmt: skip
    out.append(Tensor(name=f"{p}.conv1d", rows=3 * width, cols=k.conv_kernel, role="conv",
                      layer=i, split="column", fp32=True))  # fmt: skip
    out += _linear(f"{p}.g_a_proj", k.head_dim, h, i, "replicated")
    out += _linear(f"{p}.g_b_proj", width, k.head_dim, i, "column")
    out.append(Tensor(name=f"{p}.o_norm", rows=k.head_dim, role="norm", layer=i))
    return out + _linear(f"{p}.o_proj", h, width, i, "row")
