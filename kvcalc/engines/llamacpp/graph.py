"""The pieces every rebuilt llama.cpp graph shares (``llm_graph_context`` in ``src/llama-graph.cpp``
and the KV cache's views in ``llama-kv-cache.cpp``, llama.cpp ``0c1e570``).

An architecture's graph (:mod:`kvcalc.engines.llamacpp.compute` for ``llama``/``qwen2``/``qwen3``,
:mod:`kvcalc.engines.llamacpp.graph_swa` for the sliding-window ones) is a :class:`Builder`: a
function from one reserve ubatch (:class:`GraphSpec`) to the :class:`~.llamacpp_ggml.Graph`
llama.cpp builds for it, and the architecture's own refusals. The blocks here are those of
``llm_graph_context``: ``build_inp_embd``, a KV cache's attention inputs (``build_attn_inp_kv``,
one per cache of ``build_attn_inp_kv_iswa``), ``build_norm`` (RMS), ``build_attn`` with a cache
(``cpy_k``/``cpy_v``/``get_k``/``get_v``, ``build_attn_mha``) and the Hadamard rotations of
quantized caches (``llama_mul_mat_hadamard``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvcalc.engines.llamacpp import ggml as g
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import FullAttention
from kvcalc.model.shape import ModelShape

#: the weights' type: weights are external, their type changes no compute tensor
WEIGHT = g.F16


@frozen
class ComputeInputs:
    """What the graph's sizes depend on (from the context llama.cpp settles on)."""

    n_ubatch: int
    n_batch: int
    n_seq_max: int
    kv_size: int  # cells per stream
    n_stream: int
    kv_unified: bool
    flash_attn: bool
    #: cells per stream of the sliding-window cache (``llama_kv_cache_iswa``; 0: one cache)
    swa_kv_size: int = 0


@frozen
class GraphSpec:
    """One reserve ubatch of one model: everything a :class:`Builder` reads."""

    model: ModelShape
    dims: GraphDims
    ctx: ComputeInputs
    type_k: CacheDtype
    type_v: CacheDtype
    n_tokens: int
    n_outputs: int

    @property
    def layers(self) -> list[FullAttention]:
        return [x for x in self.model.layers if isinstance(x, FullAttention)]

    @property
    def v_gqa_max(self) -> int:
        """``n_embd_v_gqa_max``: the transposed V cache's width (the widest layer's)."""
        return max(x.num_kv_heads * x.head_dim_v for x in self.layers)


@dataclass(frozen=True)
class Builder:
    #: the graph llama.cpp builds for one reserve ubatch
    build: Callable[[GraphSpec], g.Graph]
    #: why this architecture's graph is not modelled for a model (layer kinds, options), or None
    refuse: Callable[[ModelShape, GraphDims], str | None]
    #: entries of ``GraphDims.unmodelled_tensors`` whose nodes this graph does rebuild
    handles: frozenset[str] = frozenset()


@frozen
class KvInputs:
    """One cache's attention inputs and how many cells its views span (``n_kv``)."""

    n_kv: int
    k_idxs: g.Tensor
    v_idxs: g.Tensor
    mask: g.Tensor
    k_rot: g.Tensor | None
    v_rot: g.Tensor | None


def n_seqs_of(ctx: ComputeInputs) -> int:
    """``ubatch.n_seqs_unq`` of the reserve ubatches: every sequence."""
    return ctx.n_seq_max


def embed(gf: g.Graph, s: GraphSpec) -> g.Tensor:
    """``build_inp_embd``: both inputs of ``ggml_build_forward_select`` enter the graph; the
    token path (``get_rows`` of the embeddings) is the one taken."""
    tokens = g.inp(g.I32, s.n_tokens)
    embd = g.inp(g.F32, s.dims.n_embd, s.n_tokens)
    inp_l = g.get_rows(g.external(WEIGHT, s.dims.n_embd, s.dims.n_vocab), tokens)
    gf.expand(inp_l)
    gf.expand(embd)
    return inp_l


