"""SGLang: a token pool sized from ``rest_memory`` (``model_runner_kv_cache_mixin.py``, ``server_args.py``).

- cell size per token (``get_cell_size_per_token``): MHA/GQA ``kv_heads_rank · (k + v) · layers ·
  dtype``; MLA ``(kv_lora_rank + rope) · layers · dtype`` with no ×2 and no TP split; hybrid SWA
  models size full and sliding layers separately;
- ``max_total_num_tokens = rest_bytes // cell``, capped by ``--max-total-tokens``, floored to the
  page size, the minimum over PP stages; ≤ 0 raises "Not enough memory";
- hybrid SWA split: ``full = total_bytes / (F·n_full + r·S·n_swa)``, ``swa = full · r``
  (``swa_full_tokens_ratio`` r, default 0.8), each floored to the page size.

Which architectures SGLang treats as hybrid SWA was read from a copy of SGLang's
``model_config.py`` (``is_hybrid_swa_model``): Llama 4, gpt-oss, MiMo-V2, Step3p5 (newest: Gemma 4).
Gemma 2/3 are *not* in it, so SGLang books every Gemma-3 layer for every token (the sglang-4826
record). Version ``"2025.03"`` has no hybrid SWA at all.

**Unconfirmed**: the ``+ page_size`` padding slot in each K/V buffer (it moves the printed GB only in
the third decimal), the float32-config rule (fp16, bf16 for Gemma), the PP layer split (assumed to be
vLLM's ``get_pp_indices``), FlashMLA's 64-token page, and the Mamba-hybrid pool split (refused).

Worked example (sglang-4826, gemma-3-4b): 4 KV heads × (256 + 256) × 34 layers × 2 B = 139,264 B
per token; 834,615 tokens → K = (834,615 + 1) · 34 · 4 · 256 · 2 B = 54.12 GB (GiB, as SGLang prints).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcalc.engines.base import (
    EngineRequest,
    KvCacheGroup,
    KvCachePlan,
    check_extra,
    extra_bool,
    extra_fraction,
    extra_int,
    unknown_version,
)
from kvcalc.engines.common import is_float32_config, pp_stages
from kvcalc.engines.formats import nearest, resolve_generic
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP8, FP8_E5M2, FP16, CacheDtype
from kvcalc.model.layouts import LayerKind, Layout, MLALatent, RecurrentState
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, MIB

VERSIONS = ("latest", "2025.03")
EXTRA_KEYS = (
    "page_size",
    "max_total_tokens",
    "swa_full_tokens_ratio",
    "hybrid_swa",
    "mem_fraction_static",
)
#: architectures whose pool SGLang 0.5.23's own sizing code (sglang_reference, emulated H100,
#: 20 GiB) sizes differently from this module, reason not yet modelled: refused rather than guessed.
#: Gemma 4 (per-type KV heads/head dims in the hybrid SWA pool): 28,984 tokens vs 29,127 here;
#: Kimi-K2.5, an MLA text stack inside a multimodal wrapper, is refused too (_refuse_unverified):
#: 304,103 vs 305,595 here.
UNVERIFIED_ARCHS = {
    "Gemma4ForConditionalGeneration": "Gemma 4 (sliding and global layers of different shapes)",
    "Gemma4ForCausalLM": "Gemma 4 (sliding and global layers of different shapes)",
}

HYBRID_SWA_ARCHS = frozenset({
    "Llama4ForConditionalGeneration", "GptOssForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2MTP",
    "Step3p5ForCausalLM", "Step3p5MTP", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
})  # fmt: skip
_DTYPES = {"fp8": FP8, "fp8_e4m3": FP8, "fp8_e5m2": FP8_E5M2, "bf16": BF16, "bfloat16": BF16,
           "fp16": FP16, "float16": FP16}  # fmt: skip
#: what ``--kv-cache-dtype`` takes for SGLang (no integer caches)
KV_CACHE_DTYPES = ("auto", *_DTYPES)


def default_mem_fraction_static(gpu_memory_bytes: int | None, tp: int = 1, pp: int = 1) -> float:
    """``ServerArgs._handle_gpu_memory_settings`` without DP attention, piecewise graphs, speculation.

    80 GB card (81,559 MiB), TP 1: reserved = 512 + 8,192·1.5 + 256·2 + 1·1/8·1,024 = 13,440 MiB,
    so round((81,559 − 13,440) / 81,559, 3) = 0.835.
    """
    if not gpu_memory_bytes:
        return 0.88
    mem = gpu_memory_bytes / MIB
    small = tp < 4
    if mem < 20 * 1024:
        chunk, graph_bs = 2048, 8
    elif mem < 35 * 1024:
        chunk, graph_bs = 2048, 24 if small else 80
    elif mem < 60 * 1024:
        chunk, graph_bs = 4096, 32 if small else 160
    elif mem < 160 * 1024:
        chunk, graph_bs = 8192, 256 if small else 512
    else:
        chunk, graph_bs = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mem - reserved) / mem, 3)


@dataclass(frozen=True, kw_only=True)
class _Cells:
    """Per-token bytes on one PP stage: full-attention part and sliding part."""

    full_bytes: int
    swa_bytes: int
    n_full: int
    n_swa: int
    k_bytes: int  # K side only, for the log line (MHA)


class SglangEngine:
    name = "sglang"
    versions = VERSIONS

    def default_gpu_memory_utilization(
        self,
        version: str | None = None,
        *,
        gpu_memory_bytes: int | None = None,
        tensor_parallel_size: int = 1,
    ) -> float | None:
        """``mem_fraction_static``: from the GPU memory tiers, or 0.88 when memory is unknown."""
        _version(version)
        return default_mem_fraction_static(gpu_memory_bytes, tensor_parallel_size)

    def available_kv_bytes(
        self, *, total_memory_bytes: int, utilization: float | None, weights_bytes: int,
        activation_bytes: int, non_torch_bytes: int, cudagraph_bytes: int, version: str | None,
        tensor_parallel_size: int,
    ) -> int:  # fmt: skip
        """``rest = available_after_load − total_before_load · (1 − mem_fraction_static)``.

        ``total_before_load`` is the free memory before weights (device total minus the CUDA
        context), so rest = (total − non_torch) · fraction − weights. Activations and CUDA graphs
        live in the reserved ``1 − fraction`` and are not subtracted.
        """
        _version(version)
        fraction = utilization
        if fraction is None:
            fraction = default_mem_fraction_static(total_memory_bytes, tensor_parallel_size)
        return int((total_memory_bytes - non_torch_bytes) * fraction) - weights_bytes

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        refuse_unmodelled(self.name, request.model)
        _refuse_unverified(request.model)
        version = _version(request.engine_version)
        notes: list[str] = []
        dtype = _cache_dtype(request, notes)
        model = request.model.with_cache_dtype(dtype).per_rank(request.tensor_parallel_size)
        if any(isinstance(x, RecurrentState) for x in model.layers):
            raise InputError(
                "SGLang's Mamba/linear-attention pool split (handle_max_mamba_cache) is not modelled",
                code="unsupported-model",
            )
        hybrid = _hybrid_swa(request, model, version, notes)
        page = extra_int(request.extra, "page_size", 1)
        stages = pp_stages(model.num_layers, request.pipeline_parallel_size)
        cells = [_cells(model, stage, hybrid) for stage in stages]
        return _plan(request, version, dtype, model, cells, hybrid, page, notes)


def _refuse_unverified(model: ModelShape) -> None:
    """Refuse what SGLang's recorded sizing shows kvcalc does not reproduce yet."""
    what = next((UNVERIFIED_ARCHS[a] for a in model.architectures if a in UNVERIFIED_ARCHS), None)
    wrapped = any(k.startswith("text_config.") for k in model.config_keys)
    if what is None and wrapped and any(isinstance(x, MLALatent) for x in model.layers):
        what = "an MLA text stack inside a multimodal config (Kimi-K2.5)"
    if what is not None:
        raise InputError(
            f"sglang: {what} ({model.model_type}): SGLang 0.5.23 sizes this pool differently "
            "from kvcalc's model, which is not yet checked",
            hint="plan it with --engine vllm; under SGLang it is not yet modelled",
            code="unsupported-model",
        )


