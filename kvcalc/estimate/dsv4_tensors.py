"""DeepSeek-V4 decoder-layer tensors besides the MoE (transformers' DeepseekV4Attention and
DeepseekV4HyperConnection), for :mod:`kvcalc.estimate.tensors`.

Per layer (V4-Flash: 64 heads × 512, q LoRA 1,024, 8 output groups × 1,024, indexer 64 × 128):
q_a 1,024 × 4,096; q_a_norm 1,024; q_b 32,768 × 1,024; kv 512 × 4,096; kv_norm 512; o_a (grouped)
8,192 × 4,096; o_b 4,096 × 8,192; sinks 64. A CSA layer (ratio 4) adds an overlapping compressor
(kv and gate 1,024 × 4,096, position bias 4 × 1,024, kv_norm 512) and the indexer (kv and gate 256 ×
4,096, position bias 4 × 256, kv_norm 128, q_b 8,192 × 1,024, weights 64 × 4,096); an HCA layer
(ratio 128) a compressor (kv and gate 512 × 4,096, position bias 128 × 512, kv_norm 512). Around the
attention and the MoE: hyper-connections of (2 + 4) · 4 = 24 mixes over 4 × 4,096 inputs, 24 biases
and 3 scales each.
"""

from __future__ import annotations

from kvcalc.estimate.tensor_base import Tensor, _linear
from kvcalc.hfconfig.weight_shape_extra import Dsv4Weights


def dsv4_layer(d: Dsv4Weights, h: int, prefix: str, i: int) -> list[Tensor]:
    p = f"{prefix}.self_attn"
    heads = d.num_heads * d.head_dim
    out = _linear(f"{p}.q_a_proj", d.q_lora_rank, h, i, "replicated")
    out.append(Tensor(name=f"{p}.q_a_norm", rows=d.q_lora_rank, role="norm", layer=i))
    out += _linear(f"{p}.q_b_proj", heads, d.q_lora_rank, i, "column")
    out += _linear(f"{p}.kv_proj", d.head_dim, h, i, "replicated")
    out.append(Tensor(name=f"{p}.kv_norm", rows=d.head_dim, role="norm", layer=i))
    lora = d.o_groups * d.o_lora_rank
    out += _linear(f"{p}.o_a_proj", lora, heads // d.o_groups, i, "column")
    out += _linear(f"{p}.o_b_proj", h, lora, i, "row")
    out.append(Tensor(name=f"{p}.sinks", rows=d.num_heads, role="vector", layer=i, split="column"))
    ratio = d.compress_ratios[i]
    if ratio:
        out += _compressor(f"{p}.compressor", h, d.head_dim, ratio, i, overlap=ratio == d.csa_rate)
    if ratio == d.csa_rate:
        q = f"{p}.compressor.indexer"
        out += _compressor(q, h, d.index_head_dim, ratio, i, overlap=True)
        out += _linear(f"{q}.q_b_proj", d.index_n_heads * d.index_head_dim, d.q_lora_rank, i,
                       "replicated")  # fmt: skip
        out += _linear(f"{q}.scorer.weights_proj", d.index_n_heads, h, i, "replicated")
    if d.hc_mult > 1:
        mixes = (2 + d.hc_mult) * d.hc_mult
        for name in ("attn_hc", "ffn_hc"):
            out.append(Tensor(name=f"{prefix}.{name}.fn", rows=mixes, cols=d.hc_mult * h,
                              role="vector", layer=i))  # fmt: skip
            out.append(Tensor(name=f"{prefix}.{name}.base_scale", rows=mixes + 3, role="vector",
                              layer=i))  # fmt: skip
    return out


def _compressor(p: str, h: int, dim: int, ratio: int, i: int, *, overlap: bool) -> list[Tensor]:
    """kv and gate projections (twice as wide when windows overlap), position bias, kv_norm."""
    width = 2 * dim if overlap else dim
    out = _linear(f"{p}.kv_proj", width, h, i, "replicated")
    out += _linear(f"{p}.gate_proj", width, h, i, "replicated")
    out.append(Tensor(name=f"{p}.position_bias", rows=ratio, cols=width, role="vector", layer=i))
    out.append(Tensor(name=f"{p}.kv_norm", rows=dim, role="norm", layer=i))
    return out
