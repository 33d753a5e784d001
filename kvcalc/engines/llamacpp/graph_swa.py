"""The sliding-window graphs of llama.cpp ``0c1e570``: ``gemma2``, ``gemma3`` and ``gpt-oss``
(``src/models/gemma2.cpp``, ``gemma3.cpp``, ``openai-moe.cpp``), rebuilt for
:mod:`kvcalc.engines.llamacpp.compute`.

Both keep two caches (``llama_kv_cache_iswa``): full layers attend over the base cache
(``kv_size`` cells), sliding ones over the SWA cache (its own, smaller size, or the base size with
``swa_full``); ``build_attn_inp_kv_iswa`` makes each cache's inputs (K/V row indices, a mask as wide
as that cache, the Hadamard matrices of a quantized one). A Gemma-3 file without
``sliding_window`` has one cache and the one-cache attention input. What the graph holds beyond
Llama's:

- the embeddings scaled by ``√n_embd`` (``ggml_scale``);
- Gemma-3's Q and K RMS norms before RoPE, and Q scaled by ``f_attention_scale`` (both Gemmas);
- a norm after attention and after the MLP (``attn_post_norm``, ``ffn_post_norm``), the MLP a
  GELU with a parallel gate (``ggml_geglu_split``);
- Gemma-2's attention soft-capping (``attn_soft_cap``: ``scale``, ``tanh``, ``scale`` on KQ without
  flash attention; a parameter of ``ggml_flash_attn_ext`` with it) and final logit soft-capping
  (always for Gemma-2, for Gemma-3 when ``final_logit_softcapping`` is set). These ops work in
  place on tensors with one consumer, so they never change the buffer's size — they are rebuilt
  all the same.

gpt-oss (``llama_model_openai_moe``) has the same two caches and Llama's pre-norm layer, with Q/K/V
biases and an output-projection bias, one learned sink logit per head (a source of the softmax or
of ``flash_attn_ext``; ``kq_scale`` inside the softmax, no ``scale`` node), a post-attention norm
before its experts (:func:`~kvcalc.engines.llamacpp.graph_moe.moe_ffn`: biased router, the chosen
experts' logits softmaxed among themselves, biased experts) and no ``ffn_norm``. With
``embeddings_nextn_masked`` false (the default) the last layer runs on every token: the output rows
are picked after it, and its output (``t_h_nextn``) is a graph output, never overwritten.
"""

from __future__ import annotations

from kvcalc.engines.llamacpp import ggml as g
from kvcalc.engines.llamacpp.graph import (
    WEIGHT,
    Builder,
    GraphSpec,
    attn,
    embed,
    gated_ffn,
    kv_inputs,
    logits,
    norm,
    qkv,
)
from kvcalc.engines.llamacpp.graph_moe import Gating, MoeFfn, moe_ffn
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import FullAttention, LayerKind
from kvcalc.model.shape import ModelShape

#: Hugging Face ``model_type`` → the llama.cpp architecture its converter writes
HF_ARCH = {"gemma2": "gemma2", "gemma3": "gemma3", "gemma3_text": "gemma3", "gpt_oss": "gpt-oss"}


def _refuse(model: ModelShape, dims: GraphDims) -> str | None:
    if dims.arch == "gpt-oss" and not (dims.n_expert and dims.n_expert_used and dims.n_ff_exp):
        return "a gpt-oss model without experts (llama.cpp refuses it)"
    kinds = {x.kind for x in model.layers}
    if not all(isinstance(x, FullAttention) for x in model.layers) or kinds - {
        LayerKind.FULL,
        LayerKind.SLIDING,
    }:
        return f"only full and sliding-window attention layers are modelled for {dims.arch}"
    if LayerKind.SLIDING in kinds and LayerKind.FULL not in kinds:
        return "every layer slides: llama.cpp's cache for such a model is not modelled"
    if dims.arch in ("gemma2", "gpt-oss") and LayerKind.SLIDING not in kinds:
        return f"a {dims.arch} graph without sliding-window layers is not modelled (llama.cpp always has them)"
    return None