def _version(version: str | None) -> str:
    if version is None:
        return VERSIONS[0]
    if version not in VERSIONS:
        raise unknown_version("sglang", version, VERSIONS)
    return version


def _cache_dtype(request: EngineRequest, notes: list[str]) -> CacheDtype:

    name = resolve_generic("sglang", request.kv_cache_dtype, KV_CACHE_DTYPES)
    if name == "auto":
        model = request.model
        if not is_float32_config(model):
            return model.dtype
        chosen = BF16 if model.model_type.startswith("gemma") else FP16
        notes.append(f"float32 config: SGLang casts to {chosen.name} (unconfirmed)")
        return chosen
    if name not in _DTYPES:
        raise InputError(
            f"SGLang has no KV cache dtype {request.kv_cache_dtype!r} that kvcalc models",
            hint=nearest("sglang", name, KV_CACHE_DTYPES)
            + "choose one of: auto, "
            + ", ".join(_DTYPES),
            code="unsupported-dtype",
        )
    return _DTYPES[name]


def _hybrid_swa(request: EngineRequest, model: ModelShape, version: str, notes: list[str]) -> bool:
    windowed = any(x.kind in ("sliding", "chunked") for x in model.layers)
    default = version != "2025.03" and bool(HYBRID_SWA_ARCHS & set(model.architectures))
    hybrid = extra_bool(request.extra, "hybrid_swa", default) and windowed
    if windowed and not hybrid:
        notes.append(
            "SGLang books sliding/chunked layers for every token (not a hybrid-SWA architecture)"
        )
    return bool(hybrid)


