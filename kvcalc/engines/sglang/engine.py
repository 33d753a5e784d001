"""The SGLang engine (``model_runner_kv_cache_mixin.py``, ``server_args.py``): the defaults, the
refusals and the pools of the sibling modules put together into one plan.
"""

from __future__ import annotations

import struct
from dataclasses import replace

from kvcalc.engines.base import EngineRequest, KvCachePlan, MemoryInputs
from kvcalc.engines.common import pp_stages
from kvcalc.engines.extra import check_extra, extra_bool, extra_fraction, extra_int
from kvcalc.engines.sglang import dcp, hicache, layers, mamba, multimodal, parallel, pools
from kvcalc.engines.sglang.defaults import (
    EXTRA_KEYS,
    LEGACY,
    VERSIONS,
    cache_dtype,
    default_max_running_requests,
    default_mem_fraction_static,
    memory_defaults,
)
from kvcalc.engines.sglang.defaults import version as _profile
from kvcalc.engines.sglang.graphs import (
    check_capture,
    check_chunk,
    check_prefill_context,
    reserve_settings,
)
from kvcalc.engines.sglang.hicache import HiCacheTier
from kvcalc.engines.sglang.lora import SglangLoraPool, check_lora_deployment
from kvcalc.engines.sglang.pages import page_size
from kvcalc.engines.sglang.refused import refuse_unverified
from kvcalc.engines.sglang.swa import hybrid_swa, pool_too_small, refuse_request_cap
from kvcalc.engines.speculative import SpeculativeConfig, SpeculativeDraft
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.errors import InputError
from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.model.attention_layouts import CompressedSparseAttention, SparseMLA
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB

