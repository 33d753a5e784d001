"""Suggestions for a plan that is not ``ok``: each is a changed plan that was itself computed."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kvcalc.engines.base import KvCachePlan
from kvcalc.engines.vllm.startup import fraction_fitting
from kvcalc.errors import KvcalcError
from kvcalc.model.shape import ModelShape
from kvcalc.planning.deployment import Deployment
from kvcalc.planning.result import CapacityPlan, Suggestion
from kvcalc.units import GIB

#: plans a changed deployment of the same model
Replan = Callable[[Deployment], CapacityPlan]


def _try(replan: Replan, deployment: Deployment, **change: Any) -> CapacityPlan | None:
    try:
        return replan(deployment.replace(**change))
    except KvcalcError:
        return None


def _measured(r: CapacityPlan) -> str:
    """What a changed plan holds, and at what: the workload's requests when it has one (its
    verdict is judged there), else requests of ``max_model_len`` tokens."""
    if r.workload_concurrency is not None and r.workload_tokens:
        return (
            f"{r.workload_concurrency:,.2f} requests of the workload's {r.workload_tokens:,} tokens"
        )
    return f"{r.max_concurrency:,.2f} requests of {r.max_model_len:,} tokens"


def _make(text: str, change: dict[str, Any], result: CapacityPlan) -> Suggestion:
    return Suggestion(
        text=text,
        change=change,
        verdict=result.verdict,
        max_concurrency=result.max_concurrency,
        kv_cache_tokens=result.kv_cache_tokens,
        max_model_len=result.max_model_len,
    )


def suggestions(
    model: ModelShape, deployment: Deployment, base: CapacityPlan, replan: Replan
) -> list[Suggestion]:
    """Changes worth making, best first; only those that improve on ``base``. ``replan`` plans
    a changed deployment (the caller's :func:`~kvcalc.planning.core.plan`, without suggestions)."""
    inputs = deployment.inputs
    out = []
    verdict = base.verdict
    cap, target = base.max_num_seqs, inputs.target_concurrency
    if verdict == "below-target" and cap and target and cap < target:
        # the KV cache holds the target but the scheduler's cap does not: raise the cap
        r = _try(replan, deployment, max_num_seqs=target)
        if r and r.runnable_concurrency > base.runnable_concurrency:
            out.append(_make(f"--max-num-seqs {target}: {r.runnable_concurrency:.2f} requests at once "
                             f"→ {r.verdict}", {"max_num_seqs": target}, r))  # fmt: skip
    can = deployment.traits
    compact = can.compact_kv_dtype
    if compact and base.kv_cache_dtype not in (
        "fp8",
        "fp8_e5m2",
        "fp8_e4m3",
        "nvfp4",
        "int4",
        "q4_0",
    ):
        r = _try(replan, deployment, kv_cache_dtype=compact)
        if r and r.max_concurrency > base.max_concurrency:
            gain = (
                f" ({r.max_concurrency / base.max_concurrency:.2f}× more)"
                if base.max_concurrency > 0
                else ""
            )
            out.append(_make(f"--kv-cache-dtype {compact}: {_measured(r)}, "
                             f"{r.kv_cache_tokens:,} tokens{gain} → {r.verdict}", {"kv_cache_dtype": compact}, r))  # fmt: skip
    longest = _longest_fitting(model, deployment, base) if verdict == "wont-start" else None
    # never a max_model_len the workload's own requests do not fit in (the engine cuts or rejects them)
    request_tokens = (inputs.prompt_len or 0) + (inputs.output_len or 0)
    if longest and longest < request_tokens:
        longest = None
    if longest:
        length = longest
        r = _try(replan, deployment, max_model_len=length)
        if r:
            where = (" at the pessimistic end of the estimate"
                     if base.available_kv_bytes_low != base.available_kv_bytes else "")  # fmt: skip
            out.append(_make(f"--max-model-len {length}: the longest request that fits{where} "
                             f"({_measured(r)}) → {r.verdict}", {"max_model_len": length}, r))  # fmt: skip
    if verdict == "below-target" and inputs.target_concurrency and inputs.prompt_len is None:
        # measured at max_model_len: with a workload its requests, not max_model_len, set the count
        target_length = _length_for_concurrency(model, deployment, base, inputs.target_concurrency)
        if target_length:
            r = _try(replan, deployment, max_model_len=target_length)
            if r:
                out.append(_make(f"--max-model-len {target_length}: {_measured(r)} → {r.verdict}",
                                 {"max_model_len": target_length}, r))  # fmt: skip
    out.extend(_parallelism(deployment, base, replan))
    util = base.memory.gpu_memory_utilization
    # the fraction the start-up check accepts, else one that leaves room for what comes after the KV
    lower = _startup_fraction(deployment, base, replan) if verdict == "wont-start" else None
    if lower is None and verdict == "wont-start":
        lower = _lower_fraction(deployment, base, replan)
    if lower is not None:
        out.append(lower)
    if (
        can.memory_fraction_knob
        and util is not None
        and util < 0.95
        and inputs.kv_cache_memory_bytes is None
    ):
        r = _try(replan, deployment, gpu_memory_utilization=0.95)
        if r and r.max_concurrency > base.max_concurrency:
            out.append(_make(f"--gpu-memory-utilization 0.95: {_measured(r)} → {r.verdict}",
                             {"gpu_memory_utilization": 0.95}, r))  # fmt: skip
    if verdict in _NOT_STARTING:  # a change that still does not start fixes nothing
        out = [x for x in out if x.verdict not in _NOT_STARTING]
    return out


#: verdicts of a deployment that does not start
_NOT_STARTING = ("wont-start", "weights-dont-fit")
#: how far tensor parallelism is searched for a deployment that does not start (× the given)
_TP_STEPS = (2, 4, 8, 16)


def _smallest_tp(deployment: Deployment, replan: Replan, **change: Any) -> CapacityPlan | None:
    """The plan at the smallest tensor-parallel size, doubling from the given one, at which the
    deployment starts (each planned; sizes the model cannot split are skipped); None if none."""
    for step in _TP_STEPS:
        tp = deployment.inputs.tensor_parallel_size * step
        r = _try(replan, deployment, tensor_parallel_size=tp, num_gpus=None, **change)
        if r is not None and r.verdict not in _NOT_STARTING:
            return r
    return None


def _parallelism(deployment: Deployment, base: CapacityPlan, replan: Replan) -> list[Suggestion]:
    """More tensor parallelism, and fp8 weights: for a deployment that does not start, the
    smallest tensor-parallel size that starts (weights that do not fit one GPU: with fp8 weights
    too, at the smallest size that then starts); else the next size where it holds more."""
    inputs = deployment.inputs
    out = []
    pp = inputs.pipeline_parallel_size
    if base.verdict in _NOT_STARTING:
        r = _smallest_tp(deployment, replan)
    else:
        tp = inputs.tensor_parallel_size * 2
        r = _try(replan, deployment, tensor_parallel_size=tp, num_gpus=None)
        r = r if r is not None and r.max_concurrency > base.max_concurrency else None
    if r is not None:
        tp = r.tensor_parallel_size
        out.append(_make(f"--tensor-parallel-size {tp} ({tp * pp} GPUs): {_measured(r)} "
                         f"→ {r.verdict}", {"tensor_parallel_size": tp}, r))  # fmt: skip
    if base.verdict == "weights-dont-fit" and inputs.quantization is None:
        q = _try(replan, deployment, quantization="fp8")
        if q is not None and q.verdict not in _NOT_STARTING:
            out.append(_make(f"--quantization fp8 (weights): {_measured(q)} → {q.verdict}",
                             {"quantization": "fp8"}, q))  # fmt: skip
        elif (q := _smallest_tp(deployment, replan, quantization="fp8")) is not None and (
            r is None or q.tensor_parallel_size < r.tensor_parallel_size
        ):
            tp = q.tensor_parallel_size
            out.append(_make(f"--quantization fp8 --tensor-parallel-size {tp} ({tp * pp} GPUs, fp8 "
                             f"weights): {_measured(q)} → {q.verdict}",
                             {"quantization": "fp8", "tensor_parallel_size": tp}, q))  # fmt: skip
    return out


def _lower_fraction(
    deployment: Deployment, base: CapacityPlan, replan: Replan
) -> Suggestion | None:
    """A memory fraction low enough that what the engine allocates after its KV cache (CUDA
    graphs, SGLang's activations) fits on the GPU, when the plan is short of device memory: the
    fraction less the shortfall's share of the GPU, then 0.01 lower at a time (a few tries)."""
    inputs = deployment.inputs
    m = base.memory
    # what the plan leaves beside what the GPU holds before the engine starts (vLLM's CUDA context)
    left = m.free_bytes - (m.total_bytes - m.startup_free_bytes if m.startup_free_bytes else 0)
    if left >= 0 or not m.total_bytes:
        return None
    given = inputs.kv_cache_memory_bytes
    if given is not None:  # the size given less the shortfall, in hundredths of a GiB
        size = math.floor((given + left) / GIB * 100) / 100
        r = _try(replan, deployment, kv_cache_memory_bytes=int(size * GIB)) if size > 0 else None
        if r is None or r.verdict in _NOT_STARTING:
            return None
        return _make(f"--kv-cache-memory {size:.2f}GiB: leaves room for what the engine allocates "
                     f"beside it ({_measured(r)}) → {r.verdict}",
                     {"kv_cache_memory_bytes": int(size * GIB)}, r)  # fmt: skip
    if m.gpu_memory_utilization is None:
        return None
    value = math.floor((m.gpu_memory_utilization + left / m.total_bytes) * 100) / 100
    for _ in range(5):
        if value <= 0:
            return None
        r = _try(replan, deployment, gpu_memory_utilization=value)
        if r is not None and r.verdict not in _NOT_STARTING:
            return _make(f"--gpu-memory-utilization {value:.2f}: leaves room for what the engine "
                         f"allocates after its KV cache ({_measured(r)}) → {r.verdict}",
                         {"gpu_memory_utilization": value}, r)  # fmt: skip
        value = round(value - 0.01, 2)
    return None


def _startup_fraction(
    deployment: Deployment, base: CapacityPlan, replan: Replan
) -> Suggestion | None:
    """The highest memory fraction the engine's start-up check accepts (vLLM: ``ceil(total · u)``
    no more than what is free when it starts, at the pessimistic end where that is uncertain),
    when the fraction asked for is refused there or may be."""
    m = base.memory
    free, util = m.startup_free_low_bytes, m.gpu_memory_utilization
    if free is None or util is None or not m.total_bytes or math.ceil(m.total_bytes * util) <= free:
        return None
    value = fraction_fitting(free, m.total_bytes)
    r = _try(replan, deployment, gpu_memory_utilization=value) if value > 0 else None
    if r is None or r.verdict in _NOT_STARTING:
        return None
    return _make(f"--gpu-memory-utilization {value:.2f}: the highest {deployment.traits.name.display}'s "
                 f"start-up check accepts ({free / GIB:.2f} GiB free when it starts) "
                 f"({_measured(r)}) → {r.verdict}", {"gpu_memory_utilization": value}, r)  # fmt: skip


def _length_for_concurrency(
    model: ModelShape, deployment: Deployment, base: CapacityPlan, target: int
) -> int | None:
    """The longest max_model_len at which ``target`` requests fit. The KV budget does not depend on
    the length, so this asks only the engine's block arithmetic, not the whole plan: first at the
    length one plan's blocks suggest (``block size × ⌊blocks / target⌋``, the answer for a cache
    whose pool does not change with the length), kept when it holds ``target`` and one token more
    does not; else a binary search."""
    from kvcalc.planning.request import engine_request

    engine = deployment.engine
    # the pessimistic end of the budget: the verdict is judged there (kvcalc.planning.budget)
    request = engine_request(model, deployment,
                             available_kv_bytes=max(0, base.available_kv_bytes_low))  # fmt: skip

    def holds(length: int) -> KvCachePlan | None:
        try:
            kv = engine.plan_kv_cache(replace(request, max_model_len=length))
        except KvcalcError:
            return None
        return kv if kv.fits and kv.max_concurrency >= target else None

    lo, hi, best = 1, base.max_model_len, None
    try:
        whole = engine.plan_kv_cache(request)
    except KvcalcError:
        whole = None
    if whole is not None and whole.block_size > 0:
        guess = whole.block_size * (whole.num_blocks // target)
        if 1 <= guess < hi and holds(guess) and not holds(guess + 1):
            return guess
    while lo <= hi:
        mid = (lo + hi) // 2
        if holds(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def _longest_fitting(model: ModelShape, deployment: Deployment, base: CapacityPlan) -> int | None:
    """The longest max_model_len one request fits in, at the pessimistic end of the budget."""
    if base.available_kv_bytes_low == base.available_kv_bytes:
        return base.estimated_max_model_len
    from kvcalc.planning.request import engine_request

    request = engine_request(model, deployment,
                             available_kv_bytes=max(0, base.available_kv_bytes_low))  # fmt: skip
    try:
        return deployment.engine.plan_kv_cache(request).estimated_max_model_len
    except KvcalcError:
        return None