def _gemma(s: GraphSpec) -> g.Graph:
    gf = g.Graph()
    n_embd, arch = s.dims.n_embd, s.dims.arch
    layers = s.layers
    iswa = any(x.kind is LayerKind.SLIDING for x in layers)
    inp_l = g.dup(embed(gf, s), "scale")  # × √n_embd
    pos = g.inp(g.I32, s.n_tokens)
    base = kv_inputs(s, s.ctx.kv_size, [x for x in layers if x.kind is not LayerKind.SLIDING])
    swa = (
        kv_inputs(s, s.ctx.swa_kv_size, [x for x in layers if x.kind is LayerKind.SLIDING])
        if iswa
        else base
    )
    out_ids = g.inp(g.I32, s.n_outputs)
    for il, layer in enumerate(layers):
        hd = layer.head_dim_k
        q, k, v = qkv(s, norm(inp_l, n_embd), layer)
        if arch == "gemma3":
            q, k = norm(q, hd), norm(k, hd)
        q, k = g.dup(q, "rope", pos), g.dup(k, "rope", pos)
        q = g.dup(q, "scale")  # f_attention_scale
        cache = swa if layer.kind is LayerKind.SLIDING else base
        cur = attn(gf, s, layer, q, k, v, cache, iswa=iswa, soft_cap=arch == "gemma2")
        cur = g.mul_mat(
            g.external(WEIGHT, s.model.num_attention_heads * layer.head_dim_v, n_embd), cur
        )
        if il == len(layers) - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        sa_out = g.dup(norm(cur, n_embd), "add", inp_l)
        cur = norm(gated_ffn(s, norm(sa_out, n_embd)), n_embd)
        inp_l = g.dup(cur, "add", sa_out)
    softcap = arch == "gemma2" or s.dims.final_logit_softcap
    return logits(gf, s, norm(inp_l, n_embd), softcap=softcap)


def _gpt_oss(s: GraphSpec) -> g.Graph:
    gf = g.Graph()
    n_embd, layers, d = s.dims.n_embd, s.layers, s.dims
    inp_l = embed(gf, s)
    pos = g.inp(g.I32, s.n_tokens)
    base = kv_inputs(s, s.ctx.kv_size, [x for x in layers if x.kind is not LayerKind.SLIDING])
    swa = kv_inputs(s, s.ctx.swa_kv_size, [x for x in layers if x.kind is LayerKind.SLIDING])
    out_ids = g.inp(g.I32, s.n_outputs)
    experts = MoeFfn(n_expert=d.n_expert, n_expert_used=d.n_expert_used, n_ff_exp=d.n_ff_exp,
                     gating=Gating.SOFTMAX_WEIGHT, biases=True)  # fmt: skip
    for layer in layers:
        inp_sa = inp_l
        q, k, v = qkv(s, norm(inp_l, n_embd), layer)
        q, k = g.dup(q, "rope", pos), g.dup(k, "rope", pos)
        cache = swa if layer.kind is LayerKind.SLIDING else base
        cur = attn(gf, s, layer, q, k, v, cache, iswa=True, sinks=True)
        cur = g.mul_mat(
            g.external(WEIGHT, s.model.num_attention_heads * layer.head_dim_v, n_embd), cur
        )
        cur = g.dup(cur, "add", g.external(g.F32, n_embd))  # attn_output.bias
        ffn_inp = g.dup(cur, "add", inp_sa)
        inp_l = g.dup(moe_ffn(gf, norm(ffn_inp, n_embd), experts), "add", ffn_inp)
    inp_l.is_output = True  # t_h_nextn: the last layer's output, every token
    return logits(gf, s, norm(g.get_rows(inp_l, out_ids), n_embd))


_GEMMA = Builder(build=_gemma, refuse=_refuse)
#: the architectures rebuilt here and their builder (gpt-oss's loader requires an output bias)
BUILDERS = {"gemma2": _GEMMA, "gemma3": _GEMMA,
            "gpt-oss": Builder(build=_gpt_oss, refuse=_refuse, handles=frozenset({"attn_output.bias"}))}  # fmt: skip
