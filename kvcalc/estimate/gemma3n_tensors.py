"""Gemma-3n's decoder-layer and model tensors (transformers' Gemma3nTextModel; vLLM 0.33
``gemma3n.py`` splits them as below), for :mod:`kvcalc.estimate.tensors`.

Per layer (E2B: hidden 2,048, 8 heads × 256, 2 KV heads, AltUp 4, LAuReL 64, per-layer width 256):
q_proj 2,048 × 2,048, k and v 512 × 2,048 each with q/k RMSNorms 2 × 256 (a KV-shared layer: q_proj
and q_norm only), o_proj 2,048 × 2,048; the MLP 3 × its own width × 2,048; AltUp correction 4 × 4,
prediction 16 × 4, modality router 4 × 2,048, router norm 2,048 and the fp32 output scale 2,048;
LAuReL left 64 × 2,048 (column), right 2,048 × 64 (row), norm 2,048; the per-layer input gate 256 ×
2,048 and projection 2,048 × 256 (replicated: vLLM's ``ReplicatedLinear``); five norms (the
inventory's). Per model: embed_tokens_per_layer 262,144 × 30 · 256 (split by vocabulary), its
projection 7,680 × 2,048 (column), norm 256, and 3 + 3 AltUp projections 2,048 × 2,048 (column).
"""

from __future__ import annotations

from kvcalc.estimate.tensor_base import Tensor, _linear, _mlp
from kvcalc.hfconfig.weight_shape import AttentionWeights, MlpWeights
from kvcalc.hfconfig.weight_shape_extra import Gemma3nWeights


def gemma3n_layer(
    g: Gemma3nWeights, a: AttentionWeights, h: int, prefix: str, i: int
) -> list[Tensor]:
    p = f"{prefix}.self_attn"
    q_rows, kv_rows = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    out = _linear(f"{p}.q_proj", q_rows, h, i, "column", bias=a.qkv_bias)
    out.append(Tensor(name=f"{p}.q_norm", rows=a.head_dim, role="norm", layer=i))
    if i < g.first_kv_shared:
        for name in ("k_proj", "v_proj"):
            out += _linear(f"{p}.{name}", kv_rows, h, i, "kv", bias=a.qkv_bias,
                           heads=a.num_kv_heads)  # fmt: skip
        out.append(Tensor(name=f"{p}.k_norm", rows=a.head_dim, role="norm", layer=i))
    out += _linear(f"{p}.o_proj", h, q_rows, i, "row", bias=a.o_bias)
    out += _mlp(MlpWeights(intermediate_size=g.intermediate_sizes[i]), h, f"{prefix}.mlp", i)
    n = g.altup_num_inputs
    q = f"{prefix}.altup"
    out += _linear(f"{q}.correction_coefs", n, n, i, "replicated")
    out += _linear(f"{q}.prediction_coefs", n * n, n, i, "replicated")
    out += _linear(f"{q}.modality_router", n, h, i, "replicated")
    out.append(Tensor(name=f"{q}.router_norm", rows=h, role="norm", layer=i))
    # nn.Parameter(torch.zeros(hidden_size, dtype=torch.float32)) in vLLM's Gemma3nAltUp
    out.append(Tensor(name=f"{q}.correct_output_scale", rows=h, role="vector", layer=i, fp32=True))
    out += _linear(f"{prefix}.laurel.linear_left", g.laurel_rank, h, i, "column")
    out += _linear(f"{prefix}.laurel.linear_right", h, g.laurel_rank, i, "row")
    out.append(Tensor(name=f"{prefix}.laurel.post_laurel_norm", rows=h, role="norm", layer=i))
    out += _linear(f"{prefix}.per_layer_input_gate", g.per_layer_width, h, i, "replicated")
    return out + _linear(f"{prefix}.per_layer_projection", h, g.per_layer_width, i, "replicated")


def gemma3n_model(g: Gemma3nWeights, h: int, layers: int) -> list[Tensor]:
    width = layers * g.per_layer_width
    out = [
        Tensor(name="model.embed_tokens_per_layer", rows=g.per_layer_vocab, cols=width,
               role="embedding", split="vocab"),
    ]  # fmt: skip
    out += _linear("model.per_layer_model_projection", width, h, None, "column")
    out.append(Tensor(name="model.per_layer_projection_norm", rows=g.per_layer_width, role="norm"))
    for which in ("altup_projections", "altup_unembed_projections"):
        out.append(Tensor(name=f"model.{which}", rows=h, cols=h, copies=g.altup_num_inputs - 1,
                          role="linear", split="column"))  # fmt: skip
    return out
