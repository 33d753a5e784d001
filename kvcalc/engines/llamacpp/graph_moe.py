"""llama.cpp's feed-forward blocks, dense and mixture-of-experts, rebuilt for the compute buffer.

A transcription of ``llm_graph_context::build_moe_ffn`` and ``build_ffn`` (``src/llama-graph.cpp``,
llama.cpp ``0c1e570``) into :mod:`kvcalc.engines.llamacpp.ggml` tensors, in the order llama.cpp
creates them and expands them into the graph (``build_moe_ffn`` expands the routing weights
early, then the weighted experts, then each expert's view before the adds that sum them):

- the router: logits ``[n_expert, n_tokens]``, the gating (softmax, sigmoid, or softmax over
  the chosen ones), an optional selection bias, group-limited routing (the best groups by their
  two best scores, the others filled with -inf and the chosen rows set back), ``argsort_top_k``, the chosen weights
  (``get_rows``), normalised (``sum_rows``/``clamp``/``div``) and scaled where asked;
- the experts: ``mul_mat_id`` for up and gate, the gated activation, ``mul_mat_id`` for down,
  the weighting, and the sum over the ``n_expert_used`` experts;
- shared experts: a dense ``build_ffn`` beside the routed ones, behind a sigmoid gate where the
  architecture has one (Qwen2-MoE's ``ffn_gate_inp_shexp``).

:func:`ffn_block` picks the block each modelled architecture's graph code builds in a layer. The
weights' types never change a compute tensor, so they are all one placeholder type here.
"""

from __future__ import annotations

from enum import Enum

from kvcalc.engines.llamacpp import ggml as g
from kvcalc.engines.llamacpp.graph import WEIGHT as _WT
from kvcalc.frozen import frozen
from kvcalc.model.graph_dims import GraphDims


class Gating(Enum):
    """``llama_expert_gating_func_type``."""

    SOFTMAX = "softmax"
    SIGMOID = "sigmoid"
    #: the chosen experts' logits, softmaxed among themselves (gpt-oss)
    SOFTMAX_WEIGHT = "softmax_weight"


@frozen
class MoeFfn:
    """The arguments of one ``build_moe_ffn`` call that shape its tensors."""

    n_expert: int
    n_expert_used: int
    #: one expert's MLP width (the ``ffn_*_exps`` tensors' second dimension)
    n_ff_exp: int
    gating: Gating = Gating.SOFTMAX
    #: ``norm_w``: the chosen weights divided by their sum
    norm_w: bool = False
    #: ``w_scale``: a ``scale`` node unless 0 or 1
    w_scale: float = 0.0
    #: ``exp_probs_b``: an expert-selection bias added to the probabilities (DeepSeek-V3)
    probs_bias: bool = False
    #: ``gate_inp_b`` and the ``*_exps_b`` biases (``add_id``), as gpt-oss has them
    biases: bool = False
    #: group-limited routing (``n_expert_groups > 1``): the best ``n_group_used`` groups by the
    #: sum of their two best scores, the others masked (DeepSeek-V3)
    n_expert_groups: int = 1
    n_group_used: int = 1


