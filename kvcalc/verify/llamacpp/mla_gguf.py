"""The GGUF of an MLA model as llama.cpp's ``deepseek2`` loader reads it: keys and tensors
(``load_arch_hparams``/``load_arch_tensors`` of llama.cpp ``0c1e570``; numpy shapes, ggml ``ne``
reversed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvcalc.verify.llamacpp.spec import GgufSpec

Tensors = list[tuple[str, tuple[int, ...]]]


#: the per-head widths MLA decompresses to where the layout does not say (DeepSeek-V3's): they size
#: weights and the compute graph, not the cache
MLA_NOPE, MLA_V = 128, 128


def _mla_widths(spec: GgufSpec) -> tuple[int, int]:
    m = spec.mla
    assert m is not None
    return m.qk_nope_dim or MLA_NOPE, m.v_head_dim or MLA_V


def mla_keys(spec: GgufSpec) -> dict[str, int | float | bool]:
    """``deepseek2`` as llama.cpp's converter writes MLA: one KV head, ``key_length`` the latent
    (``kv_lora_rank + rope``), ``value_length`` the rank, the decompressed widths in ``*_mla``, no Q
    LoRA unless the model has one; the first ``dense_lead`` layers dense, the others routed experts
    beside shared ones, with the router's keys as the converter writes them."""
    m = spec.mla
    assert m is not None
    nope, v = _mla_widths(spec)
    keys: dict[str, int | float | bool] = {"context_length": spec.context_length, "embedding_length": spec.hidden,
            "block_count": spec.num_layers, "feed_forward_length": spec.ffn,
            "attention.head_count": spec.heads, "attention.head_count_kv": 1,
            "attention.key_length": m.latent_dim, "attention.value_length": m.kv_lora_rank,
            "attention.key_length_mla": nope + m.rope_dim, "attention.value_length_mla": v,
            "attention.q_lora_rank": spec.q_lora, "attention.kv_lora_rank": m.kv_lora_rank,
            "rope.dimension_count": m.rope_dim,
            "leading_dense_block_count": spec.dense_lead if spec.experts else spec.num_layers,
            "expert_feed_forward_length": spec.expert_ffn, "expert_shared_count": 0}  # fmt: skip
    if spec.experts:
        r = spec.router
        keys |= {"expert_count": spec.experts, "expert_used_count": spec.experts_used,
                 "expert_shared_count": spec.shared_ffn // spec.expert_ffn,
                 "expert_gating_func": 2 if r.scoring.value == "sigmoid" else 1,
                 "expert_weights_scale": r.routed_scaling_factor, "expert_group_count": r.n_group,
                 "expert_group_used_count": r.topk_group}  # fmt: skip
        if r.norm_topk_prob:
            keys["expert_weights_norm"] = True
    return keys


def mla_tensors(spec: GgufSpec) -> Tensors:
    """``llama_model_deepseek2::load_arch_tensors``' tensors for MLA layers."""
    m, h, vocab, n = spec.mla, spec.hidden, spec.vocab, spec.heads
    assert m is not None
    rank, (nope, v) = m.kv_lora_rank, _mla_widths(spec)
    dense = spec.dense_lead if spec.experts else spec.num_layers
    out: Tensors = [
        ("token_embd.weight", (vocab, h)), ("output_norm.weight", (h,)), ("output.weight", (vocab, h)),
    ]  # fmt: skip
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_kv_a_norm.weight", (rank,)),
                (b + "attn_kv_a_mqa.weight", (rank + m.rope_dim, h)),
                (b + "attn_k_b.weight", (n, rank, nope)), (b + "attn_v_b.weight", (n, v, rank)),
                (b + "attn_output.weight", (h, n * v)), (b + "ffn_norm.weight", (h,))]  # fmt: skip
        q = n * (nope + m.rope_dim)
        if spec.q_lora:
            out += [(b + "attn_q_a_norm.weight", (spec.q_lora,)), (b + "attn_q_a.weight", (spec.q_lora, h)),
                    (b + "attn_q_b.weight", (q, spec.q_lora))]  # fmt: skip
        else:
            out.append((b + "attn_q.weight", (q, h)))
        if i < dense:
            out += [(b + "ffn_gate.weight", (spec.ffn, h)), (b + "ffn_up.weight", (spec.ffn, h)),
                    (b + "ffn_down.weight", (h, spec.ffn))]  # fmt: skip
            continue
        e, ff, sh = spec.experts, spec.expert_ffn, spec.shared_ffn
        out += [(b + "ffn_gate_inp.weight", (e, h)), (b + "ffn_gate_exps.weight", (e, ff, h)),
                (b + "ffn_up_exps.weight", (e, ff, h)), (b + "ffn_down_exps.weight", (e, h, ff)),
                (b + "ffn_gate_shexp.weight", (sh, h)), (b + "ffn_up_shexp.weight", (sh, h)),
                (b + "ffn_down_shexp.weight", (h, sh))]  # fmt: skip
        if spec.router.selection_bias:
            out.append((b + "exp_probs_b.bias", (e,)))
    return out
