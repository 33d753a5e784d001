"""llama.cpp's compute buffer: the worst-case graph ``sched_reserve`` allocates, on the CPU backend.

``llama_context::sched_reserve`` (llama.cpp ``0c1e570``) builds the model's graph for a
prompt-processing ubatch (``n_tokens = min(n_ctx, n_ubatch)``, rounded up to a multiple of
``n_seq_max``; ``min(n_tokens, n_outputs_max = n_batch)`` outputs), then for a one-token-per-sequence
ubatch, and reserves each with ggml's graph allocator; the buffer only grows, so its size is the
larger of the two. Both graphs are rebuilt here tensor by tensor as the architecture's graph code
writes them (``src/models/llama.cpp``, ``llm_graph_context::build_attn``/``build_attn_mha``/
``build_ffn``/``build_norm``, ``llama_kv_cache::cpy_k``/``cpy_v``/``get_k``/``get_v``), with the
full cache in view (``init_full``: ``n_kv`` = the cache's cells, every stream), and sized by
:mod:`kvcalc.engines.llamacpp_ggml`.

Confirmed against llama.cpp's own ``CPU compute buffer size`` line by ``kvcalc verify --engine
llamacpp --run``. **Not confirmed**: GPU backends. CUDA reorders the graph
(``graph_optimize``), keeps inputs in a host buffer and may choose other kernels, so its
``CUDA0 compute buffer size`` differs; kvcalc uses this figure for GPU plans as an estimate and
says so. Only the architectures and options below are modelled; anything else returns ``None``
(the plan then says the compute buffer is not modelled):

- ``llama`` (Llama, Mistral), ``qwen2``, ``qwen3`` (Q/K norms): dense gated MLPs, separate Q/K/V
  projections with or without biases, no other biases;
- every cache type; quantized ones with llama.cpp's Hadamard rotations of Q/K and V
  (``attn_rot_k``/``attn_rot_v``, unless ``LLAMA_ATTN_ROT_DISABLE`` is set, which kvcalc ignores);
- one cache (no sliding-window layers), flash attention on or off, any ``n_seq_max``/unified.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcalc.engines import llamacpp_ggml as g
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import FullAttention
from kvcalc.model.shape import ModelShape

#: llama.cpp architectures whose graph is rebuilt here
GRAPH_ARCHS = ("llama", "qwen2", "qwen3")
_HF_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}


@dataclass(frozen=True, kw_only=True)
class ComputeInputs:
    """What the graph's sizes depend on (from the context llama.cpp settles on)."""

    n_ubatch: int
    n_batch: int
    n_seq_max: int
    kv_size: int  # cells per stream
    n_stream: int
    kv_unified: bool
    flash_attn: bool


@dataclass(frozen=True, kw_only=True)
class ComputeBuffer:
    bytes: int
    #: the two reserved graphs' sizes: prompt processing (n_tokens) and generation (n_seq_max)
    pp_bytes: int
    tg_bytes: int
    n_tokens: int
    arch: str
    #: what the figure is and how far it is confirmed (set by the engine)
    note: str = ""


def dims_for(model: ModelShape) -> GraphDims | None:
    """The graph widths of a GGUF file, or of a config llama.cpp would convert to ``GRAPH_ARCHS``."""
    if model.graph_dims is not None:
        return model.graph_dims
    w = model.weights
    arch = _HF_ARCH.get(model.model_type)
    attn, mlp = getattr(w, "attention", None), getattr(w, "mlp", None)
    if arch is None or attn is None or mlp is None or getattr(w, "moe", None):
        return None
    extra = tuple(name for name, present in (("attn_output.bias", attn.o_bias), ("ffn biases", mlp.bias),
                                             ("ungated MLP", not mlp.gated)) if present)  # fmt: skip
    return GraphDims(arch=arch, n_embd=w.hidden_size, n_ff=mlp.intermediate_size, n_vocab=w.vocab_size,
                     qkv_bias=attn.qkv_bias, unmodelled_tensors=extra)  # fmt: skip


def why_not(model: ModelShape, type_k: CacheDtype, type_v: CacheDtype) -> str | None:
    """Why the compute buffer is not modelled for this model and cache, or ``None``."""
    dims = dims_for(model)
    if dims is None or dims.arch not in GRAPH_ARCHS:
        arch = dims.arch if dims else model.model_type
        return f"the {arch} graph is not modelled (modelled: {', '.join(GRAPH_ARCHS)})"
    if dims.n_expert:
        return "mixture-of-experts graphs are not modelled"
    if dims.unmodelled_tensors:
        return f"the graph nodes of {', '.join(dims.unmodelled_tensors)} are not modelled"
    if any(not isinstance(x, FullAttention) or x.kind != "full" for x in model.layers):
        return "only models with full-attention layers alone are modelled"
    if (type_k.is_quantized or type_v.is_quantized) and len(
        {x.head_dim_k for x in model.layers}
    ) > 1:
        return "quantized caches of layers with different head widths are not modelled"
    return None