def moe_ffn(gf: g.Graph, cur: g.Tensor, moe: MoeFfn) -> g.Tensor:
    """``build_moe_ffn`` on ``cur`` (``[n_embd, n_tokens]``): the sum of the weighted experts."""
    n_embd, n_tokens = cur.ne[0], cur.ne[1]
    n_exp, n_used = moe.n_expert, moe.n_expert_used
    logits = g.mul_mat(g.external(_WT, n_embd, n_exp), cur)
    if moe.biases:
        logits = g.dup(logits, "add", g.external(g.F32, n_exp))
    if moe.gating is Gating.SOFTMAX:
        probs = g.dup(logits, "soft_max", None)
    elif moe.gating is Gating.SIGMOID:
        probs = g.dup(logits, "unary")
    else:
        probs = logits
    selection = g.dup(probs, "add", g.external(g.F32, n_exp)) if moe.probs_bias else probs
    if moe.n_expert_groups > 1 and n_tokens > 0:
        selection = _group_limited(selection, moe)
    selected = g.argsort_top_k(selection, n_used)
    weights = g.get_rows(g.reshape(probs, 1, n_exp, n_tokens), selected)
    if moe.gating is Gating.SOFTMAX_WEIGHT:
        soft = g.dup(g.reshape(weights, n_used, n_tokens), "soft_max", None)
        weights = g.reshape(soft, 1, n_used, n_tokens)
    if moe.norm_w:
        flat = g.reshape(weights, n_used, n_tokens)
        total = g.dup(g.sum_rows(flat), "clamp")
        weights = g.reshape(g.dup(flat, "div", total), 1, n_used, n_tokens)
    if moe.w_scale not in (0.0, 1.0):
        weights = g.dup(weights, "scale")
    gf.expand(weights)

    x = g.reshape(cur, n_embd, 1, n_tokens)
    up = g.mul_mat_id(g.external(_WT, n_embd, moe.n_ff_exp, n_exp), x, selected)
    if moe.biases:
        up = _add_id(up, selected)
    gate = g.mul_mat_id(g.external(_WT, n_embd, moe.n_ff_exp, n_exp), x, selected)
    if moe.biases:
        gate = _add_id(gate, selected)
    act = g.glu_split(gate, up)
    experts = g.mul_mat_id(g.external(_WT, moe.n_ff_exp, n_embd, n_exp), act, selected)
    if moe.biases:
        experts = _add_id(experts, selected)
    experts = g.dup(experts, "mul", weights)
    gf.expand(experts)

    views = [g.view(experts, n_embd, n_tokens, nb=(experts.nb[2],)) for _ in range(n_used)]
    for v in views:
        gf.expand(v)
    out = views[0]
    for v in views[1:]:
        out = g.dup(out, "add", v)
        gf.expand(out)
    return g.cont(out) if n_used == 1 else out


