"""llama.cpp's context and KV caches as ``llama_init_from_model`` settles them (see
:mod:`kvcalc.engines.llamacpp.engine` for the version and the rules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.extra import extra_bool, extra_choice, extra_int
from kvcalc.engines.formats import nearest, resolve_generic
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import FP16, CacheDtype, parse_cache_dtype
from kvcalc.model.layouts import WINDOWED_KINDS, LayerKind, Layout, MLALatent
from kvcalc.model.shape import ModelShape
from kvcalc.units import round_up

VERSIONS = ("latest", "b5452")
#: the llama.cpp commit ``latest`` models (vendored in llama-cpp-python 0.3.36)
LATEST_COMMIT = "0c1e570"
EXTRA_KEYS = (
    "n_ctx", "n_seq_max", "n_ubatch", "n_batch", "kv_unified", "swa_full", "flash_attn", "type_v",
    "buffer_name", "n_gpu_layers", "offload_kqv", "server", "fit",
)  # fmt: skip
#: llama-server with ``-np`` unset (``n_parallel = -1``, auto): ``tools/server/server.cpp`` sets
#: ``n_parallel = 4`` and ``kv_unified = true``
SERVER_AUTO_SLOTS = 4
#: ggml cache types (``-ctk``/``-ctv``)
GGML_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
_GGML_NAME = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
FLASH_CHOICES = ("auto", "on", "off")


@frozen
class Context:
    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    n_seq_max: int
    n_ubatch: int
    #: ``cparams.n_batch`` (no larger than the requested context)
    n_batch: int
    kv_unified: bool
    kv_size: int
    swa_size: int
    flash_attn: bool
    #: flash attention turned on because V is quantized (``auto``)
    flash_forced: bool
    swa_full: bool
    warning: str | None


@frozen
class Cache:
    label: str  # "non-SWA" / "SWA" / "" (single cache)
    cells: int  # per stream
    layers: tuple[int, ...]
    k_bytes: int  # all layers, all streams
    v_bytes: int
    #: the part of k_bytes + v_bytes in host (CPU) buffers
    host_bytes: int = 0


def cache_types(request: EngineRequest) -> tuple[CacheDtype, CacheDtype]:
    def one(name: str) -> CacheDtype:
        key = resolve_generic("llamacpp", name, ("auto", *GGML_TYPES))  # int8 → q8_0
        if key == "auto":
            return FP16  # llama.cpp's default cache type, whatever the weights
        dtype = parse_cache_dtype(key)
        if dtype is None or _GGML_NAME.get(dtype.name, dtype.name) not in GGML_TYPES:
            raise InputError(f"llama.cpp has no cache type {name!r}", hint=nearest("llamacpp", key, GGML_TYPES) + "choose one of: " + ", ".join(GGML_TYPES),
                             code="unsupported-dtype")  # fmt: skip
        return dtype

    type_k = one(request.kv_cache_dtype)
    return type_k, one(str(request.extra.get("type_v", request.kv_cache_dtype)))


def ggml_name(dtype: CacheDtype) -> str:
    return _GGML_NAME.get(dtype.name, dtype.name)


def is_iswa(model: ModelShape) -> bool:
    kinds = set(model.kinds)
    return bool(kinds & set(WINDOWED_KINDS)) and bool(kinds & {LayerKind.FULL, LayerKind.MLA})


#: ``llama_model_llama4::load_arch_hparams``: chunked attention is always 8,192 tokens, in a
#: pattern of 3 chunked layers then 1 full (the converter writes neither), unless the GGUF
#: carries its own ``attention.sliding_window_pattern``
LLAMA4_CHUNK, LLAMA4_PERIOD = 8192, 4


def check_chunked(model: ModelShape) -> None:
    """Refuse a chunked-attention model whose chunk or layer pattern is not the one llama.cpp's
    ``llama4`` loader fixes: llama.cpp would book its own, not the model's."""
    kinds = [LayerKind(x.kind) for x in model.layers]
    if LayerKind.CHUNKED not in kinds:
        return
    chunks = sorted(
        {x.window or 0 for x, k in zip(model.layers, kinds, strict=True) if k is LayerKind.CHUNKED}
    )
    if chunks != [LLAMA4_CHUNK]:
        raise InputError(f"llama.cpp's llama4 loader fixes the attention chunk at {LLAMA4_CHUNK:,} tokens "
                         f"(n_swa); this model chunks at {', '.join(f'{c:,}' for c in chunks)}",
                         hint="llama.cpp would cache its own chunk, not the model's: not planned",
                         code="unsupported-model")  # fmt: skip
    pattern = [LayerKind.CHUNKED if i % LLAMA4_PERIOD < LLAMA4_PERIOD - 1 else LayerKind.FULL
               for i in range(len(kinds))]  # fmt: skip
    if kinds != pattern:
        raise InputError("llama.cpp's llama4 loader makes every 4th layer full and the others chunked "
                         "(its converter writes no pattern); this model's layers differ",
                         hint="llama.cpp would cache its own pattern, not the model's: not planned",
                         code="unsupported-model")  # fmt: skip


