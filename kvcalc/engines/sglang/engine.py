"""The SGLang engine (``model_runner_kv_cache_mixin.py``, ``server_args.py``): the defaults, the
refusals and the pools of the sibling modules put together into one plan.
"""

from __future__ import annotations

from kvcalc.engines.base import (
    EngineRequest,
    KvCachePlan,
    check_extra,
    extra_fraction,
    extra_int,
)
from kvcalc.engines.common import pp_stages
from kvcalc.engines.sglang import layers, mamba, multimodal, pools
from kvcalc.engines.sglang.defaults import (
    EXTRA_KEYS,
    VERSIONS,
    cache_dtype,
    default_max_running_requests,
    default_mem_fraction_static,
)
from kvcalc.engines.sglang.defaults import version as _profile
from kvcalc.engines.sglang.refused import refuse_unverified
from kvcalc.engines.sglang.swa import hybrid_swa, pool_too_small
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.model.attention_layouts import CompressedSparseAttention, SparseMLA
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB


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
        _profile(version)
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
        _profile(version)
        fraction = utilization
        if fraction is None:
            fraction = default_mem_fraction_static(total_memory_bytes, tensor_parallel_size)
        return int((total_memory_bytes - non_torch_bytes) * fraction) - weights_bytes

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        refuse_unmodelled(self.name, request.model, skip=(SparseMLA, CompressedSparseAttention))
        refuse_unverified(request.model)
        profile = _profile(request.engine_version)
        notes: list[str] = []
        dtype = cache_dtype(request, notes)
        sized = layers.layer_dtype(request.model, dtype)
        model = request.model.with_cache_dtype(sized).per_rank(request.tensor_parallel_size)
        model = layers.unshare(model)
        hybrid = hybrid_swa(request, model, profile, notes)
        page = extra_int(request.extra, "page_size", layers.default_page_size(model))
        budget, split = _budget(request, model, notes)
        stages = pp_stages(model.num_layers, request.pipeline_parallel_size)
        cells = [pools.cells(model, stage, hybrid) for stage in stages]
        return _plan(request, profile, dtype, model, cells, hybrid, page, notes, budget, split)


def _budget(
    request: EngineRequest, model: ModelShape, notes: list[str]
) -> tuple[int, mamba.MambaSplit | None]:
    """The bytes the KV pool is sized from: ``rest`` less the multimodal reservation and, for a
    Mamba/linear-attention hybrid, less the state slots reserved first (floats in GiB, as SGLang)."""
    reserved = multimodal.reservation_bytes(
        request.model, request.gpu_memory_bytes, request.gpu_compute_capability
    )
    if reserved:
        notes.append(multimodal.note(reserved))
    if not mamba.is_hybrid(model):
        if not reserved:
            return request.available_kv_bytes, None
        return int((request.available_kv_bytes / GIB - reserved / GIB) * GIB), None
    mamba.refuse_unserved(model, request.pipeline_parallel_size)
    rest_gib = request.available_kv_bytes / GIB - reserved / GIB
    split = mamba.split(model, rest_gib)
    notes.extend(mamba.notes(split))
    return split.kv_budget_bytes, split


def _plan(
    request: EngineRequest, profile: str, dtype: CacheDtype, model: ModelShape,
    cells: list[pools.Cells], hybrid: bool, page: int, notes: list[str], budget: int,
    split: mamba.MambaSplit | None,
) -> KvCachePlan:  # fmt: skip
    L = request.max_model_len
    ratio = extra_fraction(request.extra, "swa_full_tokens_ratio", 0.8)
    cap = extra_int(request.extra, "max_total_tokens", None)
    tokens = max(
        0,
        min(pools.stage_tokens(budget, c, hybrid, ratio, cap, page) for c in cells),
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
    logs = [pools.pool_line(model, tokens, page, widest)] if tokens > 0 and not hybrid else []
    if tokens <= 0:
        logs = [
        f"Not enough memory. Please try to increase --mem-fraction-static. Current value: {fraction}"
        ]  # fmt: skip
    if hybrid:
        notes.append(f"hybrid SWA pools: {tokens:,} full-layer tokens, {swa_tokens:,} sliding-layer "
                     f"tokens (swa_full_tokens_ratio {ratio})")  # fmt: skip
    fits = 0 < L <= tokens
    running = default_max_running_requests(tokens, L)
    notes.append(
        f"default max_running_requests = min(max(int({tokens:,} / {L:,} · 512), 2048), 4096) = {running}"
    )
    groups = pools.groups(widest, tokens, swa_tokens, page, L, hybrid)
    refusal = pool_too_small(model, swa_tokens, page) if hybrid and tokens > 0 else None
    if refusal:
        logs, fits = [refusal], False
    if split is not None:
        running = min(running, split.max_running_requests)
        kv_bytes += split.state_bytes if split.slots > 0 else 0
        groups += (mamba.group(split),)
        refusal = mamba.refusal(split) or refusal
        if refusal:
            logs, fits = [refusal], False
    return KvCachePlan(
        engine="sglang", engine_version=profile, kv_cache_dtype=dtype.name, block_size=page,
        num_blocks=tokens // page, kv_cache_bytes=kv_bytes, kv_cache_tokens=tokens,
        max_concurrency=tokens / L, kv_bytes_per_token=widest.full_bytes + widest.swa_bytes,
        bytes_per_request=L * per_token, fits=fits, estimated_max_model_len=None if fits else tokens,
        groups=groups, log_lines=tuple(logs), notes=tuple(notes), max_model_len=L,
        available_kv_bytes=request.available_kv_bytes, fit_budget_bytes=tokens * per_token,
        max_num_batched_tokens=None, max_num_seqs=running, refusal=refusal,
        refusal_fix="more memory per GPU (--mem-fraction-static) or a higher --tp" if refusal else None,
    )  # fmt: skip