def compute_buffer(
    model: ModelShape, ctx: ComputeInputs, type_k: CacheDtype, type_v: CacheDtype
) -> ComputeBuffer | None:
    """The CPU compute buffer llama.cpp reserves, or ``None`` where :func:`why_not` says why."""
    if why_not(model, type_k, type_v) is not None:
        return None
    dims = dims_for(model)
    assert dims is not None
    n_seqs = ctx.n_seq_max
    n_tokens = -(-ctx.n_ubatch // n_seqs) * n_seqs
    pp = g.buffer_size(
        _graph(model, dims, ctx, type_k, type_v, n_tokens, min(n_tokens, ctx.n_batch))
    )
    tg = g.buffer_size(_graph(model, dims, ctx, type_k, type_v, n_seqs, n_seqs))
    return ComputeBuffer(bytes=max(pp, tg), pp_bytes=pp, tg_bytes=tg, n_tokens=n_tokens,
                         arch=dims.arch)  # fmt: skip


def _graph(
    model: ModelShape,
    dims: GraphDims,
    ctx: ComputeInputs,
    type_k: CacheDtype,
    type_v: CacheDtype,
    n_tokens: int,
    n_outputs: int,
) -> g.Graph:
    gf = g.Graph()
    fa = ctx.flash_attn
    n_embd, n_kv = dims.n_embd, ctx.kv_size
    n_head = model.num_attention_heads
    layers = [x for x in model.layers if isinstance(x, FullAttention)]
    v_gqa_max = max(x.num_kv_heads * x.head_dim_v for x in layers)
    wt = g.F16  # weights: external, their type does not change any compute tensor
    # the cache's views are never allocated here: a block type's element size does not matter
    ks, vs = (1 if t.block_values > 1 else t.row_bytes(1) for t in (type_k, type_v))

    # build_inp_embd: both inputs of ggml_build_forward_select enter the graph
    tokens = g.inp(g.I32, n_tokens)
    embd = g.inp(g.F32, n_embd, n_tokens)
    inp_l = g.get_rows(g.external(wt, n_embd, dims.n_vocab), tokens)
    gf.expand(inp_l)
    gf.expand(embd)
    pos = g.inp(g.I32, n_tokens)
    # build_attn_inp_kv: k/v row indices and the mask (f16 for flash attention)
    k_idxs = g.inp(g.I64, n_tokens)
    v_idxs = g.inp(g.I64, n_tokens if fa else n_tokens * v_gqa_max)
    streams = 1 if ctx.kv_unified else n_seqs_of(ctx)
    mask = g.inp(g.F16 if fa else g.F32, n_kv, n_tokens // streams, 1, streams)
    out_ids = g.inp(g.I32, n_outputs)
    # quantized caches: Hadamard rotations of K (and Q) and of V (build_input_k_rot/v_rot)
    hd0 = layers[0].head_dim_k
    k_rot = g.inp(g.F32, _nrot(hd0), _nrot(hd0)) if type_k.is_quantized and hd0 % 64 == 0 else None
    v_rot = g.inp(g.F32, 64, 64) if type_v.is_quantized and layers[0].head_dim_v % 64 == 0 else None

    for il, layer in enumerate(layers):
        hd, n_kv_head = layer.head_dim_k, layer.num_kv_heads
        inp_sa = inp_l
        cur = _norm(inp_l, n_embd)
        q = g.mul_mat(g.external(wt, n_embd, n_head * hd), cur)
        k = g.mul_mat(g.external(wt, n_embd, n_kv_head * hd), cur)
        v = g.mul_mat(g.external(wt, n_embd, n_kv_head * layer.head_dim_v), cur)
        if dims.qkv_bias:
            q = g.dup(q, "add", g.external(g.F32, n_head * hd))
            k = g.dup(k, "add", g.external(g.F32, n_kv_head * hd))
            v = g.dup(v, "add", g.external(g.F32, n_kv_head * layer.head_dim_v))
        q = g.reshape(q, hd, n_head, n_tokens)
        k = g.reshape(k, hd, n_kv_head, n_tokens)
        v = g.reshape(v, layer.head_dim_v, n_kv_head, n_tokens)
        if dims.arch == "qwen3":
            q = g.dup(g.dup(q, "rms_norm"), "mul", g.external(g.F32, hd))
            k = g.dup(g.dup(k, "rms_norm"), "mul", g.external(g.F32, hd))
        q = g.dup(q, "rope", pos)
        k = g.dup(k, "rope", pos)
        if k_rot is not None:
            q, k = _hadamard(q, k_rot), _hadamard(k, k_rot)
        if v_rot is not None:
            v = _hadamard(v, v_rot)
        cur = _attn(gf, q, k, v, layer, ctx, mask, k_idxs, v_idxs, ks, vs, v_gqa_max, n_tokens)
        if v_rot is not None:
            cur = _hadamard(cur, v_rot)
        cur = g.mul_mat(g.external(wt, n_head * layer.head_dim_v, n_embd), cur)
        if il == len(layers) - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup(cur, "add", inp_sa)
        cur = _norm(ffn_inp, n_embd)
        up = g.mul_mat(g.external(wt, n_embd, dims.n_ff), cur)
        gate = g.mul_mat(g.external(wt, n_embd, dims.n_ff), cur)
        cur = g.mul_mat(g.external(wt, dims.n_ff, n_embd), g.glu_split(gate, up))
        inp_l = g.dup(cur, "add", ffn_inp)

    t_embd = _norm(inp_l, n_embd)
    t_embd.is_output = True
    logits = g.mul_mat(g.external(wt, n_embd, dims.n_vocab), t_embd)
    logits.is_output = True
    gf.expand(logits)
    return gf


def n_seqs_of(ctx: ComputeInputs) -> int:
    """``ubatch.n_seqs_unq`` of the reserve ubatches: every sequence."""
    return ctx.n_seq_max


def _nrot(head_dim: int) -> int:
    """``build_input_k_rot``: the largest power of two from 64 up that divides the head width."""
    nrot = 64
    while True:
        nrot *= 2
        if head_dim % nrot:
            return nrot // 2


def _hadamard(cur: g.Tensor, rot: g.Tensor) -> g.Tensor:
    """``llama_mul_mat_hadamard``: rows of ``rot``'s width, multiplied, shaped back."""
    n = rot.ne[0]
    contiguous = cur.nb == g.strides(cur.size, cur.ne)
    rows = (
        g.reshape(cur, n, cur.nelements // n) if contiguous else g.cont(cur, n, cur.nelements // n)
    )
    return g.reshape(g.mul_mat(rot, rows), *cur.ne)


def _norm(x: g.Tensor, n_embd: int) -> g.Tensor:
    return g.dup(g.dup(x, "rms_norm"), "mul", g.external(g.F32, n_embd))


def _attn(
    gf: g.Graph,
    q: g.Tensor,
    k: g.Tensor,
    v: g.Tensor,
    layer: FullAttention,
    ctx: ComputeInputs,
    mask: g.Tensor,
    k_idxs: g.Tensor,
    v_idxs: g.Tensor,
    ks: int,
    vs: int,
    v_gqa_max: int,
    n_tokens: int,
) -> g.Tensor:
    """``build_attn`` with a KV cache: store K and V, attend over the whole cache."""
    fa, n_kv, ns = ctx.flash_attn, ctx.kv_size, ctx.n_stream
    hd, hv, n_kv_head = layer.head_dim_k, layer.head_dim_v, layer.num_kv_heads
    k_cache = g.external(ks, n_kv_head * hd, n_kv, ns)
    v_cache = g.external(vs, v_gqa_max if not fa else n_kv_head * hv, n_kv, ns)
    for t in (q, v, k):
        gf.expand(t)
    kc = k_cache if ns == 1 else g.reshape(k_cache, n_kv_head * hd, n_kv * ns)
    gf.expand(g.set_rows(kc, g.view(k, n_kv_head * hd, n_tokens, nb=(k.nb[2],)), k_idxs))
    if fa:
        vc = v_cache if ns == 1 else g.reshape(v_cache, n_kv_head * hv, n_kv * ns)
        gf.expand(g.set_rows(vc, g.view(v, n_kv_head * hv, n_tokens, nb=(v.nb[2],)), v_idxs))
    else:
        v_cur = g.reshape(v, n_kv_head * hv, n_tokens)  # V rows are contiguous: dims merge
        if n_kv_head * hv < v_gqa_max:
            v_cur = g.new(v_cur.size, v_gqa_max, n_tokens, op="pad", src=(v_cur,))
        v_view = g.reshape(v_cache, 1, v_cache.nelements)
        gf.expand(g.set_rows(v_view, g.reshape(v_cur, 1, v_cur.nelements), v_idxs))
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
        out = g.flash_attn_ext(qp, kp, vp, mask)
        cur = g.reshape(out, out.ne[0] * out.ne[1], out.ne[2] * out.ne[3])
    else:
        kq = g.mul_mat(kp, qp)
        kq = g.dup(kq, "soft_max", mask)
        kqv = g.mul_mat(vp, kq)
        cur = g.permute(kqv, 0, 2, 1, 3)
        cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
    gf.expand(cur)
    return cur
