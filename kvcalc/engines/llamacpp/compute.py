"""llama.cpp's compute buffer: the worst-case graph ``sched_reserve`` allocates, on the CPU backend.

``llama_context::sched_reserve`` (llama.cpp ``0c1e570``) builds the model's graph for a
prompt-processing ubatch (``n_tokens = min(n_ctx, n_ubatch)``, rounded up to a multiple of
``n_seq_max`` by ``graph_reserve``; ``min(n_tokens, n_outputs_max = n_batch)`` outputs, of the
``n_tokens`` before that rounding), then for a one-token-per-sequence
ubatch, and reserves each with ggml's graph allocator; the buffer only grows, so its size is the
larger of the two. Both graphs are rebuilt here tensor by tensor as the architecture's graph code
writes them (``src/models/llama.cpp``, ``llm_graph_context::build_attn``/``build_attn_mha``/
``build_ffn``/``build_norm``, ``llama_kv_cache::cpy_k``/``cpy_v``/``get_k``/``get_v``), with the
full cache in view (``init_full``: ``n_kv`` = the cache's cells, every stream), and sized by
:mod:`kvcalc.engines.llamacpp.ggml`. Each architecture's graph is a
:class:`~kvcalc.engines.llamacpp.graph.Builder` in ``BUILDERS`` (the ``llama`` one below), made of
the shared blocks of :mod:`kvcalc.engines.llamacpp.graph`.

Confirmed against llama.cpp's own ``CPU compute buffer size`` line by ``kvcalc verify --engine
llamacpp --run``. **Not confirmed**: GPU backends. CUDA reorders the graph
(``graph_optimize``), keeps inputs in a host buffer and may choose other kernels, so its
``CUDA0 compute buffer size`` differs; kvcalc uses this figure for GPU plans as an estimate and
says so. Only the architectures and options below are modelled; anything else returns ``None``
(the plan then says the compute buffer is not modelled):

- ``llama`` (Llama, Mistral), ``qwen2``, ``qwen3`` (Q/K norms): dense gated MLPs, separate Q/K/V
  projections with or without biases, no other biases, one cache (full-attention layers only);
- their MoE graphs: ``llama`` with experts (Mixtral), ``qwen3moe``, ``qwen2moe`` (its gated shared
  expert) — the FFN blocks of :mod:`kvcalc.engines.llamacpp.graph_moe`;
- ``deepseek2`` (:mod:`kvcalc.engines.llamacpp.graph_mla`): MLA over a K-only cache (the split
  ``attn_k_b``/``attn_v_b``), leading dense layers, routed and shared experts;
- ``gemma2``, ``gemma3``, ``gpt-oss`` (its sinks, biases and experts) in
  :mod:`kvcalc.engines.llamacpp.graph_swa`: two caches (``llama_kv_cache_iswa``, ``swa_full`` on
  or off), or one for a Gemma-3 file without ``sliding_window``;
- ``mamba2`` (:mod:`kvcalc.engines.llamacpp.graph_ssm`): Mamba-2 layers alone, from a GGUF file
  (a ``config.json``'s vocabulary is padded by the converter: not modelled) — the recurrent
  state's gathers and copies, ``ssm_conv``, ``ssm_scan`` with its packed ``y`` and states, the
  grouped RMS norm; and ``granitehybrid`` with a dense MLP (Granite-4.0-H: those layers beside
  Llama's attention over one cache, RoPE on or off) and ``nemotron_h`` with MLP layers
  (attention without RoPE, squared-ReLU MLPs);
- every cache type; quantized ones with llama.cpp's Hadamard rotations of Q/K and V
  (``attn_rot_k``/``attn_rot_v``, unless ``LLAMA_ATTN_ROT_DISABLE`` is set, which kvcalc ignores);
- flash attention on or off, any ``n_seq_max``/unified.
"""

from __future__ import annotations

from kvcalc.engines.llamacpp import ggml as g
from kvcalc.engines.llamacpp import graph_mla as mla
from kvcalc.engines.llamacpp import graph_ssm as ssm
from kvcalc.engines.llamacpp import graph_swa as swa
from kvcalc.engines.llamacpp.graph import (
    WEIGHT,
    Builder,
    ComputeInputs,
    GraphSpec,
    attn,
    embed,
    kv_inputs,
    logits,
    n_seqs_of,
    norm,
    qkv,
)
from kvcalc.engines.llamacpp.graph_moe import ffn_block, why_not_ffn
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import FullAttention, LayerKind
from kvcalc.model.shape import ModelShape

__all__ = ["GRAPH_ARCHS", "ComputeBuffer", "ComputeInputs", "compute_buffer", "dims_for", "n_seqs_of",
           "why_not"]  # fmt: skip

_HF_ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
            "mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", **swa.HF_ARCH, **mla.HF_ARCH}  # fmt: skip


@frozen
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
    if arch == "deepseek2":
        return mla.dims_from_config(model)
    attn_w, mlp, moe = (getattr(w, name, None) for name in ("attention", "mlp", "moe"))
    if arch is None or attn_w is None or (mlp is None) == (moe is None):
        return None
    extra = tuple(name for name, present in (("attn_output.bias", attn_w.o_bias),
                                             ("ffn biases", mlp is not None and mlp.bias),
                                             ("ungated MLP", mlp is not None and not mlp.gated),
                                             ("dense layers among the expert layers",
                                              moe is not None and set(w.ffns) != {"moe"}))
                  if present)  # fmt: skip
    if mlp is not None:
        return GraphDims(arch=arch, n_embd=w.hidden_size, n_ff=mlp.intermediate_size,
                         n_vocab=w.vocab_size, qkv_bias=attn_w.qkv_bias, unmodelled_tensors=extra)  # fmt: skip
    assert moe is not None
    # as convert_hf_to_gguf.py writes them: feed_forward_length the config's intermediate_size
    return GraphDims(arch=arch, n_embd=w.hidden_size, n_ff=w.intermediate_size, n_vocab=w.vocab_size,
                     n_expert=moe.num_experts, n_expert_used=moe.experts_per_token,
                     n_ff_exp=moe.expert_intermediate_size, n_ff_shexp=moe.shared_intermediate_size,
                     shared_expert=moe.shared_intermediate_size > 0, qkv_bias=attn_w.qkv_bias,
                     unmodelled_tensors=extra)  # fmt: skip


def why_not(model: ModelShape, type_k: CacheDtype, type_v: CacheDtype) -> str | None:
    """Why the compute buffer is not modelled for this model and cache, or ``None``."""
    dims = dims_for(model)
    if dims is None or dims.arch not in BUILDERS:
        arch = dims.arch if dims else model.model_type
        return f"the {arch} graph is not modelled (modelled: {', '.join(GRAPH_ARCHS)})"
    moe_problem = why_not_ffn(dims)
    if moe_problem is not None:
        return moe_problem
    builder = BUILDERS[dims.arch]
    unmodelled = [x for x in dims.unmodelled_tensors if x not in builder.handles]
    if unmodelled:
        return f"the graph nodes of {', '.join(unmodelled)} are not modelled"
    if (type_k.is_quantized or type_v.is_quantized) and len(
        {x.head_dim_k for x in model.layers if isinstance(x, FullAttention)}
    ) > 1:
        return "quantized caches of layers with different head widths are not modelled"
    return builder.refuse(model, dims)


def compute_buffer(
    model: ModelShape, ctx: ComputeInputs, type_k: CacheDtype, type_v: CacheDtype
) -> ComputeBuffer | None:
    """The CPU compute buffer llama.cpp reserves, or ``None`` where :func:`why_not` says why."""
    if why_not(model, type_k, type_v) is not None:
        return None
    dims = dims_for(model)
    assert dims is not None
    build = BUILDERS[dims.arch].build
    n_seqs = ctx.n_seq_max
    n_tokens = -(-ctx.n_ubatch // n_seqs) * n_seqs

    def size(tokens: int, outputs: int) -> int:
        return g.buffer_size(build(GraphSpec(model=model, dims=dims, ctx=ctx, type_k=type_k,
                                             type_v=type_v, n_tokens=tokens, n_outputs=outputs)))  # fmt: skip

    # the outputs: min(n_tokens, n_outputs_max) with n_tokens before its rounding to n_seq_max
    pp = size(n_tokens, min(ctx.n_ubatch, ctx.n_batch))
    tg = size(n_seqs, n_seqs)
    return ComputeBuffer(bytes=max(pp, tg), pp_bytes=pp, tg_bytes=tg, n_tokens=n_tokens,
                         arch=dims.arch)  # fmt: skip


def _refuse_llama(model: ModelShape, dims: GraphDims) -> str | None:
    if any(not isinstance(x, FullAttention) or x.kind is not LayerKind.FULL for x in model.layers):
        return "only models with full-attention layers alone are modelled"
    return None


def _llama(s: GraphSpec) -> g.Graph:
    """``src/models/llama.cpp`` (and qwen2, qwen3 with its Q/K norms, their MoE graphs
    ``qwen2moe.cpp``, ``qwen3moe.cpp``): one cache."""
    gf = g.Graph()
    n_embd, n_tokens = s.dims.n_embd, s.n_tokens
    layers = s.layers
    inp_l = embed(gf, s)
    pos = g.inp(g.I32, n_tokens)
    cache = kv_inputs(s, s.ctx.kv_size, layers)
    out_ids = g.inp(g.I32, s.n_outputs)
    for il, layer in enumerate(layers):
        inp_sa = inp_l
        q, k, v = qkv(s, norm(inp_l, n_embd), layer)
        if s.dims.arch in ("qwen3", "qwen3moe"):
            q, k = norm(q, layer.head_dim_k), norm(k, layer.head_dim_k)
        q, k = g.dup(q, "rope", pos), g.dup(k, "rope", pos)
        cur = attn(gf, s, layer, q, k, v, cache)
        cur = g.mul_mat(
            g.external(WEIGHT, s.model.num_attention_heads * layer.head_dim_v, n_embd), cur
        )
        if il == len(layers) - 1:
            cur = g.get_rows(cur, out_ids)
            inp_sa = g.get_rows(inp_sa, out_ids)
        ffn_inp = g.dup(cur, "add", inp_sa)
        inp_l = g.dup(ffn_block(gf, norm(ffn_inp, n_embd), s.dims), "add", ffn_inp)
    return logits(gf, s, norm(inp_l, n_embd))


_LLAMA = Builder(build=_llama, refuse=_refuse_llama)
#: every architecture whose graph is rebuilt, and its builder
BUILDERS: dict[str, Builder] = {"llama": _LLAMA, "qwen2": _LLAMA, "qwen3": _LLAMA, "qwen2moe": _LLAMA,
                                "qwen3moe": _LLAMA, **swa.BUILDERS, **mla.BUILDERS, **ssm.BUILDERS}  # fmt: skip
#: llama.cpp architectures whose graph is rebuilt here
GRAPH_ARCHS = tuple(BUILDERS)
