"""Whisper's tensors (:class:`~kvcalc.hfconfig.weight_shape_extra.WhisperWeights`), split over TP as
vLLM 0.33's ``whisper.py`` splits them: q/k/v (``QKVParallelLinear``, biased) and the cross
attention's q and fused k/v by heads, ``out_proj`` and ``fc2`` by rows (their biases whole),
``fc1`` by columns; the token embedding (an ``nn.Embedding``, the head tied to it), convolutions,
position tables and LayerNorms whole on every rank.

Whisper's defaults (``WhisperConfig()``: d_model 384, 4 + 4 layers of 6 heads, ffn 1,536, 80 mel
bins, vocabulary 51,865): 37,765,248 parameters, 75,530,496 B in bf16 (recorded by vLLM's own
meta build at TP 1).
"""

from __future__ import annotations

from kvcalc.estimate.tensor_base import Tensor, _linear
from kvcalc.hfconfig.weight_shape_extra import WhisperWeights


def _attention(p: str, d: int, heads: int, layer: int | None) -> list[Tensor]:
    out = _linear(f"{p}.qkv_proj", 3 * d, d, layer, "column", bias=True)
    return out + _linear(f"{p}.out_proj", d, d, layer, "row", bias=True)


def _mlp(p: str, d: int, ffn: int, layer: int | None) -> list[Tensor]:
    out = _linear(f"{p}.fc1", ffn, d, layer, "column", bias=True)
    return out + _linear(f"{p}.fc2", d, ffn, layer, "row", bias=True)


def _norms(name: str, d: int, count: int, layer: int | None) -> Tensor:
    return Tensor(name=name, rows=d, copies=2 * count, role="norm", layer=layer)  # weight + bias


def whisper_tensors(w: WhisperWeights) -> list[Tensor]:
    d = w.d_model
    e = "model.encoder"
    out = _linear(f"{e}.conv1", d, w.num_mel_bins * 3, None, "replicated", bias=True, role="conv")
    out += _linear(f"{e}.conv2", d, d * 3, None, "replicated", bias=True, role="conv")
    out.append(Tensor(name=f"{e}.embed_positions", rows=w.source_positions, cols=d,
                      role="position"))  # fmt: skip
    for i in range(w.encoder_layers):
        q = f"{e}.layers.{i}"
        out += _attention(f"{q}.self_attn", d, w.encoder_heads, None)
        out += _mlp(q, d, w.encoder_ffn, None)
        out.append(_norms(f"{q}.layer_norms", d, 2, None))
    out.append(_norms(f"{e}.layer_norm", d, 1, None))
    p = "model.decoder"
    # an nn.Embedding, whole on every rank (not vLLM's VocabParallelEmbedding: no split, no
    # padding), which the head (proj_out) is tied to
    out.append(Tensor(name=f"{p}.embed_tokens", rows=w.vocab_size, cols=d, role="embedding"))
    out.append(Tensor(name=f"{p}.embed_positions", rows=w.target_positions, cols=d,
                      role="position"))  # fmt: skip
    for i in range(w.decoder_layers):
        q = f"{p}.layers.{i}"
        out += _attention(f"{q}.self_attn", d, w.decoder_heads, i)
        out += _linear(f"{q}.encoder_attn.q_proj", d, d, i, "column", bias=True)
        out += _linear(f"{q}.encoder_attn.kv_proj", 2 * d, d, i, "column", bias=True)
        out += _linear(f"{q}.encoder_attn.out_proj", d, d, i, "row", bias=True)
        out += _mlp(q, d, w.decoder_ffn, i)
        out.append(_norms(f"{q}.layer_norms", d, 3, i))
    out.append(_norms(f"{p}.layer_norm", d, 1, None))
    return out
