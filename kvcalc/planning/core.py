"""The pure planning core: how many requests fit on these GPUs, as the engine itself will compute it.

:func:`plan` is pure: a :class:`~kvcalc.model.shape.ModelShape` and
:class:`~kvcalc.planning.inputs.PlanInputs` in, a frozen :class:`CapacityPlan` out; no file, Hub or
calibration record is read here (:mod:`kvcalc.planning.api` does that and passes the results in).
The steps:

1. the GPU and its memory as the driver reports it (``--gpu`` catalog or ``--gpu-memory``);
2. weights per GPU: ``--weights-memory`` if given, else safetensors metadata when known, else the
   config-based estimate (``kvcalc.estimate.weights``);
3. activation peak, non-torch and CUDA-graph memory (``kvcalc.estimate.overhead``), corrected by a
   calibration read beforehand;
4. the engine's own KV budget rule (``Engine.available_kv_bytes``), or ``--kv-cache-memory``;
5. the engine's block/token/concurrency arithmetic (``Engine.plan_kv_cache``);
6. the verdict and computed suggestions (``kvcalc.planning.suggest``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from kvcalc.engines.base import EngineRequest, KvCachePlan, RunMemory
from kvcalc.engines.names import traits
from kvcalc.errors import InputError
from kvcalc.estimate.calibration import Calibration
from kvcalc.estimate.interconnect import nvswitch_class
from kvcalc.model.shape import ModelShape
from kvcalc.planning.budget import (
    GIVEN_KV_TERMS,
    OUTSIDE_KEYS,
    KvBudget,
    kv_budget,
    less,
    outside_terms,
    shifted,
)
from kvcalc.planning.deployment import Deployment
from kvcalc.planning.deployment_terms import (
    overhead_with_terms,
    weights_with_terms,
    with_host_tier,
    with_mm_budget,
)
from kvcalc.planning.engine_asks import (
    host_tier,
    recurrent_dtypes,
    sliding_window_off,
    speculative_draft,
    weight_dtype,
)
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.parallel import gpu_layout, has_routed_experts
from kvcalc.planning.parallel_checks import check_model_parallelism
from kvcalc.planning.plan_overhead import GIVEN_KV_NOTE, estimated
from kvcalc.planning.plan_weights import plan_weights
from kvcalc.planning.request import engine_request, memory_inputs
from kvcalc.planning.result import CapacityPlan, MemoryBreakdown
from kvcalc.planning.speculative import speculative_summary, with_draft_weights
from kvcalc.planning.verdict import (
    Device,
    overhead_notes,
    pessimistic,
    runnable,
    starts,
    startup_band,
    workload_length,
)
from kvcalc.planning.verdict import headroom as kv_headroom
from kvcalc.planning.verdict import verdict as judge_verdict
from kvcalc.units import GIB

if TYPE_CHECKING:
    from kvcalc.engines.vllm.startup import StartupMemory
    from kvcalc.model.gpus import GpuSpec
    from kvcalc.sources.safetensors_meta import SafetensorsWeights


def plan(
    model: ModelShape,
    inputs: PlanInputs | Deployment,
    *,
    exact_weights: SafetensorsWeights | None = None,
    model_source: str = "",
    with_suggestions: bool = True,
    with_throughput: bool = False,
    calibration: Calibration | None = None,
) -> CapacityPlan:
    """Plan ``model`` under ``inputs``. Pure: no I/O.

    ``calibration`` is what ``inputs.calibration`` names, already read
    (:func:`kvcalc.planning.api.read_calibration`); a named file without it is refused rather than
    ignored. ``with_throughput`` adds the decode-throughput ceiling at the plan's concurrency
    (:func:`kvcalc.planning.throughput.attach_throughput`; skipped when the GPU's bandwidth is unknown).
    ``inputs`` may come resolved (:class:`~kvcalc.planning.deployment.Deployment`); the GPU and the
    engine are looked up once here, and the suggestions re-plan changed copies of it.
    """
    deployment = Deployment.resolve(inputs)
    inputs = deployment.inputs
    if inputs.calibration and calibration is None:
        raise InputError(
            f"plan() reads no files: the calibration {inputs.calibration} was not read",
            hint="call kvcalc.planning.api.plan_reference, or pass "
            "calibration=kvcalc.planning.api.read_calibration(inputs)",
        )
    engine = deployment.engine
    check_model_parallelism(model, inputs)
    model, state_notes = recurrent_dtypes(engine, model, inputs.mamba_cache_dtype,
                                          inputs.mamba_ssm_cache_dtype)  # fmt: skip
    model, window_notes = sliding_window_off(engine, model, inputs.disable_sliding_window)
    state_notes = (*state_notes, *window_notes)
    gpu, memory = deployment.gpu, deployment.memory_bytes
    draft = speculative_draft(engine, model, inputs.speculative_config,
                              tp=inputs.tensor_parallel_size, pp=inputs.pipeline_parallel_size)  # fmt: skip
    if inputs.disable_sliding_window and draft is not None and draft.num_layers:
        # vLLM 0.33 builds the drafter's ModelConfig without the flag (config/speculative.py),
        # so a draft's window layers would keep their window beside the target's full ones:
        # not recorded
        raise InputError(
            "--disable-sliding-window with a speculative draft that has cache layers is not "
            "modelled (what vLLM 0.33 does to the draft's layers was not recorded)",
            hint="plan without one of them (n-gram and suffix decoding have no draft layers)",
            code="unmodelled-option",
        )
    request = engine_request(model, deployment, available_kv_bytes=0, speculative=draft)
    served = weight_dtype(engine, request) if inputs.dtype is None else None
    weights, draft_weights = with_draft_weights(
        plan_weights(model, replace(inputs, dtype=served) if served else inputs, exact_weights),
        model,
        inputs,
        draft,
    )
    weights, terms = weights_with_terms(engine, request, inputs, weights)
    overhead = overhead_with_terms(
        estimated(model, inputs, gpu, engine, request, calibration), terms
    )
    on_device = overhead
    given_outside: tuple[tuple[str, int], ...] = ()
    if inputs.kv_cache_memory_bytes is not None and memory is not None:
        # a given KV size skips the budget, not the memory: vLLM still runs its profile pass and
        # captures its graphs beside it (gpu_worker.py: Worker.determine_available_memory)
        free_deployment = deployment.replace(kv_cache_memory_bytes=None)
        free = free_deployment.inputs
        free_request = engine_request(model, free_deployment, available_kv_bytes=0,
                                      speculative=draft)  # fmt: skip
        on_device = overhead_with_terms(
            estimated(model, free, gpu, engine, free_request, calibration), terms
        )
        on_device = replace(on_device, notes=(*overhead.notes, GIVEN_KV_NOTE))
        given_outside = tuple((name, getattr(on_device, key)) for name, key in GIVEN_KV_TERMS
                              if getattr(on_device, key) > 0)  # fmt: skip
    device = memory_inputs(model, deployment)
    util = inputs.gpu_memory_utilization
    if util is None:
        util = engine.default_gpu_memory_utilization(device)
    budget = kv_budget(engine, device.with_terms(gpu_memory_utilization=util), overhead=overhead,
                       given_kv_bytes=inputs.kv_cache_memory_bytes,
                       stage_weights_bytes=weights.stage_bytes or (weights.per_gpu_bytes,))  # fmt: skip
    if terms is not None:
        budget = less(budget, terms.ipc_bytes)
    available = budget.available_bytes
    graphs = overhead.cudagraph_bytes if overhead.cudagraph_estimated else 0
    startup = _startup(engine, inputs, gpu, memory, util)
    run = RunMemory(weights_bytes=weights.per_gpu_bytes, non_torch_bytes=on_device.non_torch_bytes,
                    activation_bytes=on_device.activation_bytes,
                    cudagraph_bytes=on_device.cudagraph_bytes,
                    startup_free_bytes=startup.free_bytes if startup else None,
                    kv_cache_memory_bytes=inputs.kv_cache_memory_bytes)  # fmt: skip
    request = request.with_budget(cudagraph_memory_bytes=graphs, run_memory=run)
    kv = engine.plan_kv_cache(_with_budget(request, budget, 0))
    length_notes = workload_length(inputs, kv.max_model_len)
    low_kv = kv
    if budget.low_bytes != available:  # judge the deployment on the pessimistic end
        low_kv = engine.plan_kv_cache(_with_budget(request, budget, budget.low_bytes - available))
    host = host_tier(engine, request, kv, weights.offloaded_bytes)
    outside = given_outside or outside_terms(engine, device.with_terms(gpu_memory_utilization=util),
                                             weights_bytes=weights.per_gpu_bytes, overhead=overhead)  # fmt: skip
    result = _assemble(
        model, inputs, gpu, memory, util, weights, on_device, budget, kv, low_kv, model_source,
        outside, startup,
    )  # fmt: skip
    if length_notes:
        result = replace(result, notes=(*length_notes, *result.notes))
    if draft is not None:
        result = replace(result, speculative=speculative_summary(draft, kv, draft_weights))
    result = with_host_tier(result, host, weights.offloaded_bytes, state_notes)
    result = with_mm_budget(result, terms)
    if with_suggestions and result.verdict not in ("ok",):
        from kvcalc.planning.suggest import suggestions

        def replan(changed: Deployment) -> CapacityPlan:
            return plan(model, changed, exact_weights=exact_weights, with_suggestions=False,
                        calibration=calibration)  # fmt: skip

        result = replace(result, suggestions=tuple(suggestions(model, deployment, result, replan)))
    if with_throughput:
        from kvcalc.planning.throughput import attach_throughput, efficiency_of

        result = attach_throughput(result, inputs, model, efficiency=efficiency_of(calibration))
    return result


def _startup(engine, inputs: PlanInputs, gpu: GpuSpec | None, memory: int | None,
             util: float | None) -> StartupMemory | None:  # fmt: skip
    """The engine's start-up check of its memory fraction (vLLM's ``request_memory``), where it
    has one and the GPU's size and the fraction are known; NCCL starts before the check on
    every GPU of a deployment of more than one (its data-parallel ranks' groups too)."""
    ask = getattr(engine, "startup_memory", None)
    if ask is None or not memory or not util:
        return None
    check: StartupMemory | None = ask(memory, util, gpus=inputs.deployment_gpus,
                                      version=inputs.engine_version, nvswitch=nvswitch_class(gpu))  # fmt: skip
    return check


def _log_lines(kv: KvCachePlan, unloadable: tuple[str, ...],
               startup: StartupMemory | None) -> tuple[str, ...]:  # fmt: skip
    """What the engine prints: its configuration lines only where it stops before sizing the
    KV cache (the start-up check refuses the fraction, with its error; the weights do not load)."""
    if startup is not None and startup.refused and not kv.refusal:
        return (*kv.config_log_lines, startup.message(startup.free_bytes))
    return kv.config_log_lines if unloadable else kv.log_lines


def _with_budget(request: EngineRequest, budget: KvBudget, delta: int) -> EngineRequest:
    """``request`` with the budget moved by ``delta`` (0, or to the band's low end)."""
    stages = shifted(budget.stage_bytes, delta)
    return request.with_budget(available_kv_bytes=budget.available_bytes + delta,
                               stage_available_kv_bytes=stages if len(stages) > 1 else ())  # fmt: skip


def layer_kv_bytes(
    model: ModelShape, kv_cache_dtype: str, tensor_parallel_size: int, tokens: int
) -> int | None:
    """One request of ``tokens`` in the layers' own bytes, per tensor-parallel rank (windows capped,
    state added); None for a format only its engine sizes."""
    from kvcalc.model.dtypes import parse_cache_dtype

    try:
        layout = parse_cache_dtype(kv_cache_dtype)
    except InputError:
        return None
    key = ("layer_kv_bytes", layout, tensor_parallel_size, tokens)
    return int(model.memo(key, lambda: model.with_cache_dtype(layout).per_rank(
        tensor_parallel_size).bytes_for(tokens)))  # fmt: skip


def _unloadable(engine: str, weights_bytes: int, memory: int | None) -> tuple[str, ...]:
    """Weights larger than the whole GPU: the engine fails loading them (CUDA out of memory in
    vLLM's ``load_model``, before ``determine_available_memory``) and prints nothing about its KV
    cache, so the plan shows none of those lines. Not for llama.cpp, whose ``--fit`` (on by
    default in llama-server) keeps layers on the host instead (``_server_note``)."""
    if not memory or weights_bytes <= memory or not traits(engine).torch_runtime:
        return ()
    return (f"{traits(engine).name.display} fails loading the weights ({weights_bytes / GIB:.2f} GiB "
            f"per GPU, more than the GPU's {memory / GIB:.2f} GiB) and prints nothing about its KV "
            f"cache",)  # fmt: skip


def _assemble(
    model,
    inputs,
    gpu,
    memory,
    util,
    weights,
    overhead,
    kv_budget: KvBudget,
    kv,
    low_kv,
    model_source,
    outside: tuple[tuple[str, int], ...] = (),
    startup: StartupMemory | None = None,
) -> CapacityPlan:
    available = kv_budget.available_bytes
    max_len = kv.max_model_len
    target = inputs.target_concurrency
    workload_tokens, workload_conc, conc, headroom, headroom_fraction = kv_headroom(
        inputs, kv, available
    )
    budget = kv.kv_cache_bytes if memory is None else (math.ceil(memory * util) if util else memory)
    if memory is not None and util and traits(kv.engine).overhead_in_reserve:
        # SGLang: rest = (total − non-torch) · mem_fraction_static − weights (the engine's own rule)
        budget = int((memory - overhead.non_torch_bytes) * util)
    used = weights.per_gpu_bytes + overhead.total_bytes + kv.kv_cache_bytes
    given = inputs.kv_cache_memory_bytes is not None
    device = (
        Device(
            total_bytes=memory,
            free_bytes=memory - used,
            outside=outside,
            given_kv=given,
            startup=startup,
        )  # fmt: skip
        if memory
        else None
    )
    verdict, reason = judge_verdict(
        inputs, kv, weights, budget, available, conc, headroom_fraction, workload_tokens,
        device=device,
    )  # fmt: skip
    if low_kv is not kv:  # judged on the pessimistic end of the band
        verdict, reason = pessimistic(
            inputs, kv, low_kv, weights, budget, kv_budget, workload_tokens, device,
            (verdict, reason),
        )  # fmt: skip
    verdict, reason = startup_band(kv.engine, device, (verdict, reason))
    unloadable = _unloadable(kv.engine, weights.per_gpu_bytes, memory)
    layout = gpu_layout(inputs, moe=has_routed_experts(model))
    replicas = layout.pools
    return CapacityPlan(
        model=model.name,
        model_source=model_source,
        engine=kv.engine,
        engine_version=kv.engine_version,
        gpu=gpu.name if gpu else None,
        num_gpus=layout.num_gpus,
        tensor_parallel_size=inputs.tensor_parallel_size,
        pipeline_parallel_size=inputs.pipeline_parallel_size,
        data_parallel_replicas=replicas,
        data_parallel_size=inputs.data_parallel_size,
        expert_parallel=layout.expert_parallel,
        moe_parallel_size=layout.moe_ranks,
        decode_context_parallel_size=inputs.decode_context_parallel_size,
        prefill_context_parallel_size=inputs.prefill_context_parallel_size,
        idle_gpus=layout.idle_gpus,
        kv_cache_dtype=kv.kv_cache_dtype,
        block_size=kv.block_size,
        num_blocks=kv.num_blocks,
        kv_cache_bytes=kv.kv_cache_bytes,
        kv_cache_tokens=kv.kv_cache_tokens,
        max_concurrency=kv.max_concurrency,
        total_max_concurrency=kv.max_concurrency * replicas,
        available_kv_bytes=available,
        available_kv_bytes_low=kv_budget.low_bytes,
        available_kv_bytes_high=kv_budget.high_bytes,
        weights_bytes=weights.per_gpu_bytes,
        weights_source=weights.source,
        num_parameters=weights.num_parameters,
        kv_bytes_per_token=kv.kv_bytes_per_token,
        engine_kv_bytes_per_request=kv.bytes_per_request,
        layer_kv_bytes_per_request=layer_kv_bytes(
            model, kv.kv_cache_dtype, inputs.tensor_parallel_size, max_len
        ),
        max_model_len=max_len,
        estimated_max_model_len=kv.estimated_max_model_len,
        max_num_seqs=kv.max_num_seqs,
        max_num_batched_tokens=kv.max_num_batched_tokens,
        target_concurrency=target,
        workload_tokens=workload_tokens,
        workload_concurrency=workload_conc,
        # a deployment that does not start runs nothing, whatever its cache would hold
        runnable_concurrency=runnable(conc, kv.max_num_seqs) if starts(verdict) else 0.0,
        headroom_bytes=headroom,
        headroom_fraction=headroom_fraction,
        verdict=verdict,
        verdict_reason=reason,
        memory=MemoryBreakdown(
            total_bytes=memory or 0,
            budget_bytes=budget,
            gpu_memory_utilization=util,
            weights_bytes=weights.per_gpu_bytes,
            activation_bytes=overhead.activation_bytes,
            non_torch_bytes=overhead.non_torch_bytes,
            cudagraph_bytes=overhead.cudagraph_bytes,
            kv_cache_bytes=kv.kv_cache_bytes,
            free_bytes=(memory - used) if memory else 0,
            outside_budget=tuple(OUTSIDE_KEYS[name] for name, _ in outside),
            startup_free_bytes=startup.free_bytes if startup else None,
            startup_free_low_bytes=startup.free_low_bytes if startup else None,
        ),
        groups=kv.groups,
        log_lines=_log_lines(kv, unloadable, startup),
        notes=tuple(
            dict.fromkeys(
                (
                    *unloadable,
                    *layout.notes,
                    *weights.notes,
                    *overhead_notes(kv.engine, overhead),
                    *kv.notes,
                )
            )
        ),
        inputs=inputs.to_dict(),
        layout_validated=model.layout_validated,
        fully_modelled=not inputs.unmodelled_flags,
        lora_bytes=weights.lora_bytes,
    )