#: the torch dtype SGLang's pool line names (``dtype: torch.float8_e4m3fn``)
_TORCH_DTYPES = {"fp8": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


class SglangEngine:
    name = "sglang"
    versions = VERSIONS

    def default_gpu_memory_utilization(self, memory: MemoryInputs) -> float | None:
        """``mem_fraction_static``: from GPU memory, TP × PP, the model (MLA, vision tower) and DP
        attention's ranks (the graph reserve)."""
        return default_mem_fraction_static(
            memory.gpu_memory_bytes, memory.tensor_parallel_size, memory.pipeline_parallel_size,
            memory.model, profile=_profile(memory.engine_version),
            attn_dp=memory.attention_data_parallel_size, max_running_requests=memory.max_num_seqs,
            dcp=memory.decode_context_parallel_size, settings=reserve_settings(memory.extra),
        )  # fmt: skip

    def cudagraph_captures(self, request: EngineRequest) -> CudaGraphCaptures | None:
        """None captured under ``--disable-cuda-graph`` (or both phases disabled): the
        CUDA-graph estimate shown beside SGLang's reserve is then 0; otherwise None (the
        estimate's default set)."""
        settings = reserve_settings(request.extra)
        if settings.decode_graph or settings.prefill_graph:
            return None
        return CudaGraphCaptures(source="SGLang with its CUDA graphs disabled")

    def speculative_draft(
        self, model: ModelShape, config: SpeculativeConfig, *, tensor_parallel_size: int,
        pipeline_parallel_size: int,
    ) -> SpeculativeDraft:  # fmt: skip
        """The draft SGLang 0.5.23 sizes its pool for (:mod:`~kvcalc.engines.sglang.speculative`)."""
        from kvcalc.engines.sglang.speculative import sglang_draft

        return sglang_draft(model, config, config.draft, tensor_parallel_size=tensor_parallel_size,
                            pipeline_parallel_size=pipeline_parallel_size)  # fmt: skip

    def lora_slots(self, request: EngineRequest) -> SglangLoraPool | None:
        """SGLang's LoRA memory pool on one GPU (:mod:`~kvcalc.engines.sglang.lora`), built
        after the weights and before the KV pool; None without ``--enable-lora``."""
        from kvcalc.engines.sglang.lora import sglang_lora_pool

        if request.lora is None:
            return None
        if _profile(request.engine_version) != "latest":
            raise InputError("SGLang's LoRA pool is modelled for SGLang 0.5.23 only",
                             hint="plan with --engine-version latest, or without --enable-lora",
                             code="lora-not-modelled")  # fmt: skip
        check_lora_deployment(request)
        return sglang_lora_pool(request.model, request.lora,
                                tensor_parallel_size=request.tensor_parallel_size,
                                weight_dtype=request.weight_dtype)  # fmt: skip

    def engine_host_tier(self, request: EngineRequest, plan: KvCachePlan) -> HiCacheTier | None:
        """The HiCache host pools of ``plan`` (:mod:`~kvcalc.engines.sglang.hicache`); None
        without ``--enable-hierarchical-cache``, or when no device pool is built."""
        opts = hicache.options(request.extra)
        if opts is None or plan.kv_cache_tokens <= 0:
            return None
        return hicache.host_tier(opts, device_tokens=plan.kv_cache_tokens,
                                 device_pool_bytes=plan.kv_cache_bytes,
                                 bytes_per_token=plan.kv_bytes_per_token, page=plan.block_size,
                                 ranks=request.tensor_parallel_size,
                                 mla=request.model.is_mla)  # fmt: skip

    def available_kv_bytes(self, memory: MemoryInputs) -> int:
        """``rest = available_after_load − pre_model_load · (1 − mem_fraction_static)``, in GiB.

        ``pre_model_load`` is the free memory before weights (device total minus the CUDA
        context) and ``available_after_load`` that minus the weights, so rest ≈ (total − non_torch)
        · fraction − weights. Activations and CUDA graphs live in the reserved ``1 − fraction`` and
        are not subtracted. With more than one rank both free-memory figures pass a float32
        all-reduce in GiB first (``get_available_gpu_memory(distributed=True)``), which moves
        the result by up to a few KiB. Without a fraction: the default of a text model (the
        planner passes the model's own).
        """
        total, tp = memory.total_memory_bytes, memory.tensor_parallel_size
        fraction = memory.gpu_memory_utilization
        if fraction is None:
            fraction = default_mem_fraction_static(
                total, tp, profile=_profile(memory.engine_version),
                settings=reserve_settings(memory.extra),
            )  # fmt: skip
        before = (total - memory.non_torch_bytes) / GIB
        after = (total - memory.non_torch_bytes - memory.weights_bytes) / GIB
        if tp > 1:
            before, after = _float32(before), _float32(after)
        return int((after - before * (1 - fraction)) * GIB)

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        refuse_unmodelled(self.name, request.model, skip=(SparseMLA, CompressedSparseAttention))
        refuse_unverified(request.model)
        profile = _profile(request.engine_version)
        notes: list[str] = []
        draft_layers = parallel.check(request, profile, notes)
        dcp_size = dcp.check(request, profile, notes)
        hicache.check(hicache.options(request.extra), request, profile, notes)
        dtype = cache_dtype(request, notes)
        sized = layers.layer_dtype(request.model, dtype, request.gpu_compute_capability)
        model = request.model.with_cache_dtype(sized).per_rank(parallel.attention_tp(request))
        model = layers.unshare(model)
        hybrid = hybrid_swa(request, model, profile, notes)
        refuse_request_cap(request, hybrid)
        page = page_size(
            model, request.gpu_compute_capability,
            request.block_size or extra_int(request.extra, "page_size", None),
            legacy=profile in LEGACY,
            radix_cache=not extra_bool(request.extra, "disable_radix_cache", False),
            speculative=request.speculative is not None,
            given_topk=request.speculative.given_eagle_topk if request.speculative else None,
        )  # fmt: skip
        if request.gpu_compute_capability is None and profile not in LEGACY:
            notes.append(
                "no NVIDIA compute capability (no catalog GPU, or another vendor's): the page "
                f"{page} SGLang picks on a Hopper GPU is assumed (Blackwell's backends page by 64; "
                "ROCm's are not modelled)"
            )
        budget, split = _budget(request, profile, model, notes)
        stages = pp_stages(model.num_layers, request.pipeline_parallel_size)
        cells = [pools.cells(model, stage, hybrid, draft_layers) for stage in stages]
        return _plan(
            request, profile, dtype, model, cells, hybrid, page, notes, budget, split, dcp_size
        )


def _float32(value: float) -> float:
    """``torch.tensor(value, dtype=torch.float32).item()``."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _budget(
    request: EngineRequest, profile: str, model: ModelShape, notes: list[str]
) -> tuple[int, mamba.MambaSplit | None]:
    """The bytes the KV pool is sized from: ``rest`` less the multimodal reservation and, for a
    Mamba/linear-attention hybrid, less the state slots reserved first (floats in GiB, as SGLang).
    The 0.4.x profiles reserve nothing for multimodal models."""
    reserved = 0
    if profile not in LEGACY:
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
    draft = request.speculative
    running = request.max_num_seqs
    tokens = None
    if draft is not None:  # max_running_requests is 48 unless given; D as SGLang resolved it
        running = parallel.SPEC_MAX_RUNNING_REQUESTS if running is None else running
        tokens = draft.num_draft_tokens
    split = mamba.split(model, rest_gib, mamba.options(request.extra, running, tokens))
    notes.extend(mamba.notes(split))
    return split.kv_budget_bytes, split


def _plan(
    request: EngineRequest, profile: str, dtype: CacheDtype, model: ModelShape,
    cells: list[pools.Cells], hybrid: bool, page: int, notes: list[str], budget: int,
    split: mamba.MambaSplit | None, dcp_size: int = 1,
) -> KvCachePlan:  # fmt: skip
    """The plan; under DCP (``dcp_size`` > 1) the rows each rank holds hold ``dcp_size`` times
    as many logical tokens (:mod:`~kvcalc.engines.sglang.dcp`)."""
    L = request.max_model_len
    ratio = extra_fraction(request.extra, "swa_full_tokens_ratio", 0.8)
    cap = extra_int(request.extra, "max_total_tokens", None)
    tokens = 0
    if budget > 0:
        tokens = max(0, min(pools.stage_tokens(budget, c, hybrid, ratio, cap, page) for c in cells))
    widest = max(cells, key=lambda c: c.full_bytes + c.swa_bytes + c.draft_bytes)
    swa_tokens = int(tokens * ratio) // page * page if hybrid else 0
    per_token = widest.full_bytes + (0 if hybrid else widest.swa_bytes) + widest.draft_bytes
    kv_bytes = (tokens + page) * per_token + (
        (swa_tokens + page) * widest.swa_bytes if hybrid else 0
    )
    kv_bytes = kv_bytes if tokens else 0  # "+ page_size": one padding slot per buffer
    settings = reserve_settings(request.extra)
    memory = memory_defaults(profile, request.gpu_memory_bytes, request.tensor_parallel_size,
                             request.pipeline_parallel_size, request.model,
                             attn_dp=request.attention_data_parallel_size,
                             max_running_requests=request.max_num_seqs, dcp=dcp_size,
                             settings=settings)  # fmt: skip
    chunk = memory.chunked_prefill_size // request.attention_data_parallel_size
    check_chunk(chunk, page)
    check_prefill_context(settings, page, L)
    check_capture(request.extra)
    # the fraction the budget was sized with (scheduler.py: --mem-fraction-static as given)
    fraction = (
        request.gpu_memory_utilization
        or extra_fraction(request.extra, "mem_fraction_static", None)
        or memory.mem_fraction_static
    )
    running = default_max_running_requests(profile, tokens, L)
    asked = parallel.asked_running_requests(request, notes)
    if asked is not None:  # --max-running-requests (or speculation's 48): per DP rank, ≤ tokens/2
        running = min(max(1, asked // request.attention_data_parallel_size), tokens // 2)
    if split is not None:
        running = min(running, split.max_running_requests)
    logs = _log_lines(profile, model, dtype, tokens, page, widest, hybrid, budget, fraction,
                      swa_tokens)  # fmt: skip
    logical = tokens * dcp_size  # DCP: each rank's rows are every dcp-th token of a request
    if tokens > 0:
        logs.append(
            f"max_total_num_tokens={logical}, chunked_prefill_size={chunk}, "
            f"max_prefill_tokens={settings.max_prefill_tokens}, max_running_requests={running}, "
            f"context_len={L}"
        )
    if hybrid:
        notes.append(f"hybrid SWA pools: {tokens:,} full-layer tokens, {swa_tokens:,} sliding-layer "
                     f"tokens (swa_full_tokens_ratio {ratio})")  # fmt: skip
    fits = 0 < L <= logical
    if asked is None:
        notes.append(
            f"default max_running_requests = min(clamp(int({tokens:,} / {L:,} · 512), 2048, 4096), "
            f"{tokens:,} // 2) = {running} (context_len {L:,})"
        )
    groups = pools.groups(widest, logical, swa_tokens, page * dcp_size, L, hybrid)
    if dcp_size > 1:  # a logical page is page_size rows on each rank
        groups = tuple(replace(g, page_bytes=g.page_bytes // dcp_size) for g in groups)
        notes.append(f"{tokens:,} rows per rank × DCP {dcp_size} = {logical:,} logical tokens "
                     f"(the allocator's page: {page} × {dcp_size} = {page * dcp_size} tokens)")  # fmt: skip
    refusal = pool_too_small(model, swa_tokens, page) if hybrid and tokens > 0 else None
    if refusal:
        logs, fits = [refusal], False
    if split is not None:
        notes.append(f"max_running_requests = {running:,} (capped by the Mamba-state slots)")
        if not split.spec_draft_tokens:  # under speculation SGLang prints intermediate buffers too
            logs = [mamba.log_line(model, split), *logs]
        kv_bytes += split.state_bytes + split.spec_state_bytes if split.slots > 0 else 0
        groups += (mamba.group(split),)
        refusal = mamba.refusal(split) or refusal
        if refusal:
            logs, fits = [refusal], False
    return KvCachePlan(
        engine="sglang", engine_version=profile, kv_cache_dtype=dtype.name,
        block_size=page * dcp_size, num_blocks=tokens // page, kv_cache_bytes=kv_bytes,
        kv_cache_tokens=logical, max_concurrency=logical / L,
        kv_bytes_per_token=widest.full_bytes + widest.swa_bytes + widest.draft_bytes,
        draft_kv_bytes_per_token=widest.draft_bytes,
        bytes_per_request=-(-L // dcp_size) * per_token, fits=fits,
        estimated_max_model_len=None if fits else logical,
        groups=groups, log_lines=tuple(logs), notes=tuple(notes), max_model_len=L,
        available_kv_bytes=request.available_kv_bytes, fit_budget_bytes=tokens * per_token,
        max_num_batched_tokens=None, max_num_seqs=running, refusal=refusal,
        refusal_fix="more memory per GPU (--mem-fraction-static) or a higher --tp" if refusal else None,
    )  # fmt: skip


def _log_lines(
    profile: str, model: ModelShape, dtype: CacheDtype, tokens: int, page: int, c: pools.Cells,
    hybrid: bool, rest: int, fraction: float, swa_tokens: int = 0,
) -> list[str]:  # fmt: skip
    """The pool line, or the error SGLang raises (0.5.23 tells the two failures apart)."""
    if rest <= 0 and profile not in LEGACY:
        return [f"Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={fraction}."]  # fmt: skip
    if tokens <= 0:
        if profile in LEGACY:
            return [f"Not enough memory. Please try to increase --mem-fraction-static. "
                    f"Current value: {fraction}"]  # fmt: skip
        return ["Not enough memory. Please try to increase --mem-fraction-static. "
                f"Current value: mem_fraction_static={fraction}"]  # fmt: skip
    torch_dtype = _TORCH_DTYPES.get(dtype.name, dtype.torch_name)
    if hybrid:  # the hybrid SWA pool's lines are read from 0.5.23 (earlier releases: not said)
        if profile != "latest":
            return []
        return list(pools.hybrid_pool_lines(model, tokens, swa_tokens, page, c,
                                            torch_dtype=torch_dtype))  # fmt: skip
    return [pools.pool_line(model, tokens, page, c, torch_dtype=torch_dtype if profile == "latest" else None,
                            counted=profile != "2025.02")]  # fmt: skip
