"""A small GGUF with random weights in a model's real KV layout, for llama.cpp to load.

Everything the KV cache depends on is the model's own: layer count (or ``--layers``), attention
heads, KV heads, head widths, the sliding-window pattern and window, the expert count. What only
sizes weights is made small unless asked (:class:`GgufWidths`, :func:`model_widths`): a 64-wide
embedding, a 64-wide MLP (32 per expert), a 384-token SentencePiece-style vocabulary. Tensors over
``SPARSE_BYTES`` are holes in a sparse file (zeros), so a model's own expert widths cost no disk.
The architecture is the one llama.cpp would use for the model (``llama``, ``qwen2``, ``qwen3``,
``qwen2moe``, ``qwen3moe``, ``gemma2``, ``gemma3``, ``gpt-oss``), with the tensors its loader requires
(``load_arch_tensors`` in the modelled version) and the sliding pattern written as one bool per
layer (``{arch}.attention.sliding_window_pattern``), which every SWA loader reads first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvcalc.hfconfig.moe_router import MoeRouter
from kvcalc.model.layouts import LayerKind, MLALatent
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.model.shape import ModelShape
from kvcalc.verify.llamacpp.hybrid_gguf import (
    EPS_KEYS,
    hybrid_keys,
    hybrid_layout,
    hybrid_roles,
    hybrid_tensors,
    mamba2_keys,
    mamba2_tensors,
    qwen3next_pattern_ok,
)
from kvcalc.verify.llamacpp.mla_gguf import mla_keys as _mla_keys
from kvcalc.verify.llamacpp.mla_gguf import mla_tensors as _mla_tensors
from kvcalc.verify.llamacpp.spec import (
    EXPERT_FFN,
    FFN,
    HIDDEN,
    SPARSE_BYTES,
    VOCAB,
    GgufSpec,
    GgufWidths,
    model_widths,
    unsupported,
)

__all__ = ["EXPERT_FFN", "FFN", "HIDDEN", "SPARSE_BYTES", "VOCAB", "GgufSpec", "GgufWidths",
           "model_widths", "spec_for", "unsupported", "write_model"]  # fmt: skip


def spec_for(model: ModelShape, widths: GgufWidths | None = None) -> GgufSpec:
    """The llama.cpp architecture and numbers that reproduce ``model``'s cache."""
    w = widths or GgufWidths()
    kinds = set(model.kinds)
    if all(isinstance(x, Mamba2State) for x in model.layers):
        return _mamba2(model, w)
    if LayerKind.RECURRENT in kinds:
        return _hybrid(model, w)
    if kinds == {LayerKind.MLA}:
        return _deepseek2(model, w)
    if kinds == {LayerKind.FULL, LayerKind.CHUNKED}:
        return _llama4(model, w)
    if other := kinds - {LayerKind.FULL, LayerKind.SLIDING}:
        raise unsupported(model, f"layers of kind {', '.join(sorted(other))}")
    attn = list(model.layers)
    shapes = {(x.head_dim_k, x.head_dim_v) for x in attn}
    if len(shapes) != 1:
        raise unsupported(model, "head widths differ between layers")
    (head_k, head_v), = shapes  # fmt: skip
    per_layer = tuple(x.num_kv_heads for x in attn)
    kv_heads = max(per_layer)
    if head_k != head_v:
        raise unsupported(model, f"K width {head_k} differs from V width {head_v}")
    experts, used = _experts(model)
    sliding = (
        tuple(x.kind is LayerKind.SLIDING for x in attn) if LayerKind.SLIDING in kinds else None
    )
    windows = {x.window for x in attn if x.kind is LayerKind.SLIDING}
    if len(windows) > 1:
        raise unsupported(model, "sliding layers with different windows")
    mtype = model.model_type.lower()
    if sliding is not None:
        if not any(not s for s in sliding):
            raise unsupported(model, "every layer slides (llama.cpp books such models as full)")
        arch = {"gemma2": "gemma2", "gpt_oss": "gpt-oss"}.get(mtype, "gemma3")
    elif mtype in ("qwen3", "qwen3moe", "qwen3_moe"):
        arch = "qwen3moe" if experts else "qwen3"
    elif mtype == "qwen2" and not experts:
        arch = "qwen2"  # Q, K and V biases
    elif mtype == "qwen2_moe" and experts:
        arch = "qwen2moe"  # qwen2's attention, experts beside a gated shared expert
    else:
        arch = "llama"
    if len(set(per_layer)) > 1:
        if arch != "llama" or experts:
            raise unsupported(model, f"KV heads differ between layers of a {arch} model")
        arch = "deci"  # the llama graph whose loader shapes each layer by its own KV heads
    return GgufSpec(arch=arch, num_layers=model.num_layers, heads=model.num_attention_heads,
                    kv_heads=kv_heads, head_k=head_k, head_v=head_v, context_length=model.max_model_len,
                    sliding=sliding, window=windows.pop() or 0 if windows else 0, experts=experts,
                    experts_used=used, ffn=w.ffn, vocab=w.vocab, expert_ffn=w.expert_ffn,
                    shared_ffn=w.shared_ffn or w.ffn,
                    kv_heads_per_layer=per_layer if len(set(per_layer)) > 1 else None,
                    # qwen2's loader shapes attn_q/attn_output as n_embd × n_embd
                    hidden=model.num_attention_heads * head_k if arch.startswith("qwen2") else w.hidden)  # fmt: skip


