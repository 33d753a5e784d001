"""The GGUF of an MLA model as llama.cpp's ``deepseek2`` loader reads it: keys and tensors."""

from __future__ import annotations

from typing import Any

#: the experts' width written (``leading_dense_block_count`` makes every layer dense: it sizes nothing)
EXPERT_FFN = 32


#: the per-head widths MLA decompresses to (DeepSeek-V3's): they size weights, not the cache
MLA_NOPE, MLA_V = 128, 128


def mla_keys(spec: Any) -> dict[str, int]:
    """``deepseek2`` as llama.cpp's converter writes MLA: one KV head, ``key_length`` the latent
    (``kv_lora_rank + rope``), ``value_length`` the rank, the decompressed widths in ``*_mla``; every
    layer a dense leading block (no experts needed)."""
    m = spec.mla
    assert m is not None
    return {"context_length": spec.context_length, "embedding_length": spec.hidden,
            "block_count": spec.num_layers, "feed_forward_length": spec.ffn,
            "attention.head_count": spec.heads, "attention.head_count_kv": 1,
            "attention.key_length": m.latent_dim, "attention.value_length": m.kv_lora_rank,
            "attention.key_length_mla": MLA_NOPE + m.rope_dim, "attention.value_length_mla": MLA_V,
            "attention.q_lora_rank": 0, "attention.kv_lora_rank": m.kv_lora_rank,
            "rope.dimension_count": m.rope_dim, "leading_dense_block_count": spec.num_layers,
            "expert_feed_forward_length": EXPERT_FFN, "expert_shared_count": 0}  # fmt: skip


def mla_tensors(spec: Any) -> list[tuple[str, tuple[int, ...]]]:
    """``llama_model_deepseek2::load_arch_tensors``' tensors for dense MLA layers without a Q LoRA."""
    m, h, vocab, n = spec.mla, spec.hidden, spec.vocab, spec.heads
    assert m is not None
    rank = m.kv_lora_rank
    out: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (vocab, h)), ("output_norm.weight", (h,)), ("output.weight", (vocab, h)),
    ]  # fmt: skip
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_kv_a_norm.weight", (rank,)),
                (b + "attn_q.weight", (n * (MLA_NOPE + m.rope_dim), h)),
                (b + "attn_kv_a_mqa.weight", (rank + m.rope_dim, h)),
                (b + "attn_k_b.weight", (n, rank, MLA_NOPE)), (b + "attn_v_b.weight", (n, MLA_V, rank)),
                (b + "attn_output.weight", (h, n * MLA_V)), (b + "ffn_norm.weight", (h,)),
                (b + "ffn_gate.weight", (spec.ffn, h)), (b + "ffn_up.weight", (spec.ffn, h)),
                (b + "ffn_down.weight", (h, spec.ffn))]  # fmt: skip
    return out
