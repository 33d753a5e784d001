"""The ``deepseek2`` graph of llama.cpp ``0c1e570`` (``src/models/deepseek2.cpp``): multi-head latent
attention over a K-only cache, rebuilt for :mod:`kvcalc.engines.llamacpp.compute`.

A file with the split ``attn_k_b``/``attn_v_b`` tensors (``key_length_mla``/``value_length_mla``
set: ``hparams.is_mla()``, as the converter writes DeepSeek models) runs MLA with the absorption
optimisation, as MQA over the latent: per layer

- Q: ``attn_q`` (or the Q LoRA ``attn_q_a``, its norm, ``attn_q_b``), shaped ``[qk_nope + rope,
  n_head, n_tokens]`` and split into views; the RoPE part roped, the no-RoPE part absorbed into the
  latent by ``attn_k_b`` (``mul_mat`` over a permuted view) and concatenated back
  (``[kv_lora_rank + rope, n_head, n_tokens]``);
- K: ``attn_kv_a_mqa`` gives ``[kv_lora_rank + rope, n_tokens]``, whose RoPE view is roped and whose
  latent view is RMS-normed; K is their concatenation, V the latent itself;
- ``build_attn`` with ``llm_graph_input_attn_k`` (K row indices and the mask; no V cache, no
  Hadamard rotations): K stored, V a view of the K cache, and ``build_attn_mha`` with ``v_mla``:
  the attention output decompressed by ``attn_v_b`` (with flash attention between two permutes
  and a ``cont``);
- the FFN: dense in the ``leading_dense_block_count`` first layers, else routed experts plus
  ``expert_shared_count`` shared ones (:mod:`kvcalc.engines.llamacpp.graph_moe`).

Not modelled (refused): legacy files with one ``attn_kv_b`` (MHA). (A quantized
cache needs flash attention here: llama.cpp wants K and V of one type for MLA, and a quantized V
needs flash attention.)
"""

from __future__ import annotations

from kvcalc.engines.llamacpp import ggml as g
from kvcalc.engines.llamacpp.graph import WEIGHT, Builder, GraphSpec, embed, logits, norm
from kvcalc.engines.llamacpp.graph_moe import ffn_block
from kvcalc.hfconfig.moe_router import MoeRouter, RouterScoring
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import MLALatent
from kvcalc.model.shape import ModelShape

HF_ARCH = {"deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2"}


def dims_from_config(model: ModelShape) -> GraphDims | None:
    """The graph widths of a DeepSeek config as ``convert_hf_to_gguf.py`` writes them (MLA split
    into ``attn_k_b``/``attn_v_b``, ``leading_dense_block_count = first_k_dense_replace``, the router
    keys), or ``None`` without MLA."""
    w = model.weights
    m, moe, mlp = (getattr(w, name, None) for name in ("mla", "moe", "mlp"))
    if m is None:
        return None
    ffns = tuple(getattr(w, "ffns", ()))
    lead = next((i for i, kind in enumerate(ffns) if kind == "moe"), len(ffns))
    extra = ("dense layers after the expert layers",) if "dense" in ffns[lead:] else ()
    router = moe.router if moe is not None else MoeRouter()
    n_ff = mlp.intermediate_size if mlp is not None else w.intermediate_size
    return GraphDims(arch="deepseek2", n_embd=w.hidden_size, n_ff=n_ff, n_vocab=w.vocab_size,
                     n_expert=moe.num_experts if moe else 0, n_expert_used=moe.experts_per_token if moe else 0,
                     n_ff_exp=moe.expert_intermediate_size if moe else 0,
                     n_expert_shared=moe.shared_intermediate_size // moe.expert_intermediate_size if moe else 0,
                     shared_expert=bool(moe and moe.shared_intermediate_size),
                     expert_gating_func=2 if router.scoring is RouterScoring.SIGMOID else 1,
                     expert_weights_norm=router.norm_topk_prob,
                     expert_weights_scale=router.routed_scaling_factor, expert_probs_bias=router.selection_bias,
                     n_expert_groups=router.n_group, n_group_used=router.topk_group,
                     n_layer_dense_lead=lead if moe else len(ffns), n_lora_q=m.q_lora_rank,
                     head_k_mla=m.qk_nope_head_dim + m.qk_rope_head_dim, head_v_mla=m.v_head_dim,
                     unmodelled_tensors=extra)  # fmt: skip


def _refuse(model: ModelShape, dims: GraphDims) -> str | None:
    if any(not isinstance(x, MLALatent) for x in model.layers):
        return "only deepseek2 models with MLA layers alone are modelled"
    if len(set(model.layers)) > 1:
        return "MLA layers of different shapes are not modelled"
    if not (dims.head_k_mla and dims.head_v_mla):
        return "a deepseek2 file without the split attn_k_b/attn_v_b (MHA over attn_kv_b) is not modelled"
    return None


def _w(*dims: int) -> g.Tensor:
    return g.external(WEIGHT, *dims)


def _concat(a: g.Tensor, b: g.Tensor) -> g.Tensor:
    """``ggml_concat`` along the first dimension."""
    return g.new(a.size, a.ne[0] + b.ne[0], *a.ne[1:], op="concat", src=(a, b))


