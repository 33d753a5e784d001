"""The GGUF of a hybrid (attention beside recurrent layers) for llama.cpp to load: keys and tensors.

As llama.cpp's converter writes them (``conversion/granite.py``, ``nemotron.py``, ``jamba.py``,
``falcon_h1.py``, ``lfm2.py``, ``qwen.py``) and its loaders read them (``src/models/*.cpp``):

- ``granitehybrid`` (Granite-4.0-H, Bamba): a layer is recurrent when its ``head_count_kv`` is 0;
  every layer has a dense MLP; the loader asserts ``ssm_d_inner == 2 · n_embd``;
- ``nemotron_h`` (Nemotron-H, Nemotron-3): recurrent when ``head_count_kv`` and
  ``feed_forward_length`` are both 0, attention when only ``feed_forward_length`` is, an MLP block
  (up/down) otherwise — Nemotron-3's expert layers are written as such blocks (no cache either);
- ``jamba``: Mamba-1 where ``head_count_kv`` is 0; ``ssm_d_inner == 2 · n_embd`` and an
  ``n_embd``-wide Q;
- ``falcon-h1``: attention and a Mamba-2 mixer in every layer;
- ``lfm2``: short convolutions where ``head_count_kv`` is 0; the state is ``n_embd`` wide and Q is
  ``n_embd`` wide;
- ``qwen3next``, ``qwen35moe`` and ``qwen35``: Gated DeltaNet, attention every
  ``full_attention_interval``-th layer (gated Q, Q/K norms); experts (required by ``qwen3next``)
  or a dense MLP (``qwen35``); Qwen3.5 reads ``rope.dimension_sections`` and separate
  ``ssm_beta``/``ssm_alpha`` projections.

The state's shape, the attention heads and head widths and the layer pattern are the model's;
widths that size only weights are small — except where a loader ties them to the state or to the
attention (``2 · n_embd``, ``n_embd``), where the written embedding follows the model.
"""

from __future__ import annotations

from typing import Any

from kvcalc.engines.llamacpp.recurrent import HYBRID_ARCHS
from kvcalc.model.layouts import FullAttention, RecurrentState
from kvcalc.model.recurrent_layouts import (
    GatedDeltaNetState,
    Mamba1State,
    Mamba2State,
    ParallelHybrid,
    ShortConvState,
)
from kvcalc.model.shape import ModelShape

#: float keys written beside the integer ones (``nemotron_h`` requires the plain epsilon)
EPS_KEYS = {"nemotron_h": ("attention.layer_norm_epsilon",)}
#: the Gated DeltaNet architectures
GDN = ("qwen3next", "qwen35moe", "qwen35")
#: the ones with M-RoPE (4 positions per token): their KV cells carry an extension in the state
MROPE_ARCHS = ("qwen35moe", "qwen35")
#: the experts ``qwen3next`` requires (they size weights only)
EXPERTS, EXPERTS_USED, EXPERT_FFN = 4, 2, 32


def hybrid_roles(model: ModelShape) -> tuple[str, ...]:
    """Per layer: ``attn``, ``recr``, ``both`` (Falcon-H1) or ``mlp`` (caches nothing)."""
    return tuple(
        "both" if isinstance(x, ParallelHybrid) else "recr" if isinstance(x, RecurrentState)
        else "attn" if isinstance(x, FullAttention) else "mlp"
        for x in model.layers
    )  # fmt: skip


def hybrid_layout(model: ModelShape, hidden: int) -> tuple[str, RecurrentState, int] | str:
    """(architecture, the one recurrent mixer, the embedding to write), or why it cannot be."""
    found = HYBRID_ARCHS.get(model.model_type.lower())
    if found is None:
        return f"no llama.cpp hybrid architecture is modelled for {model.model_type}"
    arch = found[0]
    mixers = {x.mixer if isinstance(x, ParallelHybrid) else x
              for x in model.layers if isinstance(x, RecurrentState)}  # fmt: skip
    if len(mixers) != 1:
        return "recurrent layers of different shapes"
    (state,) = mixers
    heads_width = model.num_attention_heads * _attention(model)[1]
    if arch in ("granitehybrid", "jamba"):
        hidden = state.intermediate_size // 2  # type: ignore[attr-defined]
    elif arch == "lfm2":
        assert isinstance(state, ShortConvState)
        hidden = state.conv_dim
    if arch in ("jamba", "lfm2") and heads_width != hidden:
        return f"{arch} needs the attention heads ({heads_width} wide) as wide as the embedding ({hidden})"
    return arch, state, hidden


def _attention(model: ModelShape) -> tuple[int, int, int]:
    """(KV heads, K width, V width) of the attention layers (one shape, else refused)."""
    shapes = {
        (x.num_kv_heads, x.head_dim_k, x.head_dim_v) for x in model.layers if x.bytes_per_token
    }
    return shapes.pop() if len(shapes) == 1 else (0, 0, 0)


