"""The pure Mamba-2 graph of llama.cpp ``0c1e570`` (``src/models/mamba.cpp`` with
``llm_build_mamba_base::build_mamba2_layer`` in ``mamba-base.cpp``), rebuilt for
:mod:`kvcalc.engines.llamacpp.compute`.

The recurrent memory is reserved in full (``llama_memory_recurrent::init_full``): ``n_rs`` = its
size (one cell per sequence), head 0, ``rs_z`` 0; the ubatch holds ``n_seq_max`` sequences of
``n_tokens / n_seq_max`` tokens each, and ``n_rs_seq = 0`` (no rollback snapshots: ``K`` = 1).
What the graph holds:

- ``build_rs_inp``: one I32 ``s_copy`` of ``n_rs`` rows, viewed as the main and the (empty) extra
  copies;
- per layer, ``build_rs`` twice (the conv state R, then the SSM state S): a zeroed state
  (``ggml_scale_inplace``, a view of the cache), the main rows (``get_rows`` for R, ``ssm_scan``
  for S) and the extra rows copied back (zero of them);
- ``ssm_in``, the conv state concatenated with the transposed ``xBC`` (``ggml_concat``), its last
  ``d_conv − 1`` columns copied into the cache, ``ggml_ssm_conv`` (``{conv_dim, n_seq_tokens,
  n_seqs}``), its bias and SiLU (both in place), ``dt`` made contiguous plus its bias;
- ``ggml_ssm_scan``: one F32 vector of ``y`` (``nelements(x)``) followed by the new states
  (``d_state · head_dim · n_head · n_seqs``), the states copied into the cache, ``y + x·D``,
  ``swiglu_split(cont(z), y)``, the grouped RMS norm (``ssm_norm``) and ``ssm_out``;
- the residual, and the last layer's rows picked by ``out_ids`` before it, as in Llama.

The recurrent state's tensors are F32 (``type_r``/``type_s``), whatever the cache types.

``granitehybrid`` (``src/models/granite-hybrid.cpp``) with a dense MLP: ``build_inp_mem_hybrid``
(``s_copy`` and one cache's attention inputs), each layer a Mamba-2 block as above or Llama's
attention (RoPE unless the file sets ``rope.scaling.finetuned`` false: then no positions input),
then its residual, ``ffn_norm``, the gated SiLU MLP and its residual. Granite's embedding,
residual and logit scales (``ggml_scale``) work in place on tensors with one consumer and change
no size; they are not rebuilt (the checked files set none of them). Its expert layers are refused.

``nemotron_h`` (``src/models/nemotron-h.cpp``) with MLP layers: Mamba-2 blocks, attention without
RoPE and ungated squared-ReLU MLPs (:func:`_nemotron_h`); expert layers are refused.
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
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import FullAttention, LayerKind, NoCache
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.model.shape import ModelShape


def _refuse(model: ModelShape, dims: GraphDims) -> str | None:
    layers = model.layers
    if not layers or not all(isinstance(x, Mamba2State) for x in layers) or len(set(layers)) > 1:
        return "only Mamba-2 layers of one shape are modelled for mamba2"
    return None


def _cpy(a: g.Tensor, b: g.Tensor) -> g.Tensor:
    """``ggml_cpy``: a view of the destination ``b`` with sources ``a``, ``b``."""
    t = g.view_tensor(b, "cpy")
    t.src = (a, b)
    return t


def _zero(gf: g.Graph, states: g.Tensor) -> None:
    """``build_rs``'s zeroed state (``rs_z`` 0: one row, scaled in place)."""
    gf.expand(g.view_tensor(g.view(states, states.ne[0]), "scale"))


def _copy_extra(gf: g.Graph, states: g.Tensor, s: g.Tensor, extra_ids: g.Tensor) -> None:
    """``build_rs``'s extra rows (``n_rs − n_seqs``: none in the reserve graphs), copied back."""
    extra = g.get_rows(states, extra_ids)
    gf.expand(_cpy(extra, g.view(s, s.ne[0], extra_ids.ne[0], nb=(s.nb[1],))))