def _window(model: ModelShape) -> int:
    return max(x.window or 0 for x in model.layers if x.kind in WINDOWED_KINDS)


def _flash(request: EngineRequest, type_v: CacheDtype) -> tuple[bool, bool]:
    """(flash attention on, turned on for the quantized V cache) — ``llama_init_from_model``."""
    raw = request.extra.get("flash_attn", "auto")
    choice = {True: "on", False: "off"}.get(raw, raw) if isinstance(raw, bool) else raw
    choice = extra_choice({"flash_attn": choice}, "flash_attn", "auto", FLASH_CHOICES)
    if type_v.is_quantized and choice == "off":
        raise InputError(f"llama.cpp: a quantized V cache ({ggml_name(type_v)}) requires flash attention",
                         hint="use -E flash_attn=auto (or on), or an f16 V cache (-E type_v=f16)",
                         code="unsupported-dtype")  # fmt: skip
    return choice != "off", type_v.is_quantized and choice == "auto"


def _int(extra: Mapping[str, Any], key: str, default: int) -> int:
    value = extra_int(extra, key, default)
    return default if value is None else value


def context(
    request: EngineRequest, version: str, model: ModelShape, iswa: bool, type_v: CacheDtype = FP16
) -> Context:
    x = request.extra
    asked = _int(x, "n_ctx", request.max_model_len)
    # llama-server's automatic slots: 4 sequences sharing one unified cache
    auto_slots = bool(extra_bool(x, "server", False)) and "n_seq_max" not in x
    n_seq = SERVER_AUTO_SLOTS if auto_slots else _int(x, "n_seq_max", 1)
    batch = _int(x, "n_batch", 2048)
    flash, forced = (
        _flash(request, type_v)
        if version != "b5452"
        else (extra_bool(x, "flash_attn", True), False)
    )
    swa_full = bool(extra_bool(x, "swa_full", False))
    if version == "b5452":
        pad = 256 if flash else 32
        n_ctx = round_up(asked, pad)
        swa = min(n_ctx, round_up(_window(model) * n_seq + batch, pad)) if iswa else 0
        return Context(n_ctx=n_ctx, n_ctx_seq=n_ctx // n_seq, n_stream=1, n_seq_max=n_seq,
                       n_ubatch=_int(x, "n_ubatch", 512), n_batch=batch, kv_unified=True,
                       kv_size=n_ctx, swa_size=swa,
                       flash_attn=bool(flash), flash_forced=False, swa_full=swa_full, warning=None)  # fmt: skip
    batch = min(asked, batch)  # with causal attention the batch is limited by the context
    ubatch = min(batch, _int(x, "n_ubatch", 512))
    n_ctx = round_up(asked, 256)
    unified = auto_slots or extra_bool(x, "kv_unified", False)
    warning = None
    if unified or n_seq == 1:
        ctx_seq, streams = n_ctx, 1
    else:
        ctx_seq, streams = round_up(n_ctx // n_seq, 256), n_seq
        if n_ctx != ctx_seq * n_seq:
            n_ctx = ctx_seq * n_seq
            warning = (
                f"llama_context: n_ctx is not divisible by n_seq_max - rounding down to {n_ctx}"
            )
    swa = 0
    if iswa:
        swa = round_up(min(ctx_seq, _window(model) * (n_seq if unified else 1) + ubatch), 256)
        if swa_full:
            swa = ctx_seq
    return Context(n_ctx=n_ctx, n_ctx_seq=ctx_seq, n_stream=streams, n_seq_max=n_seq, n_ubatch=ubatch,
                   n_batch=batch, kv_unified=bool(unified), kv_size=ctx_seq, swa_size=swa, flash_attn=bool(flash), flash_forced=forced,
                   swa_full=swa_full and iswa, warning=warning)  # fmt: skip


def check_types(model: ModelShape, ctx: Context, type_k: CacheDtype, type_v: CacheDtype) -> None:
    """``llama_init_from_model``'s refusals for these cache types."""
    if model.is_mla and type_k != type_v:
        raise InputError(f"llama.cpp: this model does not support different K ({ggml_name(type_k)}) and "
                         f"V ({ggml_name(type_v)}) cache types", hint="give one type (drop -E type_v)",
                         code="unsupported-dtype")  # fmt: skip
    if not ctx.flash_attn:
        return
    for side, dtype in (("K", type_k), ("V", type_v)):
        if not dtype.block_format:
            continue
        widths = {
            x.head_dim_k if side == "K" else x.head_dim_v for x in model.layers if x.bytes_per_token
        }
        bad = sorted(w for w in widths if w % dtype.block_values)
        if bad:
            raise InputError(f"llama.cpp: {side} cache type {ggml_name(dtype)} with block size "
                             f"{dtype.block_values} does not divide n_embd_head_{side.lower()}={bad[0]}",
                             hint="choose f16 or q8_0 with a head width that is a multiple of 32",
                             code="unsupported-dtype")  # fmt: skip


def _row_bytes(
    layer: Layout, type_k: CacheDtype, type_v: CacheDtype, version: str, v_width: int | None = None
) -> tuple[int, int]:
    """K and V bytes of one cell in one layer: rows of ``heads · head_dim`` values."""
    if isinstance(layer, MLALatent):
        v = type_v.row_bytes(layer.kv_lora_rank) if version == "b5452" else 0
        return type_k.row_bytes(layer.latent_dim), v
    v_values = layer.num_kv_heads * layer.head_dim_v if v_width is None else v_width
    return type_k.row_bytes(layer.num_kv_heads * layer.head_dim_k), type_v.row_bytes(v_values)


def on_host(request: EngineRequest, model: ModelShape) -> set[int]:
    """Layers whose KV sits in host memory (``n_gpu_layers``, ``offload_kqv``)."""
    n = model.num_layers
    if not extra_bool(request.extra, "offload_kqv", True):
        return set(range(n))
    ngl = extra_int(request.extra, "n_gpu_layers", None, minimum=0)
    if ngl is None:
        return set()
    start = max(n + 1 - ngl, 0)  # i_gpu_start: the +1 is the output layer
    return set(range(min(start, n)))


def build_caches(
    request: EngineRequest,
    model: ModelShape,
    ctx: Context,
    type_k: CacheDtype,
    type_v: CacheDtype,
    version: str,
    iswa: bool,
) -> list[Cache]:
    host = on_host(request, model)
    # [TAG_V_CACHE_VARIABLE] without flash attention V is transposed and as wide as the widest layer
    v_max = None
    if not ctx.flash_attn and version != "b5452" and not model.is_mla:
        v_max = max(x.num_kv_heads * x.head_dim_v for x in model.layers)

    def build(label: str, cells: int, swa: bool) -> Cache:
        layers = tuple(i for i, x in enumerate(model.layers)
                       if x.bytes_per_token and (not iswa or (x.kind in WINDOWED_KINDS) == swa))  # fmt: skip
        rows = [_row_bytes(model.layers[i], type_k, type_v, version, v_max) for i in layers]
        total = cells * ctx.n_stream
        host_bytes = sum(k + v for i, (k, v) in zip(layers, rows, strict=True) if i in host) * total
        return Cache(label=label, cells=cells, layers=layers, k_bytes=sum(k for k, _ in rows) * total,
                     v_bytes=sum(v for _, v in rows) * total, host_bytes=host_bytes)  # fmt: skip

    if not iswa:
        return [build("", ctx.kv_size, False)]
    return [build("non-SWA", ctx.kv_size, False), build("SWA", ctx.swa_size, True)]


def refuse_fit(extra: Mapping[str, Any]) -> None:
    """``--fit on`` (``-E fit=on``) is refused: kvcalc does not reproduce llama.cpp's search."""
    if extra_choice(extra, "fit", "off", ("on", "off")) == "on":
        raise InputError("llama.cpp's --fit is not modelled: common_fit_params loads the model without "
                         "allocating, measures each device's free memory and lowers the unset -c (not "
                         "below 4096) and -ngl until everything fits with --fit-target (1 GiB) to spare",
                         hint="plan the context llama.cpp settles on (its 'llama_context: n_ctx' line) with "
                         "-E n_ctx=N, or start llama.cpp with --fit off", code="unmodelled-option")  # fmt: skip