def _group_limited(selection: g.Tensor, moe: MoeFfn) -> g.Tensor:
    """The selection scores with all but the best ``n_group_used`` expert groups set to -inf."""
    n_groups, n_tokens = moe.n_expert_groups, selection.ne[1]
    groups = g.reshape(selection, moe.n_expert // n_groups, n_groups, n_tokens)
    top2 = g.argsort_top_k(groups, 2)
    scores = g.get_rows(g.reshape(groups, 1, *groups.ne[:3]), top2)  # [1, 2, n_groups, n_tokens]
    scores = g.sum_rows(g.reshape(scores, *scores.ne[1:]))
    best = g.argsort_top_k(g.reshape(scores, scores.ne[1], scores.ne[2]), moe.n_group_used)
    kept = g.get_rows(groups, best)
    masked = g.set_rows(g.dup(groups, "fill"), kept, best)
    return g.reshape(masked, moe.n_expert, n_tokens)


def _add_id(a: g.Tensor, ids: g.Tensor) -> g.Tensor:
    return g.dup(a, "add_id", g.external(g.F32, a.ne[0]), ids)


def dense_ffn(cur: g.Tensor, n_ff: int) -> g.Tensor:
    """``build_ffn`` with up, gate and down, no biases, SiLU, the gate in parallel (``LLM_FFN_PAR``)."""
    n_embd = cur.ne[0]
    up = g.mul_mat(g.external(_WT, n_embd, n_ff), cur)
    gate = g.mul_mat(g.external(_WT, n_embd, n_ff), cur)
    return g.mul_mat(g.external(_WT, n_ff, n_embd), g.glu_split(gate, up))


def _gated_shared_expert(cur: g.Tensor, n_ff: int) -> g.Tensor:
    """Qwen2-MoE's shared expert: ``build_ffn`` times ``silu(x)/x`` of a one-row gate (a sigmoid)."""
    gate_inp = g.mul_mat(g.external(_WT, cur.ne[0]), cur)  # [1, n_tokens]
    gate = g.dup(g.dup(gate_inp, "unary"), "div", gate_inp)
    return g.dup(dense_ffn(cur, n_ff), "mul", gate)


#: llama.cpp architectures whose FFN blocks :func:`ffn_block` builds
FFN_ARCHS = ("llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "deepseek2")
#: ``llama_expert_gating_func_type`` values (the GGUF's ``expert_gating_func``)
_GATING = {1: Gating.SOFTMAX, 2: Gating.SIGMOID, 3: Gating.SOFTMAX_WEIGHT}


def why_not_ffn(dims: GraphDims) -> str | None:
    """Why the experts of this architecture's graph are not modelled, or ``None`` (dense graphs
    of any architecture: their own builder makes their FFN blocks)."""
    moe = dims.arch in ("qwen2moe", "qwen3moe")
    if moe and not (dims.n_expert and dims.n_expert_used):
        return f"a {dims.arch} model without experts (llama.cpp refuses it)"
    if not dims.n_expert or dims.arch == "gpt-oss":  # gpt-oss: llamacpp_graph_swa checks its own
        return None
    if dims.arch not in FFN_ARCHS or not (moe or dims.arch in ("llama", "deepseek2")):
        return f"experts in a {dims.arch} graph are not modelled"
    if dims.arch == "deepseek2":
        if dims.n_expert_groups > 1 and (
            dims.n_expert % dims.n_expert_groups or not 0 < dims.n_group_used < dims.n_expert_groups
        ):
            return "expert groups llama.cpp's loader refuses (expert_group_count, _used_count)"
        if dims.expert_gating_func not in (0, *_GATING):
            return f"expert_gating_func {dims.expert_gating_func} is not modelled"
        if not dims.n_expert_shared:
            return "a deepseek2 graph without shared experts is not modelled"
        return None
    if dims.shared_expert != (dims.arch == "qwen2moe"):
        return f"shared experts in a {dims.arch} graph are not modelled"
    return None


def moe_of(dims: GraphDims) -> MoeFfn | None:
    """The routed experts each architecture's loader and graph code give a layer, or ``None``."""
    if not dims.n_expert:
        return None
    if dims.arch == "llama":  # the experts are feed_forward_length wide; top-k weights normalised
        return MoeFfn(n_expert=dims.n_expert, n_expert_used=dims.n_expert_used,
                      n_ff_exp=dims.n_ff, norm_w=True)  # fmt: skip
    n_ff_exp = dims.n_ff_exp or dims.n_ff // dims.n_expert_used
    if dims.arch == "deepseek2":  # as the file says; the gating softmax where unset
        return MoeFfn(n_expert=dims.n_expert, n_expert_used=dims.n_expert_used, n_ff_exp=n_ff_exp,
                      gating=_GATING.get(dims.expert_gating_func, Gating.SOFTMAX),
                      norm_w=dims.expert_weights_norm, w_scale=dims.expert_weights_scale,
                      probs_bias=dims.expert_probs_bias, n_expert_groups=max(1, dims.n_expert_groups),
                      n_group_used=max(1, dims.n_group_used))  # fmt: skip
    return MoeFfn(n_expert=dims.n_expert, n_expert_used=dims.n_expert_used, n_ff_exp=n_ff_exp,
                  norm_w=dims.arch == "qwen3moe")  # fmt: skip


def ffn_block(gf: g.Graph, cur: g.Tensor, dims: GraphDims, il: int = 0) -> g.Tensor:
    """The FFN output of layer ``il`` (before the residual add), from the normed input ``cur``."""
    moe = moe_of(dims)
    if moe is None or il < dims.n_layer_dense_lead:
        return dense_ffn(cur, dims.n_ff)
    out = moe_ffn(gf, cur, moe)
    if dims.arch == "qwen2moe":
        out = g.dup(out, "add", _gated_shared_expert(cur, dims.n_ff_shexp or dims.n_ff))
    elif dims.arch == "deepseek2":
        out = g.dup(out, "add", dense_ffn(cur, moe.n_ff_exp * dims.n_expert_shared))
    return out
