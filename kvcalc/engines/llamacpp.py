"""llama.cpp: one cell per token per stream; interleaved-SWA models get a second, smaller cache.

Newest sources (``src/llama-context.cpp``, ``llama-kv-cache.cpp``, ``llama-kv-cache-iswa.cpp``,
read through copies found by exact-string search, and the engine-accounting doc §3):

- ``n_ctx = GGML_PAD(n_ctx, 256)``; unified KV: ``n_ctx_seq = n_ctx``, one stream; otherwise
  ``n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256)``, ``n_ctx = n_ctx_seq · n_seq_max`` ("rounding down"
  warning) and ``n_seq_max`` streams; each cache gets ``kv_size = n_ctx_seq`` cells per stream;
- SWA cache: ``GGML_PAD(min(kv_size, n_swa · (unified ? n_seq_max : 1) + n_ubatch), 256)``, or
  ``kv_size`` with ``--swa-full``;
- bytes per layer per cell: ``row_size(type_k, heads·head_dim_k) + row_size(type_v, heads·head_dim_v)``;
  MLA (DeepSeek2 family) has **no V tensor** (``has_v = !is_mla``), K is ``kv_lora_rank + rope`` wide.

Version ``"b5452"`` (May 2025, the llamacpp-13703 record): one unified cache of ``n_ctx`` cells
padded to 256 with flash attention (32 without), ``n_ctx_per_seq = n_ctx / n_seq_max``, SWA size
``min(n_ctx, GGML_PAD(n_swa · n_seq_max + n_batch, n_pad))`` (a copy of that era's
``llama_kv_cache_unified_iswa`` reads ``n_batch``; later ones ``n_ubatch``), log prefixes
``llama_kv_cache_unified``. **Unconfirmed** there: the MLA V width (512 assumed).

Capacity: ``kv_cache_tokens`` is the full-attention cells (all streams). One request fits when
``max_model_len <= n_ctx_seq`` (a slot's context) and the cache fits ``available_kv_bytes``;
``max_concurrency`` is ``n_seq_max`` slots for separate streams, and ``min(n_seq_max, cells / L)``
for a unified cache. Not modelled: recurrent layers (``llama_memory_recurrent``), KV on several
devices, tensor alignment padding in buffer sizes, plain-sliding models (booked full, as for
architectures without SWA support).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kvcalc.engines.base import (
    EngineRequest,
    KvCacheGroup,
    KvCachePlan,
    binary_search_max_len,
    check_extra,
    extra_bool,
    extra_int,
    unknown_version,
)
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.errors import InputError
from kvcalc.model.dtypes import FP16, CacheDtype, parse_cache_dtype
from kvcalc.model.layouts import Layout, MLALatent, RecurrentState
from kvcalc.model.shape import ModelShape
from kvcalc.units import round_up

VERSIONS = ("latest", "b5452")
EXTRA_KEYS = (
    "n_ctx",
    "n_seq_max",
    "n_ubatch",
    "n_batch",
    "kv_unified",
    "swa_full",
    "flash_attn",
    "type_v",
    "buffer_name",
)
#: ggml cache types (``-ctk``/``-ctv``)
GGML_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
_GGML_NAME = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}


@dataclass(frozen=True, kw_only=True)
class _Context:
    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    n_seq_max: int
    kv_size: int
    swa_size: int
    warning: str | None


@dataclass(frozen=True, kw_only=True)
class _Cache:
    label: str  # "non-SWA" / "SWA" / "" (single cache)
    cells: int  # per stream
    layers: tuple[int, ...]
    k_bytes: int  # all layers, all streams
    v_bytes: int


class LlamaCppEngine:
    name = "llamacpp"
    versions = VERSIONS

    def default_gpu_memory_utilization(
        self,
        version: str | None = None,
        *,
        gpu_memory_bytes: int | None = None,
        tensor_parallel_size: int = 1,
    ) -> float | None:
        return None  # llama.cpp sizes the cache from n_ctx, not from a memory fraction

    def available_kv_bytes(
        self, *, total_memory_bytes: int, utilization: float | None, weights_bytes: int,
        activation_bytes: int, non_torch_bytes: int, cudagraph_bytes: int, version: str | None,
        tensor_parallel_size: int,
    ) -> int:  # fmt: skip
        """Device memory minus weights, compute buffers and the CUDA context (no fraction)."""
        return (
            total_memory_bytes
            - weights_bytes
            - activation_bytes
            - non_torch_bytes
            - cudagraph_bytes
        )

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        refuse_unmodelled(self.name, request.model)
        version = request.engine_version or VERSIONS[0]
        if version not in VERSIONS:
            raise unknown_version(self.name, version, VERSIONS)
        if request.tensor_parallel_size > 1 or request.pipeline_parallel_size > 1:
            raise InputError("llama.cpp has no tensor/pipeline parallel KV split to model",
                             code="invalid-parallelism")  # fmt: skip
        type_k, type_v = _types(request)
        model = request.model
        if any(isinstance(x, RecurrentState) for x in model.layers):
            raise InputError("llama.cpp recurrent memory is not modelled", code="unsupported-model")
        iswa = _is_iswa(model)
        ctx = _context(request, version, model, iswa)
        caches = _caches(model, ctx, type_k, type_v, version, iswa)
        return _plan(request, version, ctx, caches, type_k, type_v)


def _types(request: EngineRequest) -> tuple[CacheDtype, CacheDtype]:
    def one(name: str) -> CacheDtype:
        key = name.strip().lower()
        if key == "auto":
            return FP16  # llama.cpp's default cache type, whatever the weights
        dtype = parse_cache_dtype(key)
        if dtype is None or _GGML_NAME.get(dtype.name, dtype.name) not in GGML_TYPES:
            raise InputError(f"llama.cpp has no cache type {name!r}", hint="choose one of: " + ", ".join(GGML_TYPES),
                             code="unsupported-dtype")  # fmt: skip
        return dtype

    type_k = one(request.kv_cache_dtype)
    return type_k, one(str(request.extra.get("type_v", request.kv_cache_dtype)))


def ggml_name(dtype: CacheDtype) -> str:
    return _GGML_NAME.get(dtype.name, dtype.name)


def _is_iswa(model: ModelShape) -> bool:
    kinds = set(model.kinds)
    return bool(kinds & {"sliding", "chunked"}) and bool(kinds & {"full", "mla"})


def _window(model: ModelShape) -> int:
    return max(x.window or 0 for x in model.layers if x.kind in ("sliding", "chunked"))


def _context(request: EngineRequest, version: str, model: ModelShape, iswa: bool) -> _Context:
    x = request.extra
    n_ctx = extra_int(x, "n_ctx", request.max_model_len)
    n_seq = extra_int(x, "n_seq_max", 1)
    ubatch = extra_int(x, "n_ubatch", 512)
    flash = extra_bool(x, "flash_attn", True)
    warning = None
    if version == "b5452":
        pad = 256 if flash else 32
        n_ctx = round_up(n_ctx, pad)
        swa = (
            min(n_ctx, round_up(_window(model) * n_seq + extra_int(x, "n_batch", 2048), pad))
            if iswa
            else 0
        )
        return _Context(n_ctx=n_ctx, n_ctx_seq=n_ctx // n_seq, n_stream=1, n_seq_max=n_seq,
                        kv_size=n_ctx, swa_size=swa, warning=None)  # fmt: skip
    n_ctx = round_up(n_ctx, 256)
    unified = extra_bool(x, "kv_unified", False)
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
        swa = round_up(min(ctx_seq, _window(model) * (n_seq if streams == 1 else 1) + ubatch), 256)
    if extra_bool(x, "swa_full", False):
        swa = ctx_seq if iswa else 0
    return _Context(n_ctx=n_ctx, n_ctx_seq=ctx_seq, n_stream=streams, n_seq_max=n_seq,
                    kv_size=ctx_seq, swa_size=swa, warning=warning)  # fmt: skip


def _row_bytes(
    layer: Layout, type_k: CacheDtype, type_v: CacheDtype, version: str
) -> tuple[int, int]:
    """K and V bytes of one cell in one layer: rows of ``heads · head_dim`` values."""
    if isinstance(layer, MLALatent):
        v = type_v.row_bytes(layer.kv_lora_rank) if version == "b5452" else 0
        return type_k.row_bytes(layer.latent_dim), v
    return (type_k.row_bytes(layer.num_kv_heads * layer.head_dim_k),
            type_v.row_bytes(layer.num_kv_heads * layer.head_dim_v))  # fmt: skip


def _caches(
    model: ModelShape,
    ctx: _Context,
    type_k: CacheDtype,
    type_v: CacheDtype,
    version: str,
    iswa: bool,
) -> list[_Cache]:
    def build(label: str, cells: int, swa: bool) -> _Cache:
        layers = tuple(i for i, x in enumerate(model.layers)
                       if x.bytes_per_token and (x.kind in ("sliding", "chunked")) == swa)  # fmt: skip
        if not iswa:
            layers = tuple(i for i, x in enumerate(model.layers) if x.bytes_per_token)
        rows = [_row_bytes(model.layers[i], type_k, type_v, version) for i in layers]
        total = cells * ctx.n_stream
        return _Cache(label=label, cells=cells, layers=layers,
                      k_bytes=sum(k for k, _ in rows) * total, v_bytes=sum(v for _, v in rows) * total)  # fmt: skip

    if not iswa:
        return [build("", ctx.kv_size, False)]
    return [build("non-SWA", ctx.kv_size, False), build("SWA", ctx.swa_size, True)]


def _plan(
    request: EngineRequest,
    version: str,
    ctx: _Context,
    caches: list[_Cache],
    type_k: CacheDtype,
    type_v: CacheDtype,
) -> KvCachePlan:
    L = request.max_model_len
    kv_bytes = sum(c.k_bytes + c.v_bytes for c in caches)
    cells = ctx.kv_size * ctx.n_stream
    if ctx.n_stream == 1 and version != "b5452":
        concurrency = min(float(ctx.n_seq_max), cells / L) if L <= ctx.n_ctx_seq else 0.0
    else:
        concurrency = float(ctx.n_seq_max) if L <= ctx.n_ctx_seq else 0.0
    memory_ok = kv_bytes <= request.available_kv_bytes
    fits = L <= ctx.n_ctx_seq and memory_ok
    estimate = None if fits else _estimate(request, version, ctx, type_k, type_v, memory_ok)
    notes = [
        f"{ctx.n_seq_max} sequence slot(s), {ctx.n_stream} stream(s), {ctx.n_ctx_seq:,} cells per slot"
    ]
    if not memory_ok:
        notes.append(
            f"the cache needs {kv_bytes:,} B but {request.available_kv_bytes:,} B are available"
        )
    per_token = sum(
        sum(_row_bytes(request.model.layers[i], type_k, type_v, version))
        for c in caches
        for i in c.layers
    )
    groups = tuple(
        KvCacheGroup(kind="sliding" if c.label == "SWA" else "full", num_layers=len(c.layers),
                     page_bytes=(c.k_bytes + c.v_bytes) // max(1, len(c.layers) * c.cells * ctx.n_stream),
                     block_size=1, blocks_per_request=min(L, c.cells), num_blocks=c.cells * ctx.n_stream,
                     layer_indices=c.layers)
        for c in caches
    )  # fmt: skip
    return KvCachePlan(
        engine="llamacpp", engine_version=version, kv_cache_dtype=ggml_name(type_k), block_size=1,
        num_blocks=cells, kv_cache_bytes=kv_bytes, kv_cache_tokens=cells, max_concurrency=concurrency,
        kv_bytes_per_token=per_token, bytes_per_request=kv_bytes, fits=fits, estimated_max_model_len=estimate,
        groups=groups, log_lines=tuple(_log_lines(request, version, ctx, caches, type_k, type_v)),
        notes=tuple(notes), max_model_len=L, available_kv_bytes=request.available_kv_bytes,
        fit_budget_bytes=request.available_kv_bytes,
    )  # fmt: skip


def _estimate(
    request: EngineRequest,
    version: str,
    ctx: _Context,
    type_k: CacheDtype,
    type_v: CacheDtype,
    memory_ok: bool,
) -> int:
    """The longest per-slot context whose cache (same slots) fits the available memory."""
    if memory_ok:
        return ctx.n_ctx_seq
    model, iswa = request.model, _is_iswa(request.model)
    slots = 1 if ctx.n_stream == 1 and version != "b5452" else ctx.n_seq_max

    def fits(length: int) -> bool:
        extra = {**request.extra, "n_ctx": length * slots}
        c = _context(_with_extra(request, extra), version, model, iswa)
        size = sum(x.k_bytes + x.v_bytes for x in _caches(model, c, type_k, type_v, version, iswa))
        return size <= request.available_kv_bytes

    return binary_search_max_len(request.max_model_len, fits)


def _with_extra(request: EngineRequest, extra: dict) -> EngineRequest:
    from dataclasses import replace

    return replace(request, extra=extra)


def _f32_mib(num_bytes: int) -> float:
    """``(float)bytes / (1024.0f * 1024.0f)``: llama.cpp formats the cache sizes in float32."""
    as_f32 = struct.unpack("f", struct.pack("f", float(num_bytes)))[0]
    return struct.unpack("f", struct.pack("f", as_f32 / 1048576.0))[0]


def _log_lines(
    request: EngineRequest,
    version: str,
    ctx: _Context,
    caches: list[_Cache],
    type_k: CacheDtype,
    type_v: CacheDtype,
) -> list[str]:
    old = version == "b5452"
    kv, iswa = (
        ("llama_kv_cache_unified", "llama_kv_cache_unified_iswa")
        if old
        else ("llama_kv_cache", "llama_kv_cache_iswa")
    )
    buffer = str(request.extra.get("buffer_name", "CUDA0"))
    lines = [ctx.warning] if ctx.warning else []
    lines += [f"llama_context: n_seq_max     = {ctx.n_seq_max}", f"llama_context: n_ctx         = {ctx.n_ctx}",
              f"llama_context: n_ctx_per_seq = {ctx.n_ctx_seq}" if old else f"llama_context: n_ctx_seq     = {ctx.n_ctx_seq}"]  # fmt: skip
    for cache in caches:
        if cache.label:
            lines.append(f"{iswa}: creating {cache.label:>7} KV cache, size = {cache.cells} cells")
        size = cache.k_bytes + cache.v_bytes
        seqs = "" if old else f", {ctx.n_seq_max:2d}/{ctx.n_stream} seqs"
        lines.append(f"{kv}: {buffer:>10} KV buffer size = {size / 1024.0 / 1024.0:8.2f} MiB")
        lines.append(
            f"{kv}: size = {_f32_mib(size):7.2f} MiB ({cache.cells:6d} cells, {len(cache.layers):3d} layers{seqs}), "
            f"K ({ggml_name(type_k)}): {_f32_mib(cache.k_bytes):7.2f} MiB, V ({ggml_name(type_v)}): {_f32_mib(cache.v_bytes):7.2f} MiB"
        )
    return lines