def _cells(model: ModelShape, stage: range, hybrid: bool) -> _Cells:
    full = swa = n_full = n_swa = k_bytes = 0
    for i in stage:
        layer: Layout = model.layers[i]
        if not layer.bytes_per_token:
            continue
        if not isinstance(layer, MLALatent):
            k_bytes += layer.num_kv_heads * layer.dtype.row_bytes(layer.head_dim_k)
        if hybrid and layer.kind in ("sliding", "chunked"):
            swa, n_swa = swa + layer.bytes_per_token, n_swa + 1
        else:
            full, n_full = full + layer.bytes_per_token, n_full + 1
    return _Cells(full_bytes=full, swa_bytes=swa, n_full=n_full, n_swa=n_swa, k_bytes=k_bytes)


def _plan(
    request: EngineRequest, version: str, dtype: CacheDtype, model: ModelShape, cells: list[_Cells],
    hybrid: bool, page: int, notes: list[str],
) -> KvCachePlan:  # fmt: skip
    L = request.max_model_len
    ratio = extra_fraction(request.extra, "swa_full_tokens_ratio", 0.8)
    cap = extra_int(request.extra, "max_total_tokens", None)
    tokens = max(
        0,
        min(_stage_tokens(request.available_kv_bytes, c, hybrid, ratio, cap, page) for c in cells),
    )
    widest = max(cells, key=lambda c: c.full_bytes + c.swa_bytes)
    swa_tokens = int(tokens * ratio) // page * page if hybrid else 0
    per_token = widest.full_bytes + (0 if hybrid else widest.swa_bytes)
    kv_bytes = (tokens + page) * per_token + (
        (swa_tokens + page) * widest.swa_bytes if hybrid else 0
    )
    kv_bytes = kv_bytes if tokens else 0  # "+ page_size": one padding slot per buffer (unconfirmed)
    fraction = extra_fraction(
        request.extra, "mem_fraction_static", None
    ) or default_mem_fraction_static(request.gpu_memory_bytes, request.tensor_parallel_size)
    logs = [_pool_line(model, tokens, page, widest)] if tokens > 0 and not hybrid else []
    if tokens <= 0:
        logs = [
        f"Not enough memory. Please try to increase --mem-fraction-static. Current value: {fraction}"
        ]  # fmt: skip
    if hybrid:
        notes.append(f"hybrid SWA pools: {tokens:,} full-layer tokens, {swa_tokens:,} sliding-layer "
                     f"tokens (swa_full_tokens_ratio {ratio})")  # fmt: skip
    fits = 0 < L <= tokens
    running = min(max(int(tokens / L * 512), 2048), 4096)
    notes.append(
        f"default max_running_requests = min(max(int({tokens:,} / {L:,} · 512), 2048), 4096) = {running}"
    )
    groups = _groups(widest, tokens, swa_tokens, page, L, hybrid)
    return KvCachePlan(
        engine="sglang", engine_version=version, kv_cache_dtype=dtype.name, block_size=page,
        num_blocks=tokens // page, kv_cache_bytes=kv_bytes, kv_cache_tokens=tokens,
        max_concurrency=tokens / L, kv_bytes_per_token=widest.full_bytes + widest.swa_bytes,
        bytes_per_request=L * per_token, fits=fits, estimated_max_model_len=None if fits else tokens,
        groups=groups, log_lines=tuple(logs), notes=tuple(notes), max_model_len=L,
        available_kv_bytes=request.available_kv_bytes, fit_budget_bytes=tokens * per_token,
        max_num_batched_tokens=None, max_num_seqs=running,
    )  # fmt: skip


