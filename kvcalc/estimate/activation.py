"""The shapes behind vLLM's activation peak: live width per token, the fused-MoE workspace, the PP split.

Used by :func:`kvcalc.estimate.overhead.estimate_overhead` (the module doc there has the formulas).
"""

from __future__ import annotations

from kvcalc.hfconfig.weight_shape import WeightShape
from kvcalc.units import cdiv

#: Activation dtype bytes (bf16/fp16 activations; quantized weights still run 16-bit activations).
ACT_BYTES = 2


def live_width_per_token(w: WeightShape, tp: int) -> int:
    """Values per token live at the widest layer's peak, one TP rank."""
    h = w.hidden_size
    widths = [2 * h]
    if "dense" in w.ffns and w.mlp:
        widths.append(3 * cdiv(w.mlp.intermediate_size, tp) + 2 * h)
    if "moe" in w.ffns and w.moe:
        m = w.moe
        shared = 3 * cdiv(m.shared_intermediate_size, tp)
        widths.append(
            m.experts_per_token * (3 * cdiv(m.expert_intermediate_size, tp) + h) + shared + 2 * h
        )
    if w.attention:
        a = w.attention
        q = cdiv(a.num_heads, tp) * a.head_dim * (2 if a.output_gate else 1)
        kv = max(1, a.num_kv_heads // tp) * a.head_dim
        widths.append(q + 2 * kv + a.num_heads * a.head_dim // tp + 2 * h)
    if w.mla:
        mla = w.mla
        heads = cdiv(mla.num_heads, tp)
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        widths.append(heads * (qk + mla.qk_nope_head_dim + 2 * mla.v_head_dim) + 2 * h)
    if w.mamba2:
        ssm = w.mamba2
        widths.append(cdiv(2 * ssm.intermediate_size + 2 * ssm.n_groups * ssm.state_size + ssm.num_heads, tp)
                      + cdiv(ssm.conv_dim, tp) + 2 * h)  # fmt: skip
    if w.gdn:
        g = w.gdn
        key, value = g.num_k_heads * g.k_head_dim, g.num_v_heads * g.v_head_dim
        widths.append(cdiv(2 * key + 2 * value, tp) + cdiv(2 * key + value, tp) + 2 * h)
    return max(widths)


def moe_workspace_bytes(w: WeightShape, tokens: int, tp: int) -> int:
    """The fused-MoE kernel's kept workspaces and output for ``tokens`` tokens (0 without MoE)."""
    m = w.moe
    if m is None or "moe" not in w.ffns:
        return 0
    inter, h = cdiv(m.expert_intermediate_size, tp), w.hidden_size
    return (
        tokens * m.experts_per_token * (max(inter, h) + 2 * inter) * ACT_BYTES
        + tokens * h * ACT_BYTES
    )


def stage_layers(num_layers: int, pp: int) -> list[int]:
    """vLLM's ``get_pp_indices`` split: ``L // pp`` each, the remainder to stages -2, -3, ..."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts
