"""The lines llama.cpp prints for its context and KV cache, in the modelled version's formats.

From ``llama_init_from_model`` / ``llama_context::llama_context`` (``"%s: n_ctx                 =
%u"``), ``llama_kv_cache_iswa`` (``"creating non-SWA KV cache, size = %u cells"``) and
``llama_kv_cache`` (``"%10s KV buffer size = %8.2f MiB"`` per buffer type, in ``strcmp`` order of
the buffer names, then ``"size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB,
V (%s): %7.2f MiB"``, its MiB computed in float32).
"""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvcalc.engines.base import EngineRequest
    from kvcalc.engines.llamacpp.context import Cache, Context

SWA_FULL_REF = "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055"
#: the lines above, as patterns (for picking them out of a real log)
PATTERNS = tuple(re.compile(p) for p in (
    r"^llama_init_from_model: enabling flash_attn since it is required for quantized V cache$",
    r"^llama_context: n_ctx is not divisible by n_seq_max",
    r"^llama_context: (n_seq_max|n_ctx|n_ctx_seq|n_ctx_per_seq) += \d+$",
    r"^llama_kv_cache(_unified)?(_iswa)?: using full-size SWA cache",
    r"^llama_kv_cache(_unified)?_iswa: creating +(non-)?SWA KV cache, size = \d+ cells$",
    r"^llama_kv_cache(_unified)?: +\S+ KV buffer size = +[0-9.]+ MiB$",
    r"^llama_kv_cache(_unified)?: size = ",
    r"^llama_kv_cache: the V embeddings have different sizes across layers and FA is not enabled",
    r"^llama_memory_recurrent: +\S+ RS buffer size = +[0-9.]+ MiB$",
    r"^llama_memory_recurrent: size = ",
))  # fmt: skip


def is_predicted_line(line: str) -> bool:
    """Whether ``line`` of a llama.cpp log is one kvcalc predicts."""
    return any(p.match(line) for p in PATTERNS)


def f32_mib(num_bytes: int) -> float:
    """``(float)bytes / (1024.0f * 1024.0f)``: llama.cpp formats the cache sizes in float32."""
    as_f32 = struct.unpack("f", struct.pack("f", float(num_bytes)))[0]
    return struct.unpack("f", struct.pack("f", as_f32 / 1048576.0))[0]


def _buffers(request: EngineRequest, cache: Cache) -> list[tuple[str, int]]:
    """(buffer name, bytes) of one cache, in llama.cpp's order (``strcmp`` of the names)."""
    device = str(request.extra.get("buffer_name", "CUDA0"))
    on_device = cache.k_bytes + cache.v_bytes - cache.host_bytes
    parts: dict[str, int] = {device: on_device} if on_device else {}
    if cache.host_bytes:
        parts["CPU"] = parts.get("CPU", 0) + cache.host_bytes
    return sorted(parts.items(), key=lambda kv: kv[0].encode())


def log_lines(
    request: EngineRequest,
    version: str,
    ctx: Context,
    caches: list[Cache],
    k_name: str,
    v_name: str,
    zero_heads: bool = False,
) -> list[str]:
    """``zero_heads``: the GGUF gives layers outside the cache 0 KV heads (a hybrid's per-layer
    ``head_count_kv``), so the V widths vary across layers in llama.cpp's eyes."""
    old = version == "b5452"
    kv, iswa = (
        ("llama_kv_cache_unified", "llama_kv_cache_unified_iswa")
        if old
        else ("llama_kv_cache", "llama_kv_cache_iswa")
    )
    lines = []
    if ctx.flash_forced:
        lines.append(
            "llama_init_from_model: enabling flash_attn since it is required for quantized V cache"
        )
    if ctx.warning:
        lines.append(ctx.warning)
    if old:
        lines += [f"llama_context: n_seq_max     = {ctx.n_seq_max}", f"llama_context: n_ctx         = {ctx.n_ctx}",
                  f"llama_context: n_ctx_per_seq = {ctx.n_ctx_seq}"]  # fmt: skip
    else:
        lines += [f"llama_context: {name:<21} = {value}" for name, value in
                  (("n_seq_max", ctx.n_seq_max), ("n_ctx", ctx.n_ctx), ("n_ctx_seq", ctx.n_ctx_seq))]  # fmt: skip
    if ctx.swa_full and not old:
        lines.append(f"{iswa}: using full-size SWA cache (ref: {SWA_FULL_REF})")
    widths = {x.num_kv_heads * x.head_dim_v for x in request.model.layers if x.bytes_per_token}
    widths |= {0} if zero_heads else set()
    pad_v = not old and not ctx.flash_attn and len(widths) > 1 and not request.model.is_mla
    for cache in caches:
        if cache.label:
            lines.append(f"{iswa}: creating {cache.label:>7} KV cache, size = {cache.cells} cells")
        if pad_v:  # [TAG_V_CACHE_VARIABLE], printed by each cache's constructor
            lines.append(f"{kv}: the V embeddings have different sizes across layers and FA is not "
                         f"enabled - padding V cache to {max(widths)}")  # fmt: skip
        size = cache.k_bytes + cache.v_bytes
        seqs = "" if old else f", {ctx.n_seq_max:2d}/{ctx.n_stream} seqs"
        buffers = (
            _buffers(request, cache)
            if not old
            else [(str(request.extra.get("buffer_name", "CUDA0")), size)]
        )
        for name, nbytes in buffers:
            lines.append(f"{kv}: {name:>10} KV buffer size = {nbytes / 1024.0 / 1024.0:8.2f} MiB")
        lines.append(
            f"{kv}: size = {f32_mib(size):7.2f} MiB ({cache.cells:6d} cells, {len(cache.layers):3d} layers{seqs}), "
            f"K ({k_name}): {f32_mib(cache.k_bytes):7.2f} MiB, V ({v_name}): {f32_mib(cache.v_bytes):7.2f} MiB"
        )
    return lines
