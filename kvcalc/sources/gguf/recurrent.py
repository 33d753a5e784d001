"""The layers of hybrid GGUFs (attention beside recurrent mixers) and of Llama 4's chunked attention.

Which layer is which is llama.cpp's own rule (each architecture's ``load_arch_hparams`` and the
layer filters of ``llama_model::create_memory``, in the version kvcalc models):

- ``granitehybrid``, ``jamba``, ``lfm2``: a layer is recurrent when its
  ``{arch}.attention.head_count_kv`` is 0, attention otherwise;
- ``nemotron_h``: recurrent when ``head_count_kv`` and ``feed_forward_length`` are both 0,
  attention when only ``feed_forward_length`` is; a layer with an MLP caches nothing;
- ``falcon-h1``: every layer holds attention and a Mamba-2 mixer (both caches);
- ``qwen3next``, ``qwen35``, ``qwen35moe``: recurrent per ``{arch}.attention.recurrent_layers``
  (one bool per layer) when set, else every layer but each ``full_attention_interval``-th
  (default 4);
- ``llama4``: chunked attention of 8,192 tokens (the loader's, whatever the file says) on layer
  ``i`` when ``i % n < n − 1`` (``attention.sliding_window_pattern``, default 4, or one bool per
  layer), unless ``attention.sliding_window`` is 0 (then every layer is full).

The recurrent state (float32 in llama.cpp, model-wide) from the ``{arch}.ssm.*`` keys the loader
requires: Mamba-2 (``conv_kernel``, ``inner_size``, ``state_size``, ``time_step_rank``,
``group_count``), Mamba-1 for ``jamba`` (no groups), Gated DeltaNet for the Qwen architectures
(``inner_size`` = value heads × value width, ``state_size`` the key width, ``time_step_rank`` the
value heads, ``group_count`` the key heads), and ``{arch}.shortconv.l_cache`` for ``lfm2`` (a state
``embedding_length`` wide).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcalc.errors import ConfigError
from kvcalc.model.dtypes import FP16, FP32
from kvcalc.model.layouts import ChunkedLocal, FullAttention, Layout, NoCache, RecurrentState
from kvcalc.model.recurrent_layouts import (
    GatedDeltaNetState,
    Mamba1State,
    Mamba2State,
    ParallelHybrid,
    ShortConvState,
)

if TYPE_CHECKING:
    from kvcalc.sources.gguf.keys import GgufKeys

#: hybrid architectures → the recurrent mixer their loader builds
HYBRIDS: dict[str, str] = {
    "granitehybrid": "Mamba-2", "nemotron_h": "Mamba-2", "jamba": "Mamba-1",
    "falcon-h1": "Mamba-2", "lfm2": "short convolution", "qwen3next": "Gated DeltaNet",
    "qwen35": "Gated DeltaNet", "qwen35moe": "Gated DeltaNet",
}  # fmt: skip
_GDN = ("qwen3next", "qwen35", "qwen35moe")
#: ``llama_model_llama4::load_arch_hparams``: the chunk and the pattern's default period
LLAMA4_CHUNK, LLAMA4_PERIOD = 8192, 4


def hybrid_layers(
    k: GgufKeys, n: int, total: int, hidden: int, heads: int, prov: dict[str, str]
) -> list[Layout]:
    """The ``n`` cached layers of a hybrid (``total`` with next-token-prediction layers)."""
    arch = k.arch
    if k.num("attention.sliding_window", 0):
        raise ConfigError(f"{k.where}: {arch}.attention.sliding_window is set: llama.cpp's {arch} "
                          "would slide its attention layers (a hybrid SWA memory), which kvcalc "
                          "does not model", hint="not planned rather than guessed",
                          code="config-unsupported")  # fmt: skip
    kv_heads = k.per_layer("attention.head_count_kv", total, heads)
    recurrent = _recurrent_flags(k, n, total, kv_heads)
    ffs = k.per_layer("feed_forward_length", total, 0) if arch == "nemotron_h" else (0,) * total
    state = _state(k, hidden)
    attn_kv = {kv_heads[i] for i in range(n) if not recurrent[i] and not ffs[i]}
    if 0 in attn_kv:
        raise k.bad("attention.head_count_kv", kv_heads,
                    f"at least one KV head on {arch}'s attention layers")  # fmt: skip
    head_k = k.num("attention.key_length", hidden // heads)
    head_v = k.num("attention.value_length", hidden // heads)
    layers: list[Layout] = []
    for i in range(n):
        attention = FullAttention(dtype=FP16, kv_heads=kv_heads[i], k_dim=head_k, v_dim=head_v)
        if arch == "falcon-h1":
            layers.append(ParallelHybrid(dtype=FP16, attention=attention, mixer=state))
        elif ffs[i]:
            layers.append(NoCache(dtype=FP16))
        else:
            layers.append(state if recurrent[i] else attention)
    n_recr = sum(isinstance(x, RecurrentState) for x in layers)
    n_attn = sum(x.bytes_per_token > 0 for x in layers)
    prov["layer pattern"] = (
        f"{arch}: {n_attn} attention and {n_recr} {HYBRIDS[arch]} layers "
        f"({_rule(arch)}), state from {arch}.{'shortconv' if arch == 'lfm2' else 'ssm'}.* in float32"
    )
    return layers


def _rule(arch: str) -> str:
    if arch == "falcon-h1":
        return "both in every layer"
    if arch in _GDN:
        return "recurrent per attention.recurrent_layers or full_attention_interval"
    if arch == "nemotron_h":
        return "recurrent where head_count_kv and feed_forward_length are 0, MLP where the latter is set"
    return "recurrent where attention.head_count_kv is 0"


def _recurrent_flags(
    k: GgufKeys, n: int, total: int, kv_heads: tuple[int, ...]
) -> tuple[bool, ...]:
    if k.arch == "falcon-h1":
        return (True,) * n
    if k.arch not in _GDN:
        return tuple(kv_heads[i] == 0 for i in range(n))
    flags = k.raw("attention.recurrent_layers")
    if flags is not None:
        if (
            not isinstance(flags, tuple)
            or len(flags) != total
            or not all(isinstance(x, bool) for x in flags)
        ):
            raise k.bad("attention.recurrent_layers", flags, f"{total} booleans, one per layer")
        return flags[:n]
    period = k.num("full_attention_interval", 4, minimum=1)
    return tuple((i + 1) % period != 0 for i in range(n))


def _state(k: GgufKeys, hidden: int) -> RecurrentState:
    arch = k.arch
    if arch == "lfm2":
        return ShortConvState(dtype=FP32, ssm_dtype=FP32, conv_dim=hidden,
                              conv_kernel=k.num("shortconv.l_cache", minimum=2))  # fmt: skip
    conv = k.num("ssm.conv_kernel", minimum=1)
    inner = k.num("ssm.inner_size", minimum=1)
    d_state = k.num("ssm.state_size", minimum=1)
    rank = k.num("ssm.time_step_rank", minimum=1)
    if arch == "jamba":
        return Mamba1State(dtype=FP32, ssm_dtype=FP32, conv_kernel=conv, intermediate_size=inner,
                           state_size=d_state)  # fmt: skip
    groups = k.num("ssm.group_count", minimum=1)
    if inner % rank:
        raise k.bad("ssm.time_step_rank", rank, f"a divisor of ssm.inner_size ({inner})")
    if arch in _GDN:
        return GatedDeltaNetState(dtype=FP32, ssm_dtype=FP32, conv_kernel=conv, num_k_heads=groups,
                                  num_v_heads=rank, head_k_dim=d_state, head_v_dim=inner // rank)  # fmt: skip
    return Mamba2State(dtype=FP32, ssm_dtype=FP32, conv_kernel=conv, intermediate_size=inner,
                       n_groups=groups, state_size=d_state, num_heads=rank, head_dim=inner // rank)  # fmt: skip


def llama4_layers(
    k: GgufKeys, n: int, kv_heads: tuple[int, ...], head_k: int, head_v: int, prov: dict[str, str]
) -> list[Layout]:
    """Llama 4's chunked and full layers as ``llama_model_llama4::load_arch_hparams`` sets them."""
    window = k.raw("attention.sliding_window")
    if window is not None and k.num("attention.sliding_window") == 0:
        flags: tuple[bool, ...] = (False,) * n
        how = "attention.sliding_window = 0: no chunks, every layer full"
    else:
        pattern = k.raw("attention.sliding_window_pattern")
        if isinstance(pattern, tuple):
            if len(pattern) < n or not all(isinstance(x, bool) for x in pattern):
                raise k.bad("attention.sliding_window_pattern", pattern, f"{n} booleans")
            flags, how = tuple(pattern[:n]), "per-layer pattern"
        else:
            period = k.num("attention.sliding_window_pattern", LLAMA4_PERIOD)
            flags = tuple(period == 0 or i % period < period - 1 for i in range(n))
            how = f"every {period}th layer full"
        how = f"chunks of {LLAMA4_CHUNK:,} tokens (llama.cpp's, whatever the file says), {how}"
    layers: list[Layout] = [
        ChunkedLocal(dtype=FP16, kv_heads=kv_heads[i], k_dim=head_k, v_dim=head_v,
                     chunk_size=LLAMA4_CHUNK)
        if flags[i]
        else FullAttention(dtype=FP16, kv_heads=kv_heads[i], k_dim=head_k, v_dim=head_v)
        for i in range(n)
    ]  # fmt: skip
    prov["layer pattern"] = f"llama4: {sum(flags)} chunked, {n - sum(flags)} full; {how}"
    return layers
