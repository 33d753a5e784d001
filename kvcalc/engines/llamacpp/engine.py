"""llama.cpp: one cell per token per stream; interleaved-SWA models get a second, smaller cache.

``latest`` is llama.cpp commit ``0c1e570`` (2026-10-01), the one vendored by llama-cpp-python
0.3.36, read in ``src/llama-context.cpp``, ``llama-kv-cache.cpp``, ``llama-kv-cache-iswa.cpp``,
``llama-model.cpp`` and checked by ``kvcalc verify --engine llamacpp --run`` against that build:

- ``n_batch = min(n_ctx, n_batch)`` (the requested ``n_ctx``, before padding), ``n_ubatch =
  min(n_batch, n_ubatch)``; then ``n_ctx = GGML_PAD(n_ctx, 256)``;
- unified KV: ``n_ctx_seq = n_ctx``, one stream; otherwise ``n_ctx_seq = GGML_PAD(n_ctx /
  n_seq_max, 256)``, ``n_ctx = n_ctx_seq · n_seq_max`` ("rounding down" warning) and
  ``n_seq_max`` streams (one stream when ``n_seq_max`` is 1); every cache has ``n_ctx_seq`` cells
  per stream (``n_pad`` is 1 since the context pads);
- SWA cache: ``GGML_PAD(min(n_ctx_seq, n_swa · (unified ? n_seq_max : 1) + n_ubatch), 256)``, or
  ``n_ctx_seq`` with ``swa_full`` (llama-cli/llama-server default false; the C library's
  ``llama_context_default_params`` says true); Llama 4's chunked layers the same with the
  8,192-token chunk and 3-chunked-1-full pattern its loader fixes (others refused);
- per layer: K ``ggml_row_size(type_k, heads · head_dim_k) · cells · streams``, V likewise; without
  flash attention V is stored transposed with the widest layer's width (``n_embd_v_gqa_max``);
  MLA (DeepSeek-2 family) has **no V tensor** (``has_v = !is_mla``), K ``kv_lora_rank + rope`` wide;
- a quantized V cache needs flash attention (``flash_attn`` ``auto`` turns it on and says so,
  ``off`` fails); with flash attention a quantized type's block must divide each head's width;
  MLA needs ``type_k == type_v``;
- offloading: with ``n_gpu_layers = N`` (default all) layer ``i`` is on the GPU when ``i >=
  n_layer + 1 − N``; the KV of the other layers (and all of it with ``offload_kqv`` false,
  ``--no-kv-offload``) is in a ``CPU`` buffer — host memory, not counted against the GPU.

Version ``"b5452"`` (May 2025, the llamacpp-13703 record): one unified cache of ``n_ctx`` cells
padded to 256 with flash attention (32 without), ``n_ctx_per_seq = n_ctx / n_seq_max``, SWA size
``min(n_ctx, GGML_PAD(n_swa · n_seq_max + n_batch, n_pad))``, log prefixes
``llama_kv_cache_unified``. **Unconfirmed** there: the MLA V width (512 assumed).

Capacity: ``kv_cache_tokens`` is the full-attention cells (all streams). One request fits when
``max_model_len <= n_ctx_seq`` and the GPU part of the cache fits ``available_kv_bytes``;
``max_concurrency`` is ``n_seq_max`` slots for separate streams, ``min(n_seq_max, cells / L)`` for a
unified cache. Mamba-2 models keep one recurrent state cell per sequence, hybrids (Granite-4.0-H,
Nemotron-H) a KV cache beside it (:mod:`kvcalc.engines.llamacpp.recurrent`); the compute buffer is
:mod:`kvcalc.engines.llamacpp.compute`'s. Not modelled: the other hybrids (refused by name),
several GPUs, llama-server's automatic choices (``-np`` unset means 4 unified slots; ``--fit`` may
shrink ``-c``) — pass ``n_seq_max`` and ``kv_unified`` as the server ends up using them.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan, MemoryInputs
from kvcalc.engines.common import binary_search_max_len
from kvcalc.engines.extra import check_extra, extra_bool, unknown_version
from kvcalc.engines.llamacpp.compute import ComputeBuffer, ComputeInputs, compute_buffer, why_not
from kvcalc.engines.llamacpp.context import (
    EXTRA_KEYS,
    GGML_TYPES,
    LATEST_COMMIT,
    VERSIONS,
    Cache,
    Context,
    _row_bytes,
    build_caches,
    cache_types,
    check_chunked,
    check_types,
    context,
    ggml_name,
    is_iswa,
    on_host,
    refuse_fit,
)
from kvcalc.engines.llamacpp.log import log_lines
from kvcalc.engines.llamacpp.recurrent import (
    PER_LAYER_KV_HEADS,
    RecurrentMemory,
    check_recurrent,
    has_recurrent,
    hybrid_arch,
    is_recurrent_only,
    recurrent_lines,
    recurrent_memory,
)
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.errors import InputError
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import LayerKind

__all__ = ["EXTRA_KEYS", "GGML_TYPES", "LATEST_COMMIT", "VERSIONS", "Cache", "Context", "LlamaCppEngine",
           "build_caches", "cache_types", "check_types", "context", "ggml_name", "is_iswa", "on_host"]  # fmt: skip


class LlamaCppEngine:
    name = "llamacpp"
    versions = VERSIONS

    def default_gpu_memory_utilization(self, memory: MemoryInputs) -> float | None:
        return None  # llama.cpp sizes the cache from n_ctx, not from a memory fraction

    def available_kv_bytes(self, memory: MemoryInputs) -> int:
        """Device memory minus weights, compute buffers and the CUDA context (no fraction)."""
        return memory.total_memory_bytes - memory.non_kv_bytes

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        refuse_fit(request.extra)
        refuse_unmodelled(self.name, request.model)
        version = request.engine_version or VERSIONS[0]
        if version not in VERSIONS:
            raise unknown_version(self.name, version, VERSIONS)
        if request.tensor_parallel_size > 1 or request.pipeline_parallel_size > 1:
            raise InputError("llama.cpp has no tensor/pipeline parallel KV split to model",
                             code="invalid-parallelism")  # fmt: skip
        type_k, type_v = cache_types(request)
        model = request.model
        recurrent = None
        if has_recurrent(model):
            check_recurrent(model, version, LATEST_COMMIT)
        check_chunked(model)
        iswa = is_iswa(model)
        ctx = context(request, version, model, iswa, type_v)
        check_types(model, ctx, type_k, type_v)
        caches: list[Cache] = []
        if has_recurrent(model):  # a hybrid's KV cache is built first, then the recurrent memory
            recurrent = recurrent_memory(model, ctx.n_seq_max, on_host(request, model))
        if not is_recurrent_only(model):
            caches = build_caches(request, model, ctx, type_k, type_v, version, iswa)
        plan = _plan(request, version, ctx, caches, type_k, type_v, recurrent)
        if request.extra.get("buffer_name") == "CPU":
            buffer, _ = self.compute_buffer(request)
            if buffer is not None:  # sched_reserve prints it after the caches' lines
                plan = replace(plan, log_lines=(*plan.log_lines, compute_line("CPU", buffer.bytes)))
        return plan

    def compute_buffer(self, request: EngineRequest) -> tuple[ComputeBuffer | None, str]:
        """The compute buffer ``sched_reserve`` allocates for this context, as the CPU backend
        sizes it (:mod:`kvcalc.engines.llamacpp.compute`), or ``None`` and the reason."""
        if (request.engine_version or VERSIONS[0]) != "latest":
            return None, f"the compute buffer is modelled for llama.cpp {LATEST_COMMIT} only"
        type_k, type_v = cache_types(request)
        model = request.model
        reason = why_not(model, type_k, type_v)
        if reason is not None:
            return None, reason
        ctx = context(request, "latest", model, is_iswa(model), type_v)
        buffer = compute_buffer(model, compute_inputs(ctx), type_k, type_v)
        if buffer is None:
            return None, "not modelled"
        where = str(request.extra.get("buffer_name", "CUDA0"))
        figure = (f"llama.cpp compute buffer {buffer.bytes:,} B ({buffer.bytes / 2**20:.2f} MiB): the "
                  f"{buffer.n_tokens}-token worst-case graph as sched_reserve sizes it on the CPU backend")  # fmt: skip
        if where == "CPU":
            note = f"{figure} (checked against llama.cpp {LATEST_COMMIT} on the CPU)"
        else:
            note = (f"{figure}; on {where} the CUDA backend sizes its own buffer, which differs and is "
                    f"not confirmed: an estimate here")  # fmt: skip
        return replace(buffer, note=note), ""


def _server_note(request: EngineRequest, memory_ok: bool) -> str:
    """What llama-server would do beside the plan (its defaults at this version)."""
    slots = ("-np unset: 4 slots sharing one unified cache (llama-server's auto)"
             if "n_seq_max" not in request.extra else "slots as given")  # fmt: skip
    if request.extra.get("fit", "on" if "n_ctx" not in request.extra else "off") == "off":
        return f"llama-server: {slots}"
    fit = ("--fit (on by default) leaves -c as is when it fits" if memory_ok else
           "--fit (on by default) would lower -c (not below 4096) until it fits instead of failing; "
           "kvcalc does not model by how much (give -E fit=off or the n_ctx llama.cpp prints)")  # fmt: skip
    return f"llama-server: {slots}; {fit}"


def compute_inputs(ctx: Context) -> ComputeInputs:
    return ComputeInputs(n_ubatch=ctx.n_ubatch, n_batch=ctx.n_batch, n_seq_max=ctx.n_seq_max, kv_size=ctx.kv_size,
                         n_stream=ctx.n_stream, kv_unified=ctx.kv_unified, flash_attn=ctx.flash_attn,
                         swa_kv_size=ctx.swa_size)  # fmt: skip


def compute_line(buffer_name: str, num_bytes: int) -> str:
    """``sched_reserve``'s line for one backend's compute buffer."""
    return f"sched_reserve: {buffer_name:>10} compute buffer size = {num_bytes / 1024.0 / 1024.0:8.2f} MiB"


def _plan(
    request: EngineRequest,
    version: str,
    ctx: Context,
    caches: list[Cache],
    type_k: CacheDtype,
    type_v: CacheDtype,
    recurrent: RecurrentMemory | None = None,
) -> KvCachePlan:
    L = request.max_model_len
    rs = recurrent.r_bytes + recurrent.s_bytes if recurrent else 0
    kv_bytes = sum(c.k_bytes + c.v_bytes for c in caches) + rs
    host_bytes = sum(c.host_bytes for c in caches) + (recurrent.host_bytes if recurrent else 0)
    device_bytes = kv_bytes - host_bytes
    cells = ctx.kv_size * ctx.n_stream
    if ctx.n_stream == 1 and version != "b5452":
        concurrency = min(float(ctx.n_seq_max), cells / L) if L <= ctx.n_ctx_seq else 0.0
    else:
        concurrency = float(ctx.n_seq_max) if L <= ctx.n_ctx_seq else 0.0
    memory_ok = device_bytes <= request.available_kv_bytes
    fits = L <= ctx.n_ctx_seq and memory_ok
    state_device = recurrent.r_bytes + recurrent.s_bytes - recurrent.host_bytes if recurrent else 0
    if recurrent is not None and not caches:  # one cell per sequence: the state does not grow
        concurrency = float(ctx.n_seq_max) if L <= ctx.n_ctx_seq else 0.0
        estimate = None if fits else (ctx.n_ctx_seq if memory_ok else 0)
    else:  # a hybrid's KV cache grows with the context beside its fixed recurrent state
        estimate = (
            None
            if fits
            else _estimate(request, version, ctx, type_k, type_v, memory_ok, state_device)
        )
    # the context fails to allocate its cache (llama_init_from_model): nothing runs
    if not memory_ok:
        concurrency = 0.0
    notes = [
        f"{ctx.n_seq_max} sequence slot(s), {ctx.n_stream} stream(s), {ctx.n_ctx_seq:,} cells per slot"
    ]
    if version == "latest":
        notes.append(f"llama.cpp {LATEST_COMMIT} (llama-cpp-python 0.3.36)")
    if host_bytes:
        notes.append(
            f"{host_bytes:,} B of the KV cache are in host memory (layers left on the CPU)"
        )
    if not memory_ok:
        notes.append(
            f"the cache needs {device_bytes:,} B but {request.available_kv_bytes:,} B are available"
        )
    if extra_bool(request.extra, "server", False):
        notes.append(_server_note(request, memory_ok))
    per_token = sum(
        sum(_row_bytes(request.model.layers[i], type_k, type_v, version))
        for c in caches
        for i in c.layers
    )
    groups = tuple(
        KvCacheGroup(kind=LayerKind(request.model.layers[c.layers[0]].kind) if c.label == "SWA" and c.layers
                     else LayerKind.FULL, num_layers=len(c.layers),
                     page_bytes=(c.k_bytes + c.v_bytes) // max(1, len(c.layers) * c.cells * ctx.n_stream),
                     block_size=1, blocks_per_request=min(L, c.cells), num_blocks=c.cells * ctx.n_stream,
                     layer_indices=c.layers)
        for c in caches
    )  # fmt: skip
    zero_heads = hybrid_arch(request.model) in PER_LAYER_KV_HEADS  # head_count_kv 0 off attention
    lines = log_lines(
        request, version, ctx, caches, ggml_name(type_k), ggml_name(type_v), zero_heads
    )
    if recurrent is not None:
        device = str(request.extra.get("buffer_name", "CUDA0"))
        lines += recurrent_lines(recurrent, device, request.model.num_layers, ctx.n_seq_max)
        groups += (KvCacheGroup(kind=LayerKind.RECURRENT, num_layers=len(recurrent.layers),
                                page_bytes=rs // max(1, len(recurrent.layers) * recurrent.cells), block_size=1,
                                blocks_per_request=1, num_blocks=recurrent.cells,
                                layer_indices=recurrent.layers),)  # fmt: skip
        notes.append(f"recurrent state: {recurrent.cells} cell(s) (one per sequence), "
                     f"{rs // recurrent.cells:,} B each, float32")  # fmt: skip
    # one request of L tokens holds min(L, cells per slot) cells in each cache (and one recurrent
    # cell); the fit check above compares the whole pool, which llama.cpp allocates up front
    per_request = sum(g.page_bytes * g.num_layers * g.blocks_per_request for g in groups)
    return KvCachePlan(
        engine="llamacpp", engine_version=version, kv_cache_dtype=ggml_name(type_k), block_size=1,
        num_blocks=cells, kv_cache_bytes=device_bytes, kv_cache_tokens=cells, max_concurrency=concurrency,
        kv_bytes_per_token=per_token, bytes_per_request=per_request, fits=fits, estimated_max_model_len=estimate,
        groups=groups, log_lines=tuple(lines), notes=tuple(notes), max_model_len=L,
        available_kv_bytes=request.available_kv_bytes, fit_budget_bytes=request.available_kv_bytes,
    )  # fmt: skip


def _estimate(
    request: EngineRequest,
    version: str,
    ctx: Context,
    type_k: CacheDtype,
    type_v: CacheDtype,
    memory_ok: bool,
    state_bytes: int = 0,
) -> int:
    """The longest per-slot context whose cache (same slots) fits the available memory beside
    ``state_bytes`` of recurrent state (a hybrid's, on the device)."""
    if memory_ok:
        return ctx.n_ctx_seq
    model, iswa = request.model, is_iswa(request.model)
    slots = 1 if ctx.n_stream == 1 and version != "b5452" else ctx.n_seq_max

    def fits(length: int) -> bool:
        probe = replace(request, extra={**request.extra, "n_ctx": length * slots})
        c = context(probe, version, model, iswa, type_v)
        size = sum(x.k_bytes + x.v_bytes - x.host_bytes
                   for x in build_caches(probe, model, c, type_k, type_v, version, iswa))  # fmt: skip
        return size + state_bytes <= request.available_kv_bytes

    return binary_search_max_len(request.max_model_len, fits)