def _deepseek2(s: GraphSpec) -> g.Graph:
    gf = g.Graph()
    d, n_tokens, ctx = s.dims, s.n_tokens, s.ctx
    layers = [x for x in s.model.layers if isinstance(x, MLALatent)]
    n_embd, n_head = d.n_embd, layers[0].num_heads or s.model.num_attention_heads
    rope, rank = layers[0].rope_dim, layers[0].kv_lora_rank
    hk, hv = d.head_k_mla, d.head_v_mla
    nope = hk - rope
    inp_l = embed(gf, s)
    pos = g.inp(g.I32, n_tokens)
    # build_attn_inp_k: K row indices and the mask, no V indices, no rotations
    streams = 1 if ctx.kv_unified else ctx.n_seq_max
    k_idxs = g.inp(g.I64, n_tokens)
    mask = g.inp(g.F16 if ctx.flash_attn else g.F32, ctx.kv_size, n_tokens // streams, 1, streams)
    out_ids = g.inp(g.I32, s.n_outputs)
    for il in range(len(layers)):
        inp_sa = inp_l
        cur = norm(inp_l, n_embd)
        if d.n_lora_q:
            q = g.mul_mat(
                _w(d.n_lora_q, n_head * hk),
                norm(g.mul_mat(_w(n_embd, d.n_lora_q), cur), d.n_lora_q),
            )
        else:
            q = g.mul_mat(_w(n_embd, n_head * hk), cur)
        q = g.reshape(q, hk, n_head, n_tokens)
        kv_pe = g.mul_mat(_w(n_embd, rank + rope), cur)
        kv_cmpr = g.view(kv_pe, rank, n_tokens, nb=(kv_pe.nb[1],))
        k_pe = g.dup(g.view(kv_pe, rope, 1, n_tokens, nb=(kv_pe.nb[1], kv_pe.nb[1])), "rope", pos)
        kv_cmpr = norm(kv_cmpr, rank)
        q_nope = g.view(q, nope, n_head, n_tokens, nb=(q.nb[1], q.nb[2]))
        q_pe = g.dup(g.view(q, rope, n_head, n_tokens, nb=(q.nb[1], q.nb[2])), "rope", pos)
        absorbed = g.mul_mat(_w(nope, rank, n_head), g.permute(q_nope, 0, 2, 1, 3))
        q_cur = _concat(g.permute(absorbed, 0, 2, 1, 3), q_pe)
        v_cur = g.reshape(kv_cmpr, rank, 1, n_tokens)
        k_cur = _concat(v_cur, k_pe)
        cur = _attn_k(
            gf, s, q_cur, k_cur, v_cur, k_idxs, mask, g.external(WEIGHT, rank, hv, n_head)
        )
        cur = g.mul_mat(_w(n_head * hv, n_embd), cur)
        if il == len(layers) - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup(cur, "add", inp_sa)
        inp_l = g.dup(ffn_block(gf, norm(ffn_inp, n_embd), d, il), "add", ffn_inp)
    return logits(gf, s, norm(inp_l, n_embd))


def _attn_k(
    gf: g.Graph,
    s: GraphSpec,
    q: g.Tensor,
    k: g.Tensor,
    v: g.Tensor,
    k_idxs: g.Tensor,
    mask: g.Tensor,
    v_mla: g.Tensor,
) -> g.Tensor:
    """``build_attn`` with ``llm_graph_input_attn_k`` and ``build_attn_mha`` with ``v_mla``, up
    to (not including) the output projection."""
    for t in (q, v, k):
        gf.expand(t)
    fa, n_kv, ns, n_tokens = s.ctx.flash_attn, s.ctx.kv_size, s.ctx.n_stream, s.n_tokens
    ks = 1 if s.type_k.block_values > 1 else s.type_k.row_bytes(1)  # views only: never allocated
    width = k.ne[0] * k.ne[1]
    k_cache = g.external(ks, width, n_kv, ns)
    kc = k_cache if ns == 1 else g.reshape(k_cache, width, n_kv * ns)
    gf.expand(g.set_rows(kc, g.view(k, width, n_tokens, nb=(k.nb[2],)), k_idxs))
    row = ks * width
    k_view = g.view(k_cache, k.ne[0], k.ne[1], n_kv, ns, nb=(ks * k.ne[0], row, row * n_kv))
    v_view = g.view(k_view, v.ne[0], k.ne[1], n_kv, ns, nb=k_view.nb[1:])
    qs = g.view(
        q, q.ne[0], q.ne[1], q.ne[2] // ns, ns, nb=(q.nb[1], q.nb[2], q.nb[2] * (q.ne[2] // ns))
    )
    qp, kp, vp = (g.permute(t, 0, 2, 1, 3) for t in (qs, k_view, v_view))
    if fa:
        out = g.flash_attn_ext(qp, kp, vp, mask)
        out = g.permute(g.mul_mat(v_mla, g.permute(out, 0, 2, 1, 3)), 0, 2, 1, 3)
        out = g.cont(out)
        cur = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
    else:
        kq = g.dup(g.mul_mat(kp, qp), "soft_max", mask)
        vt = g.cont(g.transpose(vp))  # V shares K's rows (not transposed): made contiguous
        kqv = g.mul_mat(v_mla, g.mul_mat(vt, kq))
        cur = g.permute(kqv, 0, 2, 1, 3)
        cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    gf.expand(cur)
    return cur


BUILDERS = {"deepseek2": Builder(build=_deepseek2, refuse=_refuse)}