def _mamba2_layer(
    gf: g.Graph, s: GraphSpec, layer: Mamba2State, cur: g.Tensor, ids: tuple[g.Tensor, g.Tensor]
) -> g.Tensor:
    n_seqs = s.ctx.n_seq_max
    mem_size = max(1, s.ctx.n_seq_max)
    n_seq_tokens = s.n_tokens // n_seqs
    d_conv, d_inner, d_state = layer.conv_kernel, layer.intermediate_size, layer.state_size
    n_head, n_group = layer.num_heads, layer.n_groups
    head_dim = d_inner // n_head
    conv_dim = d_inner + 2 * n_group * d_state
    n_embd_r, n_embd_s = (d_conv - 1) * conv_dim, d_state * d_inner
    main, extra = ids
    r_all = g.external(g.F32, n_embd_r, mem_size)
    s_all = g.external(g.F32, n_embd_s, mem_size)

    # build_rs for the conv state
    r_states = g.reshape(r_all, n_embd_r, mem_size)
    _zero(gf, r_states)
    conv = g.get_rows(r_states, main)
    gf.expand(conv)
    _copy_extra(gf, r_states, r_all, extra)
    conv = g.reshape(conv, d_conv - 1, conv_dim, n_seqs)

    d_in_proj = 2 * d_inner + 2 * n_group * d_state + n_head
    zxbcdt = g.mul_mat(g.external(WEIGHT, s.dims.n_embd, d_in_proj), cur)
    zxbcdt = g.reshape(zxbcdt, d_in_proj, n_seq_tokens, n_seqs)
    nb1, nb2 = zxbcdt.nb[1], zxbcdt.nb[2]
    z = g.view(zxbcdt, head_dim, n_head, n_seq_tokens, n_seqs, nb=(head_dim * 4, nb1, nb2))
    xbc = g.view(zxbcdt, conv_dim, n_seq_tokens, n_seqs, nb=(nb1, nb2))
    dt = g.view(zxbcdt, n_head, n_seq_tokens, n_seqs, nb=(nb1, nb2))

    xbc_t = g.transpose(xbc)
    conv_x = g.new(g.F32, d_conv - 1 + n_seq_tokens, conv_dim, n_seqs, op="concat",
                   src=(conv, xbc_t))  # fmt: skip
    last_conv = g.view(conv_x, d_conv - 1, conv_dim, n_seqs, nb=(conv_x.nb[1], conv_x.nb[2]))
    gf.expand(_cpy(last_conv, g.view(r_all, n_embd_r, n_seqs, nb=(r_all.nb[1],))))
    xbc = g.new(g.F32, conv_dim, n_seq_tokens, n_seqs, op="ssm_conv",
                src=(conv_x, g.external(g.F32, d_conv, conv_dim)))  # fmt: skip
    xbc = g.dup(xbc, "add", g.external(g.F32, conv_dim))
    xbc = g.dup(xbc, "unary")  # silu

    xnb1, xnb2 = xbc.nb[1], xbc.nb[2]
    x = g.view(xbc, head_dim, n_head, n_seq_tokens, n_seqs, nb=(head_dim * 4, xnb1, xnb2))
    b = g.view(xbc, d_state, n_group, n_seq_tokens, n_seqs, nb=(d_state * 4, xnb1, xnb2))
    c = g.view(xbc, d_state, n_group, n_seq_tokens, n_seqs, nb=(d_state * 4, xnb1, xnb2))
    dt = g.dup(g.cont(dt), "add", g.external(g.F32, n_head))
    a = g.external(g.F32, 1, n_head)

    # build_rs for the SSM state, its rows read by ssm_scan
    s_states = g.reshape(s_all, n_embd_s, mem_size)
    _zero(gf, s_states)
    ssm = g.reshape(s_states, d_state, head_dim, n_head, mem_size)
    y_ssm = g.new(g.F32, x.nelements + d_state * head_dim * n_head * n_seqs, op="ssm_scan",
                  src=(ssm, x, dt, a, b, c, main))  # fmt: skip
    gf.expand(y_ssm)
    _copy_extra(gf, s_states, s_all, extra)
    d = d_state * d_inner
    new_states = g.view(y_ssm, d, n_seqs, 1, nb=(d * 4, d * 4 * n_seqs))
    gf.expand(
        _cpy(new_states, g.view(s_all, d, n_seqs, 1, nb=(s_all.nb[1], s_all.nb[1] * mem_size)))
    )

    y = g.view(y_ssm, head_dim, n_head, n_seq_tokens, n_seqs)
    y = g.dup(y, "add", g.dup(x, "mul", g.external(g.F32, 1, n_head)))
    y = g.glu_split(g.cont(z), y)
    y = g.reshape(y, d_inner // n_group, n_group, n_seq_tokens, n_seqs)
    y = norm(y, d_inner // n_group)
    y = g.reshape(y, d_inner, n_seq_tokens * n_seqs)
    return g.mul_mat(g.external(WEIGHT, d_inner, s.dims.n_embd), y)


def _rs_inputs(s: GraphSpec) -> tuple[g.Tensor, g.Tensor]:
    """``build_rs_inp``: one I32 ``s_copy`` of ``n_rs`` rows, viewed as the main and the extra ids."""
    n_rs, n_seqs = max(1, s.ctx.n_seq_max), s.ctx.n_seq_max
    s_copy = g.inp(g.I32, n_rs)
    return g.view(s_copy, n_seqs), g.view(s_copy, n_rs - n_seqs)


def _mamba2(s: GraphSpec) -> g.Graph:
    gf = g.Graph()
    n_embd = s.dims.n_embd
    inp_l = embed(gf, s)
    ids = _rs_inputs(s)
    out_ids = g.inp(g.I32, s.n_outputs)
    layers = s.model.layers
    for il, layer in enumerate(layers):
        assert isinstance(layer, Mamba2State)
        cur = _mamba2_layer(gf, s, layer, norm(inp_l, n_embd), ids)
        if il == len(layers) - 1:
            cur = g.get_rows(cur, out_ids)
            inp_l = g.get_rows(inp_l, out_ids)
        inp_l = g.dup(cur, "add", inp_l)
    return logits(gf, s, norm(inp_l, n_embd))


def _refuse_granite(model: ModelShape, dims: GraphDims) -> str | None:
    mamba = [x for x in model.layers if isinstance(x, Mamba2State)]
    attention = [x for x in model.layers if isinstance(x, FullAttention)]
    if len(mamba) + len(attention) != len(model.layers) or len(set(mamba)) > 1:
        return "only Mamba-2 layers of one shape beside full-attention layers are modelled for granitehybrid"
    if any(x.kind is not LayerKind.FULL for x in attention):
        return "only full-attention layers beside the Mamba-2 ones are modelled for granitehybrid"
    if dims.n_expert or not dims.n_ff:
        return "granitehybrid's expert layers are not modelled (only its dense MLP)"
    return None


def _granite(s: GraphSpec) -> g.Graph:
    """``src/models/granite-hybrid.cpp`` with its dense MLP: a Mamba-2 or an attention layer (RoPE,
    one cache: ``build_inp_mem_hybrid``), then the gated SiLU MLP, each with its residual."""
    gf = g.Graph()
    n_embd = s.dims.n_embd
    inp_l = embed(gf, s)
    ids = _rs_inputs(s)
    cache = kv_inputs(s, s.ctx.kv_size, s.layers)
    out_ids = g.inp(g.I32, s.n_outputs)
    pos = g.inp(g.I32, s.n_tokens) if s.dims.rope else None
    layers = s.model.layers
    for il, layer in enumerate(layers):
        inp_sa = inp_l
        cur = norm(inp_l, n_embd)
        if isinstance(layer, Mamba2State):
            cur = _mamba2_layer(gf, s, layer, cur, ids)
        else:
            assert isinstance(layer, FullAttention)
            q, k, v = qkv(s, cur, layer)
            if pos is not None:
                q, k = g.dup(q, "rope", pos), g.dup(k, "rope", pos)
            cur = attn(gf, s, layer, q, k, v, cache)
            heads = s.model.num_attention_heads * layer.head_dim_v
            cur = g.mul_mat(g.external(WEIGHT, heads, n_embd), cur)
        if il == len(layers) - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup(cur, "add", inp_sa)
        inp_l = g.dup(gated_ffn(s, norm(ffn_inp, n_embd)), "add", ffn_inp)
    return logits(gf, s, norm(inp_l, n_embd))


def _refuse_nemotron(model: ModelShape, dims: GraphDims) -> str | None:
    layers = model.layers
    mamba = [x for x in layers if isinstance(x, Mamba2State)]
    kinds_ok = all(isinstance(x, (Mamba2State, NoCache)) or
                   (isinstance(x, FullAttention) and x.kind is LayerKind.FULL) for x in layers)  # fmt: skip
    if not kinds_ok or len(set(mamba)) > 1:
        return "only Mamba-2, full-attention and MLP layers are modelled for nemotron_h"
    if dims.n_expert or (any(isinstance(x, NoCache) for x in layers) and not dims.n_ff):
        return "nemotron_h's expert layers are not modelled (only its MLP layers)"
    return None


def _nemotron_h(s: GraphSpec) -> g.Graph:
    """``src/models/nemotron-h.cpp`` with MLP layers: each layer a Mamba-2 block, attention
    without RoPE over one cache, or an ungated squared-ReLU MLP (``build_ffn`` ``RELU_SQR``), with
    its residual. ``embeddings_nextn_masked`` false (the default): the last layer runs on every
    token, the output norm (``t_h_nextn``) is a graph output and the output rows are picked after
    it."""
    gf = g.Graph()
    n_embd, n_ff = s.dims.n_embd, s.dims.n_ff
    inp_l = embed(gf, s)
    ids = _rs_inputs(s)
    cache = kv_inputs(s, s.ctx.kv_size, s.layers)
    out_ids = g.inp(g.I32, s.n_outputs)
    for layer in s.model.layers:
        cur = norm(inp_l, n_embd)
        if isinstance(layer, Mamba2State):
            cur = _mamba2_layer(gf, s, layer, cur, ids)
        elif isinstance(layer, FullAttention):
            q, k, v = qkv(s, cur, layer)
            cur = attn(gf, s, layer, q, k, v, cache)
            heads = s.model.num_attention_heads * layer.head_dim_v
            cur = g.mul_mat(g.external(WEIGHT, heads, n_embd), cur)
        else:
            up = g.mul_mat(g.external(WEIGHT, n_embd, n_ff), cur)
            cur = g.mul_mat(g.external(WEIGHT, n_ff, n_embd), g.dup(g.dup(up, "unary"), "sqr"))
        inp_l = g.dup(cur, "add", inp_l)
    h_nextn = norm(inp_l, n_embd)
    h_nextn.is_output = True
    return logits(gf, s, g.get_rows(h_nextn, out_ids))


#: the architectures rebuilt here and their builder
BUILDERS = {"mamba2": Builder(build=_mamba2, refuse=_refuse),
            "granitehybrid": Builder(build=_granite, refuse=_refuse_granite),
            "nemotron_h": Builder(build=_nemotron_h, refuse=_refuse_nemotron)}  # fmt: skip
