"""GGUF metadata → :class:`~kvcalc.model.shape.ModelShape`: the only code that reads GGUF keys.

The keys and their defaults are llama.cpp's own (``llama_model_base::load_hparams`` and each
architecture's ``load_arch_hparams`` in the version kvcalc models, see
:mod:`kvcalc.engines.llamacpp.engine`):

- ``{arch}.block_count`` layers, of which the last ``{arch}.nextn_predict_layers`` are
  multi-token-prediction heads that the main context never caches (they are left out);
- ``{arch}.attention.head_count`` and ``head_count_kv`` (a number, or one per layer;
  ``head_count_kv`` defaults to ``head_count``);
- ``{arch}.attention.key_length`` / ``value_length`` (default ``embedding_length / head_count``),
  ``key_length_swa`` / ``value_length_swa`` on sliding layers;
- sliding windows only where llama.cpp reads them: ``{arch}.attention.sliding_window`` and the
  pattern from ``{arch}.attention.sliding_window_pattern`` (one bool per layer, or a period ``n``:
  layer ``i`` slides when ``i % n < n - 1``), else the architecture's default period (Gemma-2 and
  gpt-oss 2, Gemma-3 6). Llama, Mistral and Qwen architectures ignore a ``sliding_window`` key;
- MLA (DeepSeek-2 family): ``key_length_mla`` and ``value_length_mla`` set; the cache holds
  ``key_length × head_count_kv`` = ``kv_lora_rank + rope.dimension_count`` values per token and no V;
- Mamba-2 state from ``{arch}.ssm.*`` (llama.cpp keeps it in float32);
- hybrids (attention beside recurrent layers) and Llama 4's chunked layers:
  :mod:`kvcalc.sources.gguf.recurrent`.

Any other architecture is refused by name: its keys may mean something else there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.model.dtypes import FP16, FP32
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import FullAttention, LayerKind, Layout, MLALatent, SlidingWindow
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.model.shape import ModelShape
from kvcalc.sources.gguf.keys import GgufKeys
from kvcalc.sources.gguf.recurrent import HYBRIDS, hybrid_layers, llama4_layers
from kvcalc.sources.gguf.weights import gguf_weight_shape

#: architectures whose keys kvcalc reads, and llama.cpp's default SWA period (0: no SWA support)
ARCHITECTURES: Mapping[str, int] = {
    "llama": 0, "mistral3": 0, "qwen2": 0, "qwen2moe": 0, "qwen3": 0, "qwen3moe": 0,
    "gemma": 0, "gemma2": 2, "gemma3": 6, "gpt-oss": 2, "deepseek2": 0, "mamba2": 0, "deci": 0,
    "llama4": 0, **dict.fromkeys(HYBRIDS, 0),
}  # fmt: skip
#: the architectures whose loader sizes each layer's K/V projections by that layer's
#: ``head_count_kv`` (the others use layer 0's, so a file with differing heads does not load)
_PER_LAYER_KV_HEADS = frozenset({"deci"})
#: architectures that always have sliding layers; for gemma3 only when ``sliding_window`` is set
_SWA_ALWAYS = {"gemma2": 4096, "gpt-oss": 0}


def architecture(metadata: Mapping[str, Any], *, where: str) -> str:
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ConfigError(f"{where}: no general.architecture key",
                          hint="a GGUF model file names its architecture; this one does not",
                          code="config-missing-key")  # fmt: skip
    if arch not in ARCHITECTURES:
        raise ConfigError(
            f"{where}: GGUF architecture {arch!r} is not supported: kvcalc does not know what "
            f"its {arch}.* keys mean for the cache",
            hint="supported: " + ", ".join(ARCHITECTURES),
            code="config-unsupported",
        )
    return arch


def parse_gguf(
    metadata: Mapping[str, Any],
    *,
    name: str,
    where: str,
    tensors: Mapping[str, tuple[int, ...]] | None = None,
) -> ModelShape:
    """The model a GGUF header describes (``tensors``: name → ggml dims, for the graph widths).
    Raises :class:`ConfigError` naming the bad keys."""
    arch = architecture(metadata, where=where)
    k = GgufKeys(metadata, arch=arch, where=where)
    prov: dict[str, str] = {}
    total = k.num("block_count", minimum=1)
    nextn = k.num("nextn_predict_layers", 0)
    if nextn >= total:
        raise k.bad("nextn_predict_layers", nextn, f"fewer than block_count ({total})")
    n = total - nextn
    prov["num_layers"] = f"{arch}.block_count = {total}" + (
        f", less {nextn} next-token-prediction layer(s) the main context does not cache"
        if nextn
        else ""
    )
    hidden = k.num("embedding_length", minimum=1)
    if arch == "mamba2":
        layers: list[Layout] = [_mamba2(k)] * n
        heads = 0
        prov["layer pattern"] = f"{n} Mamba-2 layers ({arch}.ssm.*), state in float32"
    elif arch in HYBRIDS:
        heads = _heads(k, total)
        layers = hybrid_layers(k, n, total, hidden, heads, prov)
    else:
        heads = _heads(k, total)
        kv_heads = k.per_layer("attention.head_count_kv", total, heads)
        if len(set(kv_heads[:n])) > 1 and arch not in _PER_LAYER_KV_HEADS:
            raise ConfigError(f"{where}: {arch}.attention.head_count_kv differs between layers, but "
                              f"llama.cpp's {arch} loader shapes every layer's K and V by layer 0's",
                              hint="llama.cpp would not load this file; per-layer KV heads are read for: "
                              + ", ".join(sorted(_PER_LAYER_KV_HEADS)), code="config-unsupported")  # fmt: skip
        if 0 in kv_heads[:n]:
            raise k.bad("attention.head_count_kv", kv_heads, "at least one KV head in every layer "
                        "(layers without attention are not modelled)")  # fmt: skip
        layers = _attention_layers(k, n, heads, hidden, kv_heads, prov)
    context = k.num("context_length", minimum=1)
    experts = k.num("expert_count", 0)  # recorded (config_keys) for the MoE layout; no cache effect
    used = k.num("expert_used_count", 0)
    graph = _graph_dims(k, total, hidden, experts, used, tensors or {})
    return ModelShape(
        name=name,
        model_type=arch,
        architectures=(arch,),
        layers=tuple(layers),
        dtype=FP16,
        config_dtype=None,
        num_attention_heads=heads,
        hidden_size=hidden,
        max_model_len=context,
        config_keys={"general.architecture": arch, **k.used},
        provenance={
            **prov,
            "dtype": "GGUF: llama.cpp caches K and V in f16 unless told otherwise",
            "max_model_len": f"{arch}.context_length = {context}",
        },
        graph_dims=graph,
        weights=gguf_weight_shape(arch, tuple(layers), heads, graph),
        gguf=True,
    )


#: tensors whose graph nodes the compute-buffer model does not rebuild (``blk.N.`` stripped); the
#: last: gate and up experts fused by ``convert_hf_to_gguf.py --fuse-gate-up-exps`` (one mul_mat_id)
_UNMODELLED = ("attn_qkv.weight", "attn_output.bias", "ffn_up.bias", "ffn_gate.bias",
               "ffn_down.bias", "output.bias", "ffn_gate_up_exps.weight")  # fmt: skip


def _heads(k: GgufKeys, total: int) -> int:
    heads = k.per_layer("attention.head_count", total, 0)[0]
    if heads < 1:
        raise k.bad("attention.head_count", heads, "at least one head")
    return heads


def _graph_dims(
    k: GgufKeys,
    n: int,
    hidden: int,
    experts: int,
    used: int,
    tensors: Mapping[str, tuple[int, ...]],
) -> GraphDims | None:
    """The widths llama.cpp builds its graph from: ``feed_forward_length`` and the vocabulary
    (``token_embd.weight``'s second dimension, the rows ``get_rows`` picks from)."""
    embd = tensors.get("token_embd.weight")
    if embd is None or len(embd) != 2:
        return None  # no tensor infos (or a file without embeddings): the graph is not known
    ffs = k.per_layer("feed_forward_length", n, 0)
    present = {name.split(".", 2)[2] if name.startswith("blk.") else name for name in tensors}
    if k.arch == "mamba2" and not any(ffs):
        ffs = ()  # Mamba-2 layers alone: no MLP
    elif k.arch == "nemotron_h" and not experts:
        ffs = tuple(x for x in ffs if x)  # 0 marks the Mamba-2 and attention layers
    elif not experts and not all(ffs):
        return None  # no MLP width: llama.cpp would not load the file as a dense model either
    extra = tuple(x for x in _UNMODELLED if x in present)
    if len(set(ffs)) > 1:
        extra += ("per-layer feed_forward_length",)
    return GraphDims(arch=k.arch, n_embd=hidden, n_ff=ffs[0] if ffs else 0, n_vocab=embd[1],
                     n_expert=experts, n_expert_used=used,
                     n_ff_exp=k.num("expert_feed_forward_length", 0) if experts else 0,
                     n_ff_shexp=k.num("expert_shared_feed_forward_length", 0) if experts else 0,
                     shared_expert="ffn_up_shexp.weight" in present, **_expert_options(k, present),
                     qkv_bias="attn_q.bias" in present, unmodelled_tensors=extra,
                     # Gemma-3 soft-caps its logits only when the key is set (Gemma-2 always does)
                     final_logit_softcap=k.arch == "gemma3" and bool(k.raw("final_logit_softcapping")),
                     # Granite's switch for RoPE, true when absent (llama_model_granite_hybrid)
                     rope=k.arch != "granitehybrid" or k.raw("rope.scaling.finetuned") is not False)  # fmt: skip


def _expert_options(k: GgufKeys, present: set[str]) -> dict[str, Any]:
    """The routing and MLA keys the ``deepseek2`` graph reads (absent keys: llama.cpp's defaults)."""
    scale = k.raw("expert_weights_scale")
    return {"expert_gating_func": k.num("expert_gating_func", 0),
            "expert_weights_norm": bool(k.raw("expert_weights_norm")),
            "expert_weights_scale": float(scale) if isinstance(scale, (int, float)) else 0.0,
            "expert_probs_bias": "exp_probs_b.bias" in present,
            "n_expert_groups": k.num("expert_group_count", 0),
            "n_group_used": k.num("expert_group_used_count", 0),
            "n_expert_shared": k.num("expert_shared_count", 0),
            "n_layer_dense_lead": k.num("leading_dense_block_count", 0),
            "n_lora_q": k.num("attention.q_lora_rank", 0),
            "head_k_mla": k.num("attention.key_length_mla", 0),
            "head_v_mla": k.num("attention.value_length_mla", 0)}  # fmt: skip


def _attention_layers(
    k: GgufKeys, n: int, heads: int, hidden: int, kv_heads: tuple[int, ...], prov: dict[str, str]
) -> list[Layout]:
    head_k = k.num("attention.key_length", hidden // heads)
    head_v = k.num("attention.value_length", hidden // heads)
    swa = _sliding(k, n)
    head_k_swa = k.num("attention.key_length_swa", head_k)
    head_v_swa = k.num("attention.value_length_swa", head_v)
    mla = k.raw("attention.key_length_mla") and k.raw("attention.value_length_mla")
    if mla:
        rank = k.num("attention.kv_lora_rank", minimum=1)
        rope = k.num("rope.dimension_count", minimum=1)
        if any(h != 1 for h in kv_heads[:n]) or head_k != rank + rope:
            raise k.bad("attention.key_length", head_k,
                        f"kv_lora_rank + rope.dimension_count = {rank + rope} with one KV head (MLA)")  # fmt: skip
        prov["layer pattern"] = (
            f"MLA: {k.arch}.attention.key_length = {head_k} = kv_lora_rank {rank} + rope "
            f"{rope}, one KV head, no V (key_length_mla and value_length_mla are set)"
        )
        return [MLALatent(dtype=FP16, kv_lora_rank=rank, rope_dim=rope, num_heads=heads)] * n
    if k.arch == "llama4":
        return llama4_layers(k, n, kv_heads, head_k, head_v, prov)
    layers: list[Layout] = []
    for i in range(n):
        if swa is not None and swa[1][i]:
            layers.append(SlidingWindow(dtype=FP16, kv_heads=kv_heads[i], k_dim=head_k_swa,
                                        v_dim=head_v_swa, sliding_window=swa[0]))  # fmt: skip
        else:
            layers.append(
                FullAttention(dtype=FP16, kv_heads=kv_heads[i], k_dim=head_k, v_dim=head_v)
            )
    sliding = sum(x.kind is LayerKind.SLIDING for x in layers)
    prov["layer pattern"] = (
        f"{sliding} sliding-window layers ({swa[2]}), {n - sliding} full"
        if swa
        else "all full attention"
    ) + f"; KV heads from {k.arch}.attention.head_count_kv"
    return layers


def _sliding(k: GgufKeys, n: int) -> tuple[int, tuple[bool, ...], str] | None:
    """(window, is_swa per layer, how) as llama.cpp decides it for this architecture."""
    period = ARCHITECTURES[k.arch]
    if not period:
        return None
    if k.arch in _SWA_ALWAYS:
        window = k.num("attention.sliding_window", _SWA_ALWAYS[k.arch] or None, minimum=1)
    else:  # gemma3: only with a sliding_window key > 0
        window = k.num("attention.sliding_window", 0)
        if window == 0:
            return None
    pattern = k.raw("attention.sliding_window_pattern")
    if isinstance(pattern, tuple):
        if len(pattern) < n or not all(isinstance(x, bool) for x in pattern):
            raise k.bad("attention.sliding_window_pattern", pattern, f"{n} booleans")
        return window, tuple(pattern[:n]), f"window {window}, per-layer pattern"
    if pattern is not None:
        period = k._check("attention.sliding_window_pattern", pattern, 0)
        how = f"window {window}, period {period} from {k.arch}.attention.sliding_window_pattern"
    else:
        how = f"window {window}, llama.cpp's period {period} for {k.arch}"
    flags = tuple(period == 0 or i % period < period - 1 for i in range(n))
    return window, flags, how


def _mamba2(k: GgufKeys) -> Mamba2State:
    inner = k.num("ssm.inner_size", minimum=1)
    heads = k.num("ssm.time_step_rank", minimum=1)
    if inner % heads:
        raise k.bad("ssm.time_step_rank", heads, f"a divisor of ssm.inner_size ({inner})")
    return Mamba2State(
        dtype=FP32,
        ssm_dtype=FP32,
        conv_kernel=k.num("ssm.conv_kernel", minimum=1),
        intermediate_size=inner,
        n_groups=k.num("ssm.group_count", minimum=1),
        state_size=k.num("ssm.state_size", minimum=1),
        num_heads=heads,
        head_dim=inner // heads,
    )