def _mamba2(model: ModelShape, w: GgufWidths) -> GgufSpec:
    states = {x for x in model.layers if isinstance(x, Mamba2State)}
    if len(states) != 1:
        raise unsupported(model, "recurrent layers other than one Mamba-2 shape")
    (ssm,) = states
    return GgufSpec(arch="mamba2", num_layers=model.num_layers, heads=0, kv_heads=0, head_k=0, head_v=0,
                    context_length=model.max_model_len, hidden=w.hidden, ffn=0, vocab=w.vocab, ssm=ssm)  # fmt: skip


def _hybrid(model: ModelShape, w: GgufWidths) -> GgufSpec:
    found = hybrid_layout(model, w.hidden)
    if isinstance(found, str):
        raise unsupported(model, found)
    arch, state, hidden = found
    shapes = {
        (x.num_kv_heads, x.head_dim_k, x.head_dim_v) for x in model.layers if x.bytes_per_token
    }
    if len(shapes) != 1:
        raise unsupported(model, "attention layers of different shapes")
    ((kv, head_k, head_v),) = shapes
    roles = hybrid_roles(model)
    if arch in ("qwen3next", "qwen35moe", "qwen35") and not qwen3next_pattern_ok(roles):
        raise unsupported(
            model, "a layer pattern that qwen3next's full_attention_interval cannot write"
        )
    return GgufSpec(arch=arch, num_layers=model.num_layers, heads=model.num_attention_heads, kv_heads=kv,
                    head_k=head_k, head_v=head_v, context_length=model.max_model_len, hidden=hidden,
                    ffn=w.ffn, vocab=w.vocab, state=state, roles=roles)  # fmt: skip


def _llama4(model: ModelShape, w: GgufWidths) -> GgufSpec:
    """``llama4`` as its converter writes it: no chunk size and no pattern (the loader's are
    fixed, and the engine refuses a model that differs from them), experts in every layer."""
    shapes = {(x.num_kv_heads, x.head_dim_k, x.head_dim_v) for x in model.layers}
    experts, used = _experts(model)
    if len(shapes) != 1 or not experts:
        raise unsupported(model, "llama4 needs one attention shape and experts")
    ((kv, head_k, head_v),) = shapes
    return GgufSpec(arch="llama4", num_layers=model.num_layers, heads=model.num_attention_heads,
                    kv_heads=kv, head_k=head_k, head_v=head_v, context_length=model.max_model_len,
                    experts=experts, experts_used=used, hidden=w.hidden, ffn=w.ffn, vocab=w.vocab,
                    expert_ffn=w.expert_ffn)  # fmt: skip


def _deepseek2(model: ModelShape, w: GgufWidths) -> GgufSpec:
    latents = {x for x in model.layers if isinstance(x, MLALatent)}
    if len(latents) != 1:
        raise unsupported(model, "MLA layers of different shapes")
    (mla,) = latents
    heads = mla.num_heads or model.num_attention_heads
    ffns = tuple(getattr(model.weights, "ffns", ()))[: model.num_layers]
    dense = next((i for i, kind in enumerate(ffns) if kind == "moe"), model.num_layers)
    if "dense" in ffns[dense:]:
        raise unsupported(model, "dense layers after the expert layers (llama.cpp's deepseek2 has "
                          "leading dense blocks only)")  # fmt: skip
    experts, used = _experts(model) if dense < model.num_layers else (0, 0)
    moe = getattr(model.weights, "moe", None)
    if experts and w.shared_ffn % w.expert_ffn:
        raise unsupported(model, "a shared-expert width that is not a whole number of experts")
    return GgufSpec(arch="deepseek2", num_layers=model.num_layers, heads=heads, kv_heads=1,
                    head_k=mla.latent_dim, head_v=mla.kv_lora_rank, context_length=model.max_model_len,
                    hidden=w.hidden, ffn=w.ffn, vocab=w.vocab, mla=mla, experts=experts,
                    experts_used=used, expert_ffn=w.expert_ffn, shared_ffn=w.shared_ffn,
                    dense_lead=dense, router=getattr(moe, "router", None) or MoeRouter(),
                    q_lora=getattr(model.weights.mla, "q_lora_rank", 0) if model.weights.mla else 0)  # fmt: skip


