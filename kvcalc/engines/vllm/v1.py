"""vLLM's V1 engine: groups, per-stage blocks, the capacity line and the one-request fit check.

Moved out of :mod:`~kvcalc.engines.vllm.engine` (steps 2–5 of its docstring); the V0 engine is
:mod:`~kvcalc.engines.vllm.v0`.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan, RunMemory
from kvcalc.engines.common import binary_search_max_len, pp_stages
from kvcalc.engines.extra import extra_int
from kvcalc.engines.vllm import defaults as D
from kvcalc.engines.vllm.drafting import with_draft
from kvcalc.engines.vllm.groups import (
    ATTENTION_KINDS,
    Group,
    Sizing,
    SpecKind,
    group_layers,
    promote_local_specs,
)
from kvcalc.engines.vllm.hybrid import is_parallel_hybrid, layer_specs
from kvcalc.engines.vllm.messages import (
    capacity_lines,
    cudagraph_profiling_line,
    given_kv_line,
    model_loading_line,
    no_memory_text,
    too_long_text,
    usage_line,
)
from kvcalc.engines.vllm.setup import VllmSetup
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.layouts import LayerKind, Layout, RecurrentState
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, format_gib


@frozen
class _Stage:
    layers: range
    bytes_per_block: int
    num_blocks: int
    check_bytes: int


def plan_v1(request: EngineRequest, setup: VllmSetup) -> KvCachePlan:
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
    shape = (setup.block_size, setup.mamba_page_padded, setup.checkpoint_blocks, k)
    # the same per-rank model is sized many times in one plan (its band, its suggestions)
    specs, owner = setup.model.memo(
        ("vllm.layer_specs", *shape), lambda: layer_specs(setup.model.layers, *shape)
    )
    if request.pipeline_parallel_size > 1 and owner and any(k != i for k, i in owner.items()):
        raise InputError(
            "pipeline parallelism over layers that run attention and Mamba side by side "
            "(Falcon-H1) is not modelled",
            hint="plan it with --pipeline-parallel-size 1",
            code="unsupported-model",
        )
    promoted_from = specs
    recurrent = setup.model.memo(("vllm.mamba_specs", *shape),
                                 lambda: any(s.kind is SpecKind.MAMBA for s in specs.values()))  # fmt: skip
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
        if specs is promoted_from:
            groups, group_logs = setup.model.memo(
                ("vllm.group_layers", *shape), lambda: group_layers(specs)
            )
        else:
            groups, group_logs = group_layers(specs)
        groups = list(groups)
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
        check = fit_budget(setup.profile, available, bpb)
        out.append(
            _Stage(
                layers=layers,
                bytes_per_block=bpb,
                num_blocks=max(0, available // bpb),
                check_bytes=check,
            )
        )
    return out


def _usage_line(request: EngineRequest, setup: VllmSetup, run: RunMemory) -> list[str]:
    """The start-up usage line vLLM prints once its graphs are captured (none where the GPU's size
    or the memory free at start-up is not known)."""
    if run.startup_free_bytes is None or not request.gpu_memory_bytes:
        return []
    util = request.gpu_memory_utilization or setup.profile.gpu_memory_utilization
    return [usage_line(free_bytes=run.startup_free_bytes, total_bytes=request.gpu_memory_bytes,
                       utilization=util, consumed_bytes=run.weights_bytes + run.non_torch_bytes,
                       peak_activation_bytes=run.activation_bytes + request.cudagraph_memory_bytes,
                       cudagraph_bytes=run.cudagraph_bytes,
                       available_kv_bytes=request.available_kv_bytes)]  # fmt: skip


def fit_budget(profile: D.VllmProfile, available: int, bytes_per_block: int) -> int:
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
    run = request.run_memory if setup.profile.memory_usage_lines else None
    given = run is not None and run.kv_cache_memory_bytes is not None
    if run is not None:
        logs.append(model_loading_line(run.weights_bytes))
    if given:  # the memory profile is skipped: its lines are not printed
        assert run is not None and run.kv_cache_memory_bytes is not None
        logs.append(given_kv_line(run.startup_free_bytes, run.kv_cache_memory_bytes))
    elif setup.profile.available_line == "format_gib":
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
    if run is not None and not given and not error:
        logs += _usage_line(request, setup, run)
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

    def on(layers: range) -> int:
        return sum(model.layers[i].bytes_per_token for i in layers if _holds_kv(model.layers[i]))

    return max(model.memo(("vllm.stage_bytes_per_token", s.layers), lambda r=s.layers: on(r))
               for s in stages)  # fmt: skip


def _holds_kv(layout: Layout) -> bool:
    return layout.kind in ATTENTION_KINDS or (
        isinstance(layout, RecurrentState) and is_parallel_hybrid(layout)
    )


def _group_row(group: Group, sizing: Sizing, num_blocks: int, n: int) -> KvCacheGroup:
    return KvCacheGroup(
        kind=group.kind.layer_kind, uniform_type=group.uniform_type, num_layers=len(group.layers) + group.padding_layers, page_bytes=group.page_bytes,
        block_size=group.block_size, blocks_per_request=group.max_blocks(sizing),
        num_blocks=num_blocks, layer_indices=group.layer_positions(n),
        padding_layers=group.padding_layers, encoder_tokens=group.specs[0].encoder_tokens,
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
