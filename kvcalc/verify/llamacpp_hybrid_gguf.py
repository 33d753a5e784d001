"""The GGUF of a hybrid (attention beside Mamba-2 layers) for llama.cpp to load: keys and tensors.

Two architectures, as llama.cpp's converter writes them (``conversion/granite.py``,
``nemotron.py``) and its loaders read them (``src/models/granite-hybrid.cpp``, ``nemotron-h.cpp``):

- ``granitehybrid`` (Granite-4.0-H, Bamba): a layer is recurrent when its ``head_count_kv`` is 0;
  every layer has a dense MLP; the loader asserts ``ssm_d_inner == 2 · n_embd``, so the written
  embedding is half the Mamba inner width;
- ``nemotron_h`` (Nemotron-H, Nemotron-3): recurrent when ``head_count_kv`` and
  ``feed_forward_length`` are both 0 on the layer, attention when only ``feed_forward_length`` is,
  an MLP block (up/down, no gate) otherwise — Nemotron-3's expert layers are written as such MLP
  blocks, which hold no cache either.

The state's shape (conv kernel, inner width, groups, state size, heads), the attention heads and
head widths and the layer pattern are the model's; widths that size only weights are small.
"""

from __future__ import annotations

from kvcalc.engines.llamacpp_recurrent import HYBRID_ARCHS
from kvcalc.model.layouts import FullAttention, RecurrentState
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.model.shape import ModelShape

#: written to the GGUF beside the integer keys (``nemotron_h`` requires the plain epsilon)
EPS_KEYS = {"nemotron_h": ("attention.layer_norm_epsilon",)}


def hybrid_roles(model: ModelShape) -> tuple[str, ...]:
    """Per layer: ``attn``, ``recr`` or ``mlp`` (a layer that caches nothing)."""
    return tuple(
        "recr"
        if isinstance(x, RecurrentState)
        else "attn"
        if isinstance(x, FullAttention)
        else "mlp"
        for x in model.layers
    )


def hybrid_arch_for(model: ModelShape) -> str | None:
    found = HYBRID_ARCHS.get(model.model_type.lower())
    return found[0] if found else None


def hybrid_keys(spec) -> dict[str, int | list[int]]:  # a GgufSpec
    m: Mamba2State = spec.ssm
    roles = spec.roles
    kv = [spec.kv_heads if r == "attn" else 0 for r in roles]
    keys: dict[str, int | list[int]] = {
        "context_length": spec.context_length, "embedding_length": spec.hidden,
        "block_count": spec.num_layers, "attention.head_count": spec.heads,
        "attention.head_count_kv": kv, "attention.key_length": spec.head_k,
        "attention.value_length": spec.head_v, "rope.dimension_count": spec.head_k,
        "ssm.conv_kernel": m.conv_kernel, "ssm.inner_size": m.intermediate_size,
        "ssm.state_size": m.state_size, "ssm.time_step_rank": m.num_heads,
        "ssm.group_count": m.n_groups,
    }  # fmt: skip
    if spec.arch == "nemotron_h":
        keys["feed_forward_length"] = [spec.ffn if r == "mlp" else 0 for r in roles]
    else:
        keys["feed_forward_length"] = spec.ffn
    return keys


def hybrid_tensors(spec) -> list[tuple[str, tuple[int, ...]]]:  # a GgufSpec
    """(name, numpy shape) of every tensor the loader requires (ggml ``ne`` reversed)."""
    m: Mamba2State = spec.ssm
    h, vocab, ff = spec.hidden, spec.vocab, spec.ffn
    q = spec.heads * spec.head_k
    out: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (vocab, h)), ("output_norm.weight", (h,)), ("output.weight", (vocab, h)),
    ]  # fmt: skip
    for i, role in enumerate(spec.roles):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", (h,)))
        if role == "recr":
            out += _mamba2_layer(b, m, h)
        elif role == "attn":
            kv = spec.kv_heads
            out += [(b + "attn_q.weight", (q, h)), (b + "attn_k.weight", (kv * spec.head_k, h)),
                    (b + "attn_v.weight", (kv * spec.head_v, h)), (b + "attn_output.weight", (h, q))]  # fmt: skip
        if spec.arch == "nemotron_h":
            if role == "mlp":
                out += [(b + "ffn_up.weight", (ff, h)), (b + "ffn_down.weight", (h, ff))]
        else:  # granitehybrid: a dense MLP after every mixer
            out += [(b + "ffn_norm.weight", (h,)), (b + "ffn_gate.weight", (ff, h)),
                    (b + "ffn_up.weight", (ff, h)), (b + "ffn_down.weight", (h, ff))]  # fmt: skip
    return out


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


def mamba2_keys(spec) -> dict[str, int]:  # a GgufSpec
    m = spec.ssm
    return {"context_length": spec.context_length, "embedding_length": spec.hidden,
            "block_count": spec.num_layers, "ssm.conv_kernel": m.conv_kernel,
            "ssm.inner_size": m.intermediate_size, "ssm.state_size": m.state_size,
            "ssm.time_step_rank": m.num_heads, "ssm.group_count": m.n_groups}  # fmt: skip


def mamba2_tensors(spec) -> list[tuple[str, tuple[int, ...]]]:  # a GgufSpec
    """``llama_model_mamba2::load_arch_tensors``' tensors: a norm and a mixer per layer."""
    h, vocab = spec.hidden, spec.vocab
    out: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (vocab, h)), ("output_norm.weight", (h,)), ("output.weight", (vocab, h)),
    ]  # fmt: skip
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,)), *_mamba2_layer(b, spec.ssm, h)]
    return out