def _experts(model: ModelShape) -> tuple[int, int]:
    moe = getattr(model.weights, "moe", None)
    if moe is not None:
        return moe.num_experts, moe.experts_per_token
    keys = model.config_keys
    arch = model.model_type
    return int(keys.get(f"{arch}.expert_count", 0) or 0), int(
        keys.get(f"{arch}.expert_used_count", 0) or 0
    )


def write_model(spec: GgufSpec, path: Path, *, seed: int = 0) -> Path:
    """Write ``spec`` as a loadable GGUF (random f16 weights, f32 norms) at ``path``."""
    import numpy as np
    from gguf import GGUFWriter
    from gguf.constants import TokenType

    rng = np.random.default_rng(seed)
    a = spec.arch
    w = GGUFWriter(path, a)
    w.add_name(f"kvcalc verify {a}")
    keys: dict[str, int | float | bool | list[int]] = {}
    if spec.roles:
        keys = {**hybrid_keys(spec)}
    else:
        keys = {
            **(mamba2_keys(spec) if spec.ssm else _mla_keys(spec) if spec.mla else _int_keys(spec))
        }
    for key, value in keys.items():
        if isinstance(value, list):
            w.add_array(f"{a}.{key}", value)
        elif isinstance(value, bool):
            w.add_bool(f"{a}.{key}", value)
        elif isinstance(value, float):
            w.add_float32(f"{a}.{key}", value)
        else:
            w.add_uint32(f"{a}.{key}", value)
    if spec.kv_heads_per_layer is not None:
        w.add_array(f"{a}.attention.head_count_kv", list(spec.kv_heads_per_layer))
    for key in ("attention.layer_norm_rms_epsilon", *EPS_KEYS.get(a, ())):
        w.add_float32(f"{a}.{key}", 1e-6)
    w.add_float32(f"{a}.rope.freq_base", 10000.0)
    if spec.sliding is not None:
        w.add_uint32(f"{a}.attention.sliding_window", spec.window)
        w.add_array(f"{a}.attention.sliding_window_pattern", list(spec.sliding))
    vocab = spec.vocab
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"\u2581t{i}" for i in range(vocab - len(tokens))]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    types += [TokenType.NORMAL] * (vocab - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(vocab)])
    w.add_token_types([int(t) for t in types])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    if spec.roles:
        tensors = hybrid_tensors(spec)
    else:
        tensors = (
            mamba2_tensors(spec) if spec.ssm else _mla_tensors(spec) if spec.mla else _tensors(spec)
        )
    f32 = [len(shape) == 1 or name.endswith(
        ("ffn_gate_inp.weight", "ssm_a", "ssm_d", "ssm_norm.weight", "ssm_conv1d.weight",
         "shortconv.conv.weight", "_exps.bias")
    ) for name, shape in tensors]  # fmt: skip
    for (name, shape), wide in zip(tensors, f32, strict=True):
        dtype = np.dtype(np.float32 if wide else np.float16)
        w.add_tensor_info(name, shape, dtype, int(np.prod(shape)) * dtype.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    out = w.fout[0] if w.fout else None
    assert out is not None
    for (name, shape), wide in zip(tensors, f32, strict=True):
        nbytes = int(np.prod(shape)) * (4 if wide else 2)
        if nbytes > SPARSE_BYTES:  # left a hole: reads as zeros, costs no disk or write time
            w.tensors[0].pop(name)
            w.write_padding(out, out.tell())
            out.seek(nbytes, 1)
            w.write_padding(out, nbytes)
            continue
        if wide:
            data: Any = (1.0 + 0.02 * rng.standard_normal(shape)).astype(np.float32)
        else:
            data = (0.02 * rng.standard_normal(shape)).astype(np.float16)
        w.write_tensor_data(data)
    out.truncate(out.tell())
    w.close()
    return path


def _int_keys(spec: GgufSpec) -> dict[str, int]:
    keys = {
        "context_length": spec.context_length,
        "embedding_length": spec.hidden,
        "block_count": spec.num_layers,
        "feed_forward_length": spec.ffn,
        "attention.head_count": spec.heads,
        **({} if spec.kv_heads_per_layer else {"attention.head_count_kv": spec.kv_heads}),
        "attention.key_length": spec.head_k,
        "attention.value_length": spec.head_v,
        "rope.dimension_count": spec.head_k,
    }
    if spec.experts:
        keys |= {"expert_count": spec.experts, "expert_used_count": spec.experts_used,
                 "expert_feed_forward_length": spec.expert_ffn}  # fmt: skip
    if spec.arch == "qwen2moe":
        keys["expert_shared_feed_forward_length"] = spec.shared_ffn
    if spec.arch == "llama4":
        keys["interleave_moe_layer_step"] = 1  # experts in every layer (Scout's)
    return keys


def _tensors(spec: GgufSpec) -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy shape) of every tensor ``spec.arch``'s loader requires (ggml ``ne`` reversed)."""
    h, q, vocab = spec.hidden, spec.heads * spec.head_k, spec.vocab
    gemma = spec.arch in ("gemma2", "gemma3")
    out: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (vocab, h)),
        ("output_norm.weight", (h,)),
    ]
    if spec.arch != "gemma2":  # gemma2 always reuses token_embd as the output
        out.append(("output.weight", (vocab, h)))
    # the llama loader shapes experts by feed_forward_length, the Qwen MoE ones by the expert width
    ff = spec.expert_ffn if spec.arch in ("qwen2moe", "qwen3moe", "gpt-oss", "llama4") else spec.ffn
    oss = spec.arch == "gpt-oss"
    for i in range(spec.num_layers):
        b = f"blk.{i}."
        kv = spec.kv_heads_per_layer[i] if spec.kv_heads_per_layer else spec.kv_heads
        out += [(b + "attn_norm.weight", (h,)), (b + "attn_q.weight", (q, h)),
                (b + "attn_k.weight", (kv * spec.head_k, h)),
                (b + "attn_v.weight", (kv * spec.head_v, h)),
                (b + "attn_output.weight", (h, q))]  # fmt: skip
        # gpt-oss: a post-attention norm before the experts instead of ffn_norm, the sinks, biases
        out += [(b + "post_attention_norm.weight", (h,)), (b + "attn_sinks.weight", (spec.heads,)),
                (b + "attn_output.bias", (h,))] if oss else [(b + "ffn_norm.weight", (h,))]  # fmt: skip
        if spec.arch in ("qwen2", "qwen2moe", "gpt-oss"):
            out += [(b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv * spec.head_k,)),
                    (b + "attn_v.bias", (kv * spec.head_v,))]  # fmt: skip
        if spec.arch in ("qwen3", "qwen3moe", "gemma3"):
            out += [
                (b + "attn_q_norm.weight", (spec.head_k,)),
                (b + "attn_k_norm.weight", (spec.head_k,)),
            ]
        if gemma:
            out += [(b + "post_attention_norm.weight", (h,)), (b + "post_ffw_norm.weight", (h,))]
        if spec.experts:
            e = spec.experts
            out += [(b + "ffn_gate_inp.weight", (e, h)), (b + "ffn_gate_exps.weight", (e, ff, h)),
                    (b + "ffn_up_exps.weight", (e, ff, h)), (b + "ffn_down_exps.weight", (e, h, ff))]  # fmt: skip
            if oss:
                out += [(b + "ffn_gate_inp.bias", (e,)), (b + "ffn_gate_exps.bias", (e, ff)),
                        (b + "ffn_up_exps.bias", (e, ff)), (b + "ffn_down_exps.bias", (e, h))]  # fmt: skip
            if spec.arch == "llama4":  # a shared expert as wide as the routed ones, no gate
                out += [(b + "ffn_gate_shexp.weight", (ff, h)), (b + "ffn_up_shexp.weight", (ff, h)),
                        (b + "ffn_down_shexp.weight", (h, ff))]  # fmt: skip
            if spec.arch == "qwen2moe":
                sh = spec.shared_ffn
                out += [(b + "ffn_gate_inp_shexp.weight", (h,)), (b + "ffn_gate_shexp.weight", (sh, h)),
                        (b + "ffn_up_shexp.weight", (sh, h)), (b + "ffn_down_shexp.weight", (h, sh))]  # fmt: skip
        else:
            out += [(b + "ffn_gate.weight", (ff, h)), (b + "ffn_up.weight", (ff, h)),
                    (b + "ffn_down.weight", (h, ff))]  # fmt: skip
    return out