def hybrid_keys(spec: Any) -> dict[str, int | list[int]]:  # a GgufSpec
    m, roles, a = spec.state, spec.roles, spec.arch
    keys: dict[str, int | list[int]] = {
        "context_length": spec.context_length, "embedding_length": spec.hidden,
        "block_count": spec.num_layers, "attention.head_count": spec.heads,
        "attention.key_length": spec.head_k, "attention.value_length": spec.head_v,
        "rope.dimension_count": spec.head_k, "feed_forward_length": spec.ffn,
        "attention.head_count_kv": [spec.kv_heads if r in ("attn", "both") else 0 for r in roles],
    }  # fmt: skip
    if a in ("falcon-h1", *GDN):  # one head count for every layer
        keys["attention.head_count_kv"] = spec.kv_heads
    if a == "nemotron_h":
        keys["feed_forward_length"] = [spec.ffn if r == "mlp" else 0 for r in roles]
    if isinstance(m, Mamba2State):
        keys |= {"ssm.conv_kernel": m.conv_kernel, "ssm.inner_size": m.intermediate_size,
                 "ssm.state_size": m.state_size, "ssm.time_step_rank": m.num_heads,
                 "ssm.group_count": m.n_groups}  # fmt: skip
    elif isinstance(m, Mamba1State):
        keys |= {"ssm.conv_kernel": m.conv_kernel, "ssm.inner_size": m.intermediate_size,
                 "ssm.state_size": m.state_size, "ssm.time_step_rank": _dt_rank(spec)}  # fmt: skip
    elif isinstance(m, ShortConvState):
        keys["shortconv.l_cache"] = m.conv_kernel
    else:
        assert isinstance(m, GatedDeltaNetState)
        attn = [i for i, r in enumerate(roles) if r == "attn"]
        keys |= {"ssm.conv_kernel": m.conv_kernel, "ssm.inner_size": m.num_v_heads * m.head_v_dim,
                 "ssm.state_size": m.head_k_dim, "ssm.time_step_rank": m.num_v_heads,
                 "ssm.group_count": m.num_k_heads, "full_attention_interval": attn[0] + 1 if attn else 4}  # fmt: skip
        if a != "qwen35":
            keys |= {"expert_count": EXPERTS, "expert_used_count": EXPERTS_USED,
                     "expert_feed_forward_length": EXPERT_FFN,
                     "expert_shared_feed_forward_length": EXPERT_FFN}  # fmt: skip
        if a != "qwen3next":  # Qwen3.5's multi-section RoPE: 64 rotated dims as the models have
            keys |= {"rope.dimension_count": 64, "rope.dimension_sections": [11, 11, 10, 0]}
    return keys


def qwen3next_pattern_ok(roles: tuple[str, ...]) -> bool:
    """``qwen3next`` marks layer ``i`` full when ``(i + 1) % full_attention_interval == 0``."""
    attn = [i for i, r in enumerate(roles) if r == "attn"]
    period = attn[0] + 1 if attn else 4
    return all((r == "attn") == ((i + 1) % period == 0) for i, r in enumerate(roles))


def _dt_rank(spec: Any) -> int:
    return -(-spec.hidden // 16)  # the converter's default: ceil(d_model / 16)


def hybrid_tensors(spec: Any) -> list[tuple[str, tuple[int, ...]]]:  # a GgufSpec
    """(name, numpy shape) of every tensor the loader requires (ggml ``ne`` reversed)."""
    h, vocab, ff, a = spec.hidden, spec.vocab, spec.ffn, spec.arch
    q = h if a in ("jamba", "lfm2") else spec.heads * spec.head_k
    out_norm = "token_embd_norm.weight" if a == "lfm2" else "output_norm.weight"
    out: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (vocab, h)), (out_norm, (h,)), ("output.weight", (vocab, h)),
    ]  # fmt: skip
    for i, role in enumerate(spec.roles):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", (h,)))
        if role in ("recr", "both"):
            out += _mixer(b, spec)
        if role in ("attn", "both"):
            kv = spec.kv_heads
            q_out = 2 * q if a in GDN else q  # Q and its gate
            out += [(b + "attn_q.weight", (q_out, h)), (b + "attn_k.weight", (kv * spec.head_k, h)),
                    (b + "attn_v.weight", (kv * spec.head_v, h)), (b + "attn_output.weight", (h, q))]  # fmt: skip
            if a in ("lfm2", *GDN):
                out += [(b + "attn_q_norm.weight", (spec.head_k,)),
                        (b + "attn_k_norm.weight", (spec.head_k,))]  # fmt: skip
        out += _ffn(b, a, role, h, ff)
    return out