def _stage_tokens(
    rest: int, c: _Cells, hybrid: bool, ratio: float, cap: int | None, page: int
) -> int:
    if hybrid and c.swa_bytes:
        tokens = int(rest / (c.full_bytes + ratio * c.swa_bytes))
    else:
        tokens = rest // (c.full_bytes + c.swa_bytes) if c.full_bytes + c.swa_bytes else 0
    if cap is not None:
        tokens = min(tokens, cap)
    return tokens // page * page


def _pool_line(model: ModelShape, tokens: int, page: int, c: _Cells) -> str:
    """``KV Cache is allocated. #tokens: …`` — K and V sizes for MHA, one KV size for MLA."""
    if model.is_mla:
        size = (tokens + page) * c.full_bytes
        return f"KV Cache is allocated. #tokens: {tokens}, KV size: {size / GIB:.2f} GB"
    k_size = (tokens + page) * c.k_bytes
    v_size = (tokens + page) * (c.full_bytes + c.swa_bytes) - k_size
    return f"KV Cache is allocated. #tokens: {tokens}, K size: {k_size / GIB:.2f} GB, V size: {v_size / GIB:.2f} GB"


def _groups(
    c: _Cells, tokens: int, swa_tokens: int, page: int, L: int, hybrid: bool
) -> tuple[KvCacheGroup, ...]:
    """One pool (two with hybrid SWA); ``page_bytes`` is per layer (the mean over the pool's layers)."""
    n_full = c.n_full + (0 if hybrid else c.n_swa)
    full_bytes = c.full_bytes + (0 if hybrid else c.swa_bytes)
    rows = [KvCacheGroup(
        kind=LayerKind.FULL, num_layers=n_full, page_bytes=page * full_bytes // max(1, n_full),
        block_size=page, blocks_per_request=-(-L // page), num_blocks=tokens // page,
    )]  # fmt: skip
    if hybrid and c.n_swa:
        rows.append(KvCacheGroup(
            kind=LayerKind.SLIDING, num_layers=c.n_swa, page_bytes=page * c.swa_bytes // c.n_swa,
            block_size=page, blocks_per_request=-(-L // page), num_blocks=swa_tokens // page,
        ))  # fmt: skip
    return tuple(rows)
