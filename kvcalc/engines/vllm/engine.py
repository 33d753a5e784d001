"""vLLM (V1 engine, and the V0 engine for old releases): blocks, capacity line, fit check.

The arithmetic is vLLM's, step by step (``engine-accounting.md`` §1, checked against the vLLM 0.33.0
wheel where the module docstrings of :mod:`~kvcalc.engines.vllm.defaults` and
:mod:`~kvcalc.engines.vllm.groups` say so):

1. resolve the cache dtype, the block size (backend choice, hybrid mamba alignment) and
   ``max_num_batched_tokens``;
2. every layer reports a spec on its TP rank; the whole model is grouped;
3. each PP stage: ``bytes_per_block`` = max over groups of the pages of the group's layers on that
   stage, ``num_blocks = available // bytes_per_block``; the engine takes the minimum;
4. ``blocks_per_request`` = Σ over groups of the blocks one request at ``max_model_len`` needs;
   ``max_concurrency = num_blocks / blocks_per_request``; tokens = ``int(concurrency · L)`` (merged
   line) or ``num_blocks // n_groups · block_size`` (old two-line format);
5. fit check: needed = ``bytes_per_block · blocks_per_request`` against ``available`` (0.33:
   ``available − bytes_per_block``, the null block); if it fails, a binary search over 1..L.

Worked example (Llama-3.1-8B, bf16, 10 GiB): page 2·16·8·128·2 = 65,536 B, 32 layers → 2 MiB per
block, 10 GiB // 2 MiB = 5,120 blocks = 81,920 tokens; at 8,192 tokens a request needs 512 blocks,
so 5,120 / 512 = 10.00x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan, MemoryInputs
from kvcalc.engines.common import binary_search_max_len, pp_stages
from kvcalc.engines.extra import check_extra, extra_bool, extra_int
from kvcalc.engines.speculative import SpeculativeConfig, SpeculativeDraft
from kvcalc.engines.vllm import defaults as D
from kvcalc.engines.vllm.batch import scheduler_batch
from kvcalc.engines.vllm.drafting import with_draft
from kvcalc.engines.vllm.graph_defaults import plan_captures
from kvcalc.engines.vllm.groups import (
    ATTENTION_KINDS,
    Group,
    Sizing,
    SpecKind,
    group_layers,
    promote_local_specs,
)
from kvcalc.engines.vllm.hybrid import layer_specs
from kvcalc.engines.vllm.lora import LoraSlots, vllm_lora_slots
from kvcalc.engines.vllm.mamba_dtypes import with_mamba_dtypes
from kvcalc.engines.vllm.messages import (
    capacity_lines,
    cudagraph_profiling_line,
    no_memory_text,
    too_long_text,
)
from kvcalc.engines.vllm.mm import MmTerms, parse_limits, vllm_mm_terms
from kvcalc.engines.vllm.offload import HostTier, host_tier, weight_offload
from kvcalc.engines.vllm.refused import refuse_unbuildable
from kvcalc.engines.vllm.setup import VllmSetup, resolve_setup
from kvcalc.engines.vllm.support import unbuildable_hint, unbuildable_reason
from kvcalc.errors import InputError
from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.model.layouts import LayerKind, Layout
from kvcalc.model.recurrent_layouts import ParallelHybrid
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, format_gib

EXTRA_KEYS = (
    "usage_context", "mamba_cache_mode", "max_concurrent_batches", "pp_layer_partition",
    "swap_space_bytes", "num_gpu_blocks_override", "allow_long_max_model_len", "flashinfer_sampler",
    "limit_mm_image", "limit_mm_video",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class _Stage:
    layers: range
    bytes_per_block: int
    num_blocks: int
    check_bytes: int


class VllmEngine:
    """vLLM's KV-cache accounting, per version profile (``"0.33"``, ``"0.21"``, ``"0.10"``, ``"0.8"``, ``"0.6"``)."""

    name = "vllm"
    versions = D.VERSIONS

    def default_gpu_memory_utilization(self, memory: MemoryInputs) -> float | None:
        return D.resolve_profile(memory.engine_version)[0].gpu_memory_utilization

    def subtracts_cudagraph(self, version: str | None = None) -> bool:
        """vLLM subtracts its CUDA-graph estimate from the KV budget (v0.21 on)."""
        return D.resolve_profile(version)[0].subtracts_cudagraph

    def available_kv_bytes(self, memory: MemoryInputs) -> int:
        """``ceil(total·util) − weights − activation peak − non-torch − CUDA graphs`` (v0.21+);
        before: ``total·util − (weights + activation) − max(0, non-torch)``, no graph term."""
        profile = D.resolve_profile(memory.engine_version)[0]
        util = memory.fraction_or(profile.gpu_memory_utilization)
        if profile.subtracts_cudagraph:
            return math.ceil(memory.total_memory_bytes * util) - memory.non_kv_bytes
        requested = int(memory.total_memory_bytes * util)
        return (
            requested
            - memory.weights_bytes
            - memory.activation_bytes
            - max(0, memory.non_torch_bytes)
        )

    def fit_budget_bytes(
        self, *, available_kv_bytes: int, bytes_per_block: int, version: str | None
    ) -> int:
        """What the one-request fit check compares a request's bytes with: the available memory,
        less the null block from 0.33 on."""
        return _fit_budget(D.resolve_profile(version)[0], available_kv_bytes, bytes_per_block)

    def flashinfer_sampler(self, request: EngineRequest) -> bool | None:
        """The ``flashinfer_sampler`` option: FlashInfer's top-k/top-p sampler in use or not (None:
        not given; the overhead estimate's sampler term decides)."""
        return extra_bool(request.extra, "flashinfer_sampler", None)

    def mm_limits(self, request: EngineRequest) -> tuple[int, int]:
        """Images and videos per prompt for the V0 profile run (``--limit-mm-per-prompt``, or the
        options ``limit_mm_image``, ``limit_mm_video``; V0's default 1 each)."""
        if request.limit_mm_per_prompt is not None:
            if "limit_mm_image" in request.extra or "limit_mm_video" in request.extra:
                raise InputError("--limit-mm-per-prompt and -E limit_mm_image/limit_mm_video both given",
                                 hint="give the limits once", code="conflicting-options")  # fmt: skip
            given = dict(parse_limits(request.limit_mm_per_prompt).given)
            return given.get("image", 1), given.get("video", 1)
        return (extra_int(request.extra, "limit_mm_image", 1, minimum=0),
                extra_int(request.extra, "limit_mm_video", 1, minimum=0))  # fmt: skip

    def with_mamba_dtypes(self, model: ModelShape, conv: str | None,
                          ssm: str | None) -> tuple[ModelShape, tuple[str, ...]]:  # fmt: skip
        """``model`` with ``--mamba-cache-dtype``/``--mamba-ssm-cache-dtype`` applied
        (:mod:`~kvcalc.engines.vllm.mamba_dtypes`)."""
        return with_mamba_dtypes(model, conv, ssm)

    def mm_terms(self, request: EngineRequest) -> MmTerms:
        """What the multimodal settings change (:mod:`~kvcalc.engines.vllm.mm`)."""
        model = request.model
        return vllm_mm_terms(architectures=(*model.config_architectures, *model.architectures),
                             has_vision=bool(getattr(model.weights, "vision_encoder", False)),
                             limits=request.limit_mm_per_prompt, tp_mode=request.mm_encoder_tp_mode,
                             ipc_bytes=request.mm_ipc_gpu_memory_bytes,
                             tensor_parallel_size=request.tensor_parallel_size,
                             v033=D.resolve_profile(request.engine_version)[0].in_flight_batches)  # fmt: skip

    def scheduler_defaults(self, request: EngineRequest) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) this request will run with, defaults resolved;
        the planner needs them for the activation estimate before it knows the KV budget."""
        check_extra(self.name, request.extra, EXTRA_KEYS)
        profile = D.resolve_profile(request.engine_version)[0]
        tokens, seqs, _ = scheduler_batch(request, profile)
        return tokens, seqs

    def cudagraph_captures(self, request: EngineRequest) -> CudaGraphCaptures | None:
        """The CUDA graphs one worker captures, for the graph-memory estimate (none in mode NONE);
        None with ``--enforce-eager`` and on V0 (:mod:`~kvcalc.engines.vllm.graph_defaults`)."""
        tokens, seqs = self.scheduler_defaults(request)
        v1 = D.resolve_profile(request.engine_version)[0].v1
        return plan_captures(
            request, v1_engine=v1, max_num_batched_tokens=tokens, max_num_seqs=seqs
        )

    def speculative_draft(
        self, model: ModelShape, config: SpeculativeConfig, *, tensor_parallel_size: int,
        pipeline_parallel_size: int,
    ) -> SpeculativeDraft:  # fmt: skip
        """The draft vLLM 0.33 builds (:mod:`~kvcalc.engines.vllm.speculative`); the plan of an
        older profile refuses it (its rules are not modelled)."""
        from kvcalc.engines.vllm.speculative import vllm_draft

        return vllm_draft(model, config, config.draft, tensor_parallel_size=tensor_parallel_size,
                          pipeline_parallel_size=pipeline_parallel_size)  # fmt: skip

    def weight_dtype(self, request: EngineRequest) -> str | None:
        """``float32`` where ``--dtype auto`` runs the model in fp32 (a Gemma-2/3 or GLM-4 on a GPU
        without bf16: :mod:`~kvcalc.engines.vllm.dtypes`), for the weight estimate; else None."""
        if request.dtype is not None or not D.resolve_profile(request.engine_version)[0].v1:
            return None
        from kvcalc.engines.vllm.dtypes import serving_dtype
        from kvcalc.model.dtypes import FP32

        serving = serving_dtype(
            request.model, None, request.gpu_compute_capability, request.gpu_name
        )
        return "float32" if serving.dtype is FP32 else None

    def lora_slots(self, request: EngineRequest) -> LoraSlots | None:
        """The LoRA adapter slots one GPU holds in its weights (:mod:`~kvcalc.engines.vllm.lora`);
        None without ``--enable-lora``."""
        if request.lora is None:
            return None
        if not D.resolve_profile(request.engine_version)[0].in_flight_batches:
            raise InputError("LoRA slots are modelled for vLLM 0.33 only",
                             hint="plan with --engine-version 0.33, or without --enable-lora",
                             code="lora-not-modelled")  # fmt: skip
        from kvcalc.engines.vllm.dtypes import serving_dtype
        from kvcalc.model.dtypes import FP32

        # lora_dtype auto = the dtype vLLM serves the model in: --dtype, or its auto rule (fp32 for
        # a Gemma-2/3 or GLM-4 on a GPU without bf16)
        served = serving_dtype(request.model, request.weight_dtype,
                               request.gpu_compute_capability, request.gpu_name).dtype  # fmt: skip
        return vllm_lora_slots(request.model, request.lora,
                               tensor_parallel_size=request.tensor_parallel_size,
                               pipeline_parallel_size=request.pipeline_parallel_size,
                               weight_dtype="float32" if served is FP32 else None)  # fmt: skip

    def weight_offload(self, request: EngineRequest, layer_bytes: int) -> tuple[int, str]:
        """(bytes per GPU ``--cpu-offload-gb`` moves to the host, note): :mod:`~kvcalc.engines.vllm.offload`."""
        assert request.offload is not None
        return weight_offload(request.offload, layer_bytes=layer_bytes,
                              pipeline_parallel_size=request.pipeline_parallel_size,
                              has_vision=bool(request.model.vision_tower))  # fmt: skip

    def host_tier(
        self, request: EngineRequest, plan: KvCachePlan, offloaded_bytes: int
    ) -> HostTier:
        """The KV and weights this plan keeps in host memory (:mod:`~kvcalc.engines.vllm.offload`)."""
        assert request.offload is not None
        return host_tier(request.offload, gpu_kv_bytes=plan.kv_cache_bytes, num_blocks=plan.num_blocks,
                         block_size=plan.block_size, num_groups=max(1, len(plan.groups)),
                         tensor_parallel_size=request.tensor_parallel_size,
                         pipeline_parallel_size=request.pipeline_parallel_size,
                         mla=request.model.is_mla, offloaded_weight_bytes=offloaded_bytes)  # fmt: skip

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        profile = D.resolve_profile(request.engine_version)[0]
        if request.speculative is not None and profile.name != "0.33":
            raise InputError(f"speculative decoding is modelled for vLLM 0.33 only, not {profile.name}",
                             hint="plan it with --engine-version 0.33",
                             code="speculative-not-modelled")  # fmt: skip
        self.cudagraph_captures(request)  # graph settings vLLM refuses stop it starting
        if D.resolve_profile(request.engine_version)[0].in_flight_batches:  # the 0.33 profile
            refuse_unbuildable(request.model, "0.33")
            reason = unbuildable_reason(request.model)
            if reason:
                raise InputError(
                    f"vLLM 0.33 refuses to start: {reason}",
                    hint=unbuildable_hint(request.model),
                    code="unsupported-model",
                )
        setup = resolve_setup(request)
        if not setup.profile.v1:
            from kvcalc.engines.vllm.v0 import plan_v0

            return plan_v0(request, setup)
        return _plan_v1(request, setup)


# -- V1 ---------------------------------------------------------------------------------------
def _plan_v1(request: EngineRequest, setup: VllmSetup) -> KvCachePlan:
    target_layers = setup.model.num_layers
    setup = with_draft(request, setup)
    plan = _plan_layers(request, setup)
    drafted = setup.model.layers[target_layers:]
    if not drafted:
        return plan
    return replace(plan, draft_kv_bytes_per_token=sum(x.bytes_per_token for x in drafted))


def _plan_layers(request: EngineRequest, setup: VllmSetup) -> KvCachePlan:
    logs, notes = list(setup.logs), list(setup.notes)
    k = request.speculative.num_speculative_tokens if request.speculative else 0
    specs, owner = layer_specs(
        setup.model.layers, setup.block_size, setup.mamba_page_padded, setup.checkpoint_blocks, k
    )
    if owner and any(k != i for k, i in owner.items()) and request.pipeline_parallel_size > 1:
        raise InputError(
            "pipeline parallelism over layers that run attention and Mamba side by side "
            "(Falcon-H1) is not modelled",
            hint="plan it with --pipeline-parallel-size 1",
            code="unsupported-model",
        )
    recurrent = any(s.kind is SpecKind.MAMBA for s in specs.values())
    if request.disable_hybrid_kv_cache_manager and recurrent:
        # vllm/config/vllm.py (0.33.0): "hybrid SSM models (e.g. Jamba, Bamba) require HMA and will
        # fail at startup without it"
        raise InputError(
            "vLLM 0.33 needs the hybrid KV cache manager for models with Mamba/linear-attention "
            "state; they fail at startup with --disable-hybrid-kv-cache-manager",
            hint="drop --disable-hybrid-kv-cache-manager",
            code="unsupported-model",
        )
    if request.disable_hybrid_kv_cache_manager:
        promoted = promote_local_specs(specs)
        if promoted != specs:
            logs.append(
                "Hybrid KV cache manager is disabled for this hybrid model, This means we do not "
                "enable any optimizations for saving KV cache memory (e.g., dropping the KV cache "
                "outside the sliding window). The compute of layers like sliding window is still saved."
            )
            specs = promoted
    if LayerKind.COMPRESSED in setup.model.kinds:  # DeepSeek-V4
        from kvcalc.engines.vllm.dsv4 import packed_groups

        groups = packed_groups(setup.model)
    else:
        groups, group_logs = group_layers(specs)
        logs += group_logs
    if not groups:
        return _attention_free(request, setup, notes)
    stages = _stages(request, setup, groups)
    if request.pipeline_parallel_size > 1:
        notes.append(
            "PP stages (layers): "
            + ", ".join(f"{s.layers.start}-{s.layers.stop - 1}" for s in stages)
        )
    return _finish_v1(request, setup, groups, stages, logs, notes)


def _partition(value: object) -> tuple[object, ...] | None:
    """``pp_layer_partition`` as a tuple: a list, or vLLM's ``VLLM_PP_LAYER_PARTITION`` "16,16"."""
    if value is None:
        return None
    if isinstance(value, str):
        parts: list[object] = []
        for item in value.split(","):
            try:
                parts.append(int(item))
            except ValueError:
                parts.append(item)
        return tuple(parts)
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _stages(request: EngineRequest, setup: VllmSetup, groups: list[Group]) -> list[_Stage]:
    ranges = pp_stages(
        setup.model.num_layers, request.pipeline_parallel_size,
        _partition(request.extra.get("pp_layer_partition")),
    )  # fmt: skip
    override = extra_int(request.extra, "num_gpu_blocks_override", None)
    out = []
    per_stage = request.stage_available_kv_bytes
    for index, layers in enumerate(ranges):
        # one stage holds every cache layer, Falcon-H1's mixer keys (n + i) included
        keys = range(len(setup.model.layers) * 2) if len(ranges) == 1 else layers
        bpb = max(g.stage_page_bytes(keys) for g in groups)
        if bpb == 0:
            continue  # a stage without cache layers does not bound num_blocks
        stage_memory = (
            per_stage[index] if len(per_stage) == len(ranges) else request.available_kv_bytes
        )
        available = override * bpb if override else stage_memory
        check = _fit_budget(setup.profile, available, bpb)
        out.append(
            _Stage(
                layers=layers,
                bytes_per_block=bpb,
                num_blocks=max(0, available // bpb),
                check_bytes=check,
            )
        )
    return out


def _fit_budget(profile: D.VllmProfile, available: int, bytes_per_block: int) -> int:
    """``_check_enough_kv_cache_memory``'s budget: 0.33 holds the null block back."""
    return available - bytes_per_block if profile.reserves_null_block else available


def _finish_v1(
    request: EngineRequest, setup: VllmSetup, groups: list[Group], stages: list[_Stage],
    logs: list[str], notes: list[str],
) -> KvCachePlan:  # fmt: skip
    L = request.max_model_len
    blocks_per_request = sum(g.max_blocks(setup.sizing) for g in groups)
    num_blocks = min(s.num_blocks for s in stages)
    widest = max(stages, key=lambda s: s.bytes_per_block)
    needed = widest.bytes_per_block * blocks_per_request
    fits, estimate, error = _check_fit(request, setup, groups, stages, blocks_per_request)
    concurrency = num_blocks / blocks_per_request
    if setup.profile.merged_log_line:
        tokens = int(concurrency * L)
    else:
        tokens = num_blocks // len(groups) * min(g.block_size for g in groups)
    if setup.profile.available_line == "format_gib":
        logs.append(f"Available KV cache memory: {format_gib(request.available_kv_bytes)} GiB")
        if (
            setup.profile.in_flight_batches
            and request.cudagraph_memory_bytes
            and request.gpu_memory_bytes
        ):
            util = request.gpu_memory_utilization or setup.profile.gpu_memory_utilization
            logs.append(
                cudagraph_profiling_line(
                    util, request.cudagraph_memory_bytes, request.gpu_memory_bytes
                )
            )
    elif setup.profile.available_line:
        logs.append(f"Available KV cache memory: {request.available_kv_bytes / GIB:.2f} GiB")
    logs += [error] if error else capacity_lines(setup.profile, tokens, L, concurrency)
    if setup.refusal:
        logs, fits = [setup.refusal], False
    return KvCachePlan(
        engine="vllm", engine_version=setup.profile.name, kv_cache_dtype=setup.dtype_name,
        block_size=_block_size(setup, groups), num_blocks=num_blocks,
        kv_cache_bytes=num_blocks * widest.bytes_per_block, kv_cache_tokens=tokens,
        max_concurrency=concurrency, kv_bytes_per_token=_bytes_per_token(setup.model, stages),
        bytes_per_request=needed, fits=fits, estimated_max_model_len=estimate,
        groups=tuple(_group_row(g, setup.sizing, num_blocks, setup.model.num_layers) for g in groups),
        log_lines=tuple(logs), notes=tuple(notes), max_model_len=L,
        available_kv_bytes=request.available_kv_bytes, fit_budget_bytes=widest.check_bytes,
        max_num_batched_tokens=setup.mnbt, max_num_seqs=setup.max_num_seqs,
        refusal=setup.refusal, refusal_fix=setup.refusal_fix, config_log_lines=setup.config_logs,
        lookahead_tokens=request.speculative.lookahead_tokens if request.speculative else 0,
    )  # fmt: skip


def _check_fit(
    request: EngineRequest, setup: VllmSetup, groups: list[Group], stages: list[_Stage], blocks: int
) -> tuple[bool, int | None, str | None]:
    """``_check_enough_kv_cache_memory`` per stage, in order: (fits, estimate, error text)."""
    for stage in stages:
        if stage.check_bytes <= 0:
            return False, 0, no_memory_text(setup.profile)
        needed = stage.bytes_per_block * blocks
        if needed > stage.check_bytes:

            def fits_len(
                length: int, bpb: int = stage.bytes_per_block, budget: int = stage.check_bytes
            ) -> bool:
                s = replace(setup.sizing, max_model_len=length)
                return bpb * sum(g.max_blocks(s) for g in groups) <= budget

            estimate = binary_search_max_len(request.max_model_len, fits_len)
            return (
                False,
                estimate,
                too_long_text(
                    setup.profile, request.max_model_len, needed, stage.check_bytes, estimate
                ),
            )
    return True, None, None


def _block_size(setup: VllmSetup, groups: list[Group]) -> int:
    """The scheduler's block size: the smallest group block where groups differ (DeepSeek-V4's
    compressor states: 4), else the resolved block size."""
    if LayerKind.COMPRESSED in setup.model.kinds:
        return min(g.block_size for g in groups)
    return setup.block_size


def _bytes_per_token(model: ModelShape, stages: list[_Stage]) -> int:
    """Attention bytes per token on the most loaded stage (recurrent state is per sequence)."""
    return max(
        sum(model.layers[i].bytes_per_token for i in s.layers if _holds_kv(model.layers[i]))
        for s in stages
    )


def _holds_kv(layout: Layout) -> bool:
    return layout.kind in ATTENTION_KINDS or isinstance(layout, ParallelHybrid)


def _group_row(group: Group, sizing: Sizing, num_blocks: int, n: int) -> KvCacheGroup:
    return KvCacheGroup(
        kind=group.kind.layer_kind, uniform_type=group.uniform_type, num_layers=len(group.layers) + group.padding_layers, page_bytes=group.page_bytes,
        block_size=group.block_size, blocks_per_request=group.max_blocks(sizing),
        num_blocks=num_blocks, layer_indices=tuple(i % n for i in group.layers),
        padding_layers=group.padding_layers,
    )  # fmt: skip


def _attention_free(request: EngineRequest, setup: VllmSetup, notes: list[str]) -> KvCachePlan:
    notes.append(
        "attention-free model: no KV cache groups (vLLM keeps num_blocks = 1 for the null block)"
    )
    return KvCachePlan(
        engine="vllm", engine_version=setup.profile.name, kv_cache_dtype=setup.dtype_name,
        block_size=setup.block_size, num_blocks=1, kv_cache_bytes=0, kv_cache_tokens=0,
        max_concurrency=0.0, kv_bytes_per_token=0, bytes_per_request=0, fits=True,
        estimated_max_model_len=None, groups=(), log_lines=setup.logs, notes=tuple(notes),
        max_model_len=request.max_model_len, available_kv_bytes=request.available_kv_bytes,
        fit_budget_bytes=request.available_kv_bytes, max_num_batched_tokens=setup.mnbt,
        max_num_seqs=setup.max_num_seqs,
    )  # fmt: skip