def kv_inputs(s: GraphSpec, n_kv: int, layers: list[FullAttention]) -> KvInputs:
    """One cache's inputs: K/V row indices, the mask (f16 with flash attention), and the Hadamard
    matrices of a quantized cache whose ``layers`` share one head width (``attn_rot_k``/``_v``)."""
    ctx, n = s.ctx, s.n_tokens
    fa = ctx.flash_attn
    streams = 1 if ctx.kv_unified else n_seqs_of(ctx)
    hd_k = {x.head_dim_k for x in layers}
    hd_v = {x.head_dim_v for x in layers}
    k_rot = v_rot = None
    if s.type_k.is_quantized and len(hd_k) == 1 and min(hd_k) % 64 == 0:
        k_rot = g.inp(g.F32, nrot(min(hd_k)), nrot(min(hd_k)))
    if s.type_v.is_quantized and len(hd_v) == 1 and min(hd_v) % 64 == 0:
        v_rot = g.inp(g.F32, 64, 64)
    return KvInputs(
        n_kv=n_kv,
        k_idxs=g.inp(g.I64, n),
        v_idxs=g.inp(g.I64, n if fa else n * s.v_gqa_max),
        mask=g.inp(g.F16 if fa else g.F32, n_kv, n // streams, 1, streams),
        k_rot=k_rot,
        v_rot=v_rot,
    )


def nrot(head_dim: int) -> int:
    """``build_input_k_rot``: the largest power of two from 64 up that divides the head width."""
    n = 64
    while True:
        n *= 2
        if head_dim % n:
            return n // 2


def hadamard(cur: g.Tensor, rot: g.Tensor) -> g.Tensor:
    """``llama_mul_mat_hadamard``: rows of ``rot``'s width, multiplied, shaped back."""
    n = rot.ne[0]
    contiguous = cur.nb == g.strides(cur.size, cur.ne)
    rows = (
        g.reshape(cur, n, cur.nelements // n) if contiguous else g.cont(cur, n, cur.nelements // n)
    )
    return g.reshape(g.mul_mat(rot, rows), *cur.ne)


def norm(x: g.Tensor, width: int) -> g.Tensor:
    """``build_norm`` RMS with a weight: ``rms_norm`` then ``mul``, both in place."""
    return g.dup(g.dup(x, "rms_norm"), "mul", g.external(g.F32, width))


def qkv(s: GraphSpec, cur: g.Tensor, layer: FullAttention) -> tuple[g.Tensor, g.Tensor, g.Tensor]:
    """``build_qkv`` with separate projections (and Q/K/V biases where the file has them),
    reshaped to heads."""
    n_head, hd, hv, kvh = (
        s.model.num_attention_heads,
        layer.head_dim_k,
        layer.head_dim_v,
        layer.num_kv_heads,
    )
    n_embd = s.dims.n_embd
    q = g.mul_mat(g.external(WEIGHT, n_embd, n_head * hd), cur)
    if s.dims.qkv_bias:
        q = g.dup(q, "add", g.external(g.F32, n_head * hd))
    k = g.mul_mat(g.external(WEIGHT, n_embd, kvh * hd), cur)
    if s.dims.qkv_bias:
        k = g.dup(k, "add", g.external(g.F32, kvh * hd))
    v = g.mul_mat(g.external(WEIGHT, n_embd, kvh * hv), cur)
    if s.dims.qkv_bias:
        v = g.dup(v, "add", g.external(g.F32, kvh * hv))
    return (
        g.reshape(q, hd, n_head, s.n_tokens),
        g.reshape(k, hd, kvh, s.n_tokens),
        g.reshape(v, hv, kvh, s.n_tokens),
    )


def gated_ffn(s: GraphSpec, cur: g.Tensor) -> g.Tensor:
    """``build_ffn`` with a parallel gate (SiLU or GELU: the same shapes): up, gate, glu, down."""
    n_embd, n_ff = s.dims.n_embd, s.dims.n_ff
    up = g.mul_mat(g.external(WEIGHT, n_embd, n_ff), cur)
    gate = g.mul_mat(g.external(WEIGHT, n_embd, n_ff), cur)
    return g.mul_mat(g.external(WEIGHT, n_ff, n_embd), g.glu_split(gate, up))


def logits(gf: g.Graph, s: GraphSpec, t_embd: g.Tensor, *, softcap: bool = False) -> g.Graph:
    """The output norm's result and ``lm_head``'s logits: the graph's two outputs. ``softcap``:
    final logit soft-capping (``scale``, ``tanh``, ``scale``) after ``lm_head``."""
    t_embd.is_output = True
    logits = g.mul_mat(g.external(WEIGHT, s.dims.n_embd, s.dims.n_vocab), t_embd)
    if softcap:
        logits = g.dup(g.dup(g.dup(logits, "scale"), "unary"), "scale")
    logits.is_output = True
    gf.expand(logits)
    return gf


def attn(
    gf: g.Graph,
    s: GraphSpec,
    layer: FullAttention,
    q: g.Tensor,
    k: g.Tensor,
    v: g.Tensor,
    cache: KvInputs,
    *,
    iswa: bool = False,
    soft_cap: bool = False,
    sinks: bool = False,
) -> g.Tensor:
    """``build_attn`` with a KV cache, up to (not including) the output projection: rotate, store
    K and V, attend over the cache's ``n_kv`` cells. ``iswa``: the ``llm_graph_input_attn_kv_iswa``
    variant, which expands Q, K, V in that order (the one-cache variant expands Q, V, K);
    ``soft_cap``: ``attn_soft_cap`` (three in-place ops on KQ without flash attention);
    ``sinks``: one learned sink logit per head (gpt-oss), a source of the softmax or of
    ``flash_attn_ext``."""
    if cache.k_rot is not None:
        q, k = hadamard(q, cache.k_rot), hadamard(k, cache.k_rot)
    if cache.v_rot is not None:
        v = hadamard(v, cache.v_rot)
    for t in (q, k, v) if iswa else (q, v, k):
        gf.expand(t)
    sink = g.external(g.F32, s.model.num_attention_heads) if sinks else None
    cur = _store_and_attend(gf, s, layer, q, k, v, cache, soft_cap, sink)
    if cache.v_rot is not None:
        cur = hadamard(cur, cache.v_rot)
    return cur


def _store_and_attend(
    gf: g.Graph,
    s: GraphSpec,
    layer: FullAttention,
    q: g.Tensor,
    k: g.Tensor,
    v: g.Tensor,
    cache: KvInputs,
    soft_cap: bool,
    sinks: g.Tensor | None,
) -> g.Tensor:
    ctx, n_tokens, v_gqa_max = s.ctx, s.n_tokens, s.v_gqa_max
    fa, n_kv, ns = ctx.flash_attn, cache.n_kv, ctx.n_stream
    hd, hv, n_kv_head = layer.head_dim_k, layer.head_dim_v, layer.num_kv_heads
    # the cache's views are never allocated here: a block type's element size does not matter
    ks, vs = (1 if t.block_values > 1 else t.row_bytes(1) for t in (s.type_k, s.type_v))
    k_cache = g.external(ks, n_kv_head * hd, n_kv, ns)
    v_cache = g.external(vs, v_gqa_max if not fa else n_kv_head * hv, n_kv, ns)
    kc = k_cache if ns == 1 else g.reshape(k_cache, n_kv_head * hd, n_kv * ns)
    gf.expand(g.set_rows(kc, g.view(k, n_kv_head * hd, n_tokens, nb=(k.nb[2],)), cache.k_idxs))
    if fa:
        vc = v_cache if ns == 1 else g.reshape(v_cache, n_kv_head * hv, n_kv * ns)
        gf.expand(g.set_rows(vc, g.view(v, n_kv_head * hv, n_tokens, nb=(v.nb[2],)), cache.v_idxs))
    else:
        v_cur = g.reshape(v, n_kv_head * hv, n_tokens)  # V rows are contiguous: dims merge
        if n_kv_head * hv < v_gqa_max:
            v_cur = g.new(v_cur.size, v_gqa_max, n_tokens, op="pad", src=(v_cur,))
        v_view = g.reshape(v_cache, 1, v_cache.nelements)
        gf.expand(g.set_rows(v_view, g.reshape(v_cur, 1, v_cur.nelements), cache.v_idxs))
    k_view = g.view(k_cache, hd, n_kv_head, n_kv, ns, nb=(ks * hd, ks * n_kv_head * hd,
                    ks * n_kv_head * hd * n_kv))  # fmt: skip
    if fa:
        v_view4 = g.view(v_cache, hv, n_kv_head, n_kv, ns, nb=(vs * hv, vs * n_kv_head * hv,
                         vs * n_kv_head * hv * n_kv))  # fmt: skip
    else:
        v_view4 = g.view(v_cache, n_kv, n_kv_head, hv, ns, nb=(vs * n_kv * hv, vs * n_kv,
                         vs * n_kv * v_gqa_max))  # fmt: skip
    qs = g.view(
        q, q.ne[0], q.ne[1], q.ne[2] // ns, ns, nb=(q.nb[1], q.nb[2], q.nb[2] * (q.ne[2] // ns))
    )
    qp = g.permute(qs, 0, 2, 1, 3)
    kp = g.permute(k_view, 0, 2, 1, 3)
    vp = g.permute(v_view4, 0, 2, 1, 3)
    if fa:
        out = g.flash_attn_ext(qp, kp, vp, cache.mask)
        if sinks is not None:  # ggml_flash_attn_ext_add_sinks
            out.src = (*out.src, sinks)
        cur = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
    else:
        kq = g.mul_mat(kp, qp)
        if soft_cap:  # scale, tanh, scale
            kq = g.dup(g.dup(g.dup(kq, "scale"), "unary"), "scale")
        kq = g.dup(kq, "soft_max", cache.mask, sinks)  # ggml_soft_max_add_sinks: src[2]
        kqv = g.mul_mat(vp, kq)
        cur = g.permute(kqv, 0, 2, 1, 3)
        cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    gf.expand(cur)
    return cur