def _ffn(b: str, a: str, role: str, h: int, ff: int) -> list[tuple[str, tuple[int, ...]]]:
    if a == "nemotron_h":
        return (
            [(b + "ffn_up.weight", (ff, h)), (b + "ffn_down.weight", (h, ff))]
            if role == "mlp"
            else []
        )
    if a == "qwen35":
        return [(b + "post_attention_norm.weight", (h,)), (b + "ffn_gate.weight", (ff, h)),
                (b + "ffn_up.weight", (ff, h)), (b + "ffn_down.weight", (h, ff))]  # fmt: skip
    if a in GDN:
        e, f = EXPERTS, EXPERT_FFN
        return [(b + "post_attention_norm.weight", (h,)), (b + "ffn_gate_inp.weight", (e, h)),
                (b + "ffn_down_exps.weight", (e, h, f)), (b + "ffn_gate_exps.weight", (e, f, h)),
                (b + "ffn_up_exps.weight", (e, f, h)), (b + "ffn_gate_inp_shexp.weight", (h,)),
                (b + "ffn_gate_shexp.weight", (f, h)), (b + "ffn_up_shexp.weight", (f, h)),
                (b + "ffn_down_shexp.weight", (h, f))]  # fmt: skip
    norm = b + ("ffn_norm" if a == "falcon-h1" else "ffn_norm.weight")  # falcon-h1: no suffix
    return [(norm, (h,)), (b + "ffn_gate.weight", (ff, h)), (b + "ffn_up.weight", (ff, h)),
            (b + "ffn_down.weight", (h, ff))]  # fmt: skip


def _mixer(b: str, spec: Any) -> list[tuple[str, tuple[int, ...]]]:
    m, h = spec.state, spec.hidden
    if isinstance(m, Mamba2State):
        return _mamba2_layer(b, m, h)
    if isinstance(m, Mamba1State):
        i, n, dt = m.intermediate_size, m.state_size, _dt_rank(spec)
        return [(b + "ssm_in.weight", (2 * i, h)), (b + "ssm_conv1d.weight", (i, m.conv_kernel)),
                (b + "ssm_conv1d.bias", (i,)), (b + "ssm_x.weight", (dt + 2 * n, i)),
                (b + "ssm_dt_norm.weight", (dt,)), (b + "ssm_dt.weight", (i, dt)), (b + "ssm_dt.bias", (i,)),
                (b + "ssm_b_norm.weight", (n,)), (b + "ssm_c_norm.weight", (n,)), (b + "ssm_a", (i, n)),
                (b + "ssm_d", (i,)), (b + "ssm_out.weight", (h, i))]  # fmt: skip
    if isinstance(m, ShortConvState):
        return [(b + "shortconv.conv.weight", (h, m.conv_kernel)),
                (b + "shortconv.in_proj.weight", (3 * h, h)), (b + "shortconv.out_proj.weight", (h, h))]  # fmt: skip
    assert isinstance(m, GatedDeltaNetState)
    key, value = m.num_k_heads * m.head_k_dim, m.num_v_heads * m.head_v_dim
    conv = 2 * key + value
    hv = m.num_v_heads
    gates = ([(b + "ssm_ba.weight", (2 * hv, h))] if spec.arch == "qwen3next"
             else [(b + "ssm_beta.weight", (hv, h)), (b + "ssm_alpha.weight", (hv, h))])  # fmt: skip
    return [(b + "attn_qkv.weight", (conv, h)), (b + "attn_gate.weight", (value, h)),
            (b + "ssm_conv1d.weight", (conv, m.conv_kernel)), (b + "ssm_dt.bias", (hv,)),
            (b + "ssm_a", (hv,)), *gates, (b + "ssm_norm.weight", (m.head_v_dim,)),
            (b + "ssm_out.weight", (h, value))]  # fmt: skip


def _mamba2_layer(b: str, m: Mamba2State, h: int) -> list[tuple[str, tuple[int, ...]]]:
    """One Mamba-2 mixer's tensors (``llama_model_mamba2::load_arch_tensors``, the same in the
    hybrids' loaders), numpy shapes."""
    conv = m.intermediate_size + 2 * m.n_groups * m.state_size
    d_in_proj = m.intermediate_size + conv + m.num_heads
    return [(b + "ssm_in.weight", (d_in_proj, h)),
            (b + "ssm_conv1d.weight", (conv, m.conv_kernel)), (b + "ssm_conv1d.bias", (conv,)),
            (b + "ssm_dt.bias", (m.num_heads,)), (b + "ssm_a", (m.num_heads, 1)),
            (b + "ssm_d", (m.num_heads, 1)),
            (b + "ssm_norm.weight", (m.n_groups, m.intermediate_size // m.n_groups)),
            (b + "ssm_out.weight", (h, m.intermediate_size))]  # fmt: skip


def mamba2_keys(spec: Any) -> dict[str, int]:  # a GgufSpec
    m = spec.ssm
    return {"context_length": spec.context_length, "embedding_length": spec.hidden,
            "block_count": spec.num_layers, "ssm.conv_kernel": m.conv_kernel,
            "ssm.inner_size": m.intermediate_size, "ssm.state_size": m.state_size,
            "ssm.time_step_rank": m.num_heads, "ssm.group_count": m.n_groups}  # fmt: skip


def mamba2_tensors(spec: Any) -> list[tuple[str, tuple[int, ...]]]:  # a GgufSpec
    """``llama_model_mamba2::load_arch_tensors``' tensors: a norm and a mixer per layer."""
    h, vocab = spec.hidden, spec.vocab
    out: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (vocab, h)), ("output_norm.weight", (h,)), ("output.weight", (vocab, h)),
    ]  # fmt: skip
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,)), *_mamba2_layer(b, spec.ssm, h)]
    return out
