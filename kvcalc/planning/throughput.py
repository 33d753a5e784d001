"""Decode-throughput ceiling from the memory-bandwidth roofline (an upper bound, never a promise).

Each decode step of a batch of ``B`` running sequences, on the busiest GPU, must at least

- read the weights the step touches: every dense weight (attention, norms, shared experts, the
  lm_head; the input embedding is only gathered, B rows, so an *untied* embedding table is not
  counted) and, for MoE, the experts the batch activates. With uniform routing of ``k`` of ``E``
  experts per token the expected share of experts touched is ``1 − (1 − k/E)^B`` (``k/E`` at
  ``B = 1``, all of them at large batch);
- read every running sequence's KV cache at its context length (sliding windows capped, recurrent
  state read once per sequence);
- do ``2`` FLOPs per active parameter per token (the matmuls) plus ``2·h_q·(d_k + d_v)`` FLOPs per
  attention layer per context token (``QKᵀ`` and ``AV``; ``4·h·d`` for plain attention, so
  ``4·L·d_attn·ctx`` per token; MLA absorbed: ``d_k = kv_lora_rank + rope``, ``d_v = kv_lora_rank``).

``step = max(bytes / bandwidth, FLOPs / peak)``; ``tokens/s = efficiency · B / step``. TP splits
weights, heads and KV evenly; PP stages are assumed perfectly pipelined (per-GPU share = 1/PP).

Worked example (Qwen3-1.7B, bf16, 272 GB/s, 512 + 128 tokens): weights 3,441,149,952 B (tied
embedding, all read); context 512 + 128/2 = 576 tokens × 114,688 B = 66,060,288 B per sequence.
B = 1: 3,507,210,240 B per step → 272e9 / 3.507e9 = 77.6 tok/s (measured: 66, 85 %).
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any

from kvcalc.errors import InputError
from kvcalc.estimate.calibration import Calibration
from kvcalc.estimate.roofline import (
    DecodePoint,
    PrefillEstimate,
    Roofline,
    StepCost,
    causal_context_sum,
    decode_point,
    gpu_roofline,
    parse_bandwidth,
    prefill_estimate,
    step_cost,
)
from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape
from kvcalc.planning.inputs import MAX_COUNT, PlanInputs
from kvcalc.planning.result import CapacityPlan
from kvcalc.units import short_int

__all__ = [
    "ASSUMPTIONS", "DecodePoint", "PrefillEstimate", "Roofline", "StepCost", "ThroughputReport",
    "attach_throughput", "batch_limit", "causal_context_sum", "decode_point", "default_batches",
    "efficiency_of", "gpu_roofline", "parse_bandwidth", "prefill_estimate", "step_cost",
    "throughput_ceiling",
]  # fmt: skip

ASSUMPTIONS = (
    "upper bound: the memory-bandwidth roofline; no kernel launch, scheduling or sampling overhead",
    "each step reads the weights once; an untied input embedding is gathered (B rows), not read",
    "MoE: a batch of B reads E·(1 − (1 − k/E)^B) experts per layer (uniform routing)",
    "every running sequence reads its whole KV cache each step (sliding windows capped)",
    "FLOPs per token: 2 × active parameters + 2·h_q·(d_k + d_v) per attention layer and context token",
    "TP and PP split weights, heads and KV evenly; PP stages perfectly pipelined",
)


def default_batches(limit: int) -> tuple[int, ...]:
    """1, 2, 4, … up to ``limit``, and ``limit`` itself.

    >>> default_batches(24)
    (1, 2, 4, 8, 16, 24)
    """
    out, b = [], 1
    while b < limit:
        out.append(b)
        b *= 2
    return tuple(out + [max(1, limit)])


@frozen
class EngineCeiling:
    """One engine's figures in ``kvcalc throughput --engine A --engine B`` (same keys as the top level)."""

    engine: str
    kv_cache_dtype: str
    max_concurrency: float
    max_num_seqs: int | None
    batch_limit: int
    efficiency: float
    efficiency_source: str
    weights_bytes: int
    layer_kv_bytes_per_request: int
    points: tuple[DecodePoint, ...]
    prefill: PrefillEstimate | None
    verdict: str
    verdict_reason: str = ""


@frozen
class ThroughputReport:
    """The answer of ``kvcalc throughput``. Field names are the ``--json`` keys."""

    model: str
    gpu: str | None
    engine: str
    kv_cache_dtype: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_replicas: int
    max_model_len: int
    context_tokens: int
    context_rule: str
    #: KV-limited concurrency at ``max_model_len`` (or for the workload)
    max_concurrency: float
    max_num_seqs: int | None
    #: the largest batch that runs: min(floor(concurrency), max_num_seqs)
    batch_limit: int
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: float | None
    efficiency: float
    efficiency_source: str
    #: per GPU, as ``kvcalc plan`` counts them
    weights_bytes: int
    #: what one running request reads per step at ``context_tokens``, in the layers' own bytes per
    #: GPU (windows capped, recurrent state added, no block rounding)
    layer_kv_bytes_per_request: int
    points: tuple[DecodePoint, ...]
    #: None without a compute roof (prefill is compute-bound) or a prompt length
    prefill: PrefillEstimate | None
    verdict: str
    verdict_reason: str = ""
    upper_bound: bool = True
    assumptions: tuple[str, ...] = ASSUMPTIONS
    #: every engine asked for (``--engine`` repeated), in order; the top level is the first one's
    engines: tuple[EngineCeiling, ...] = ()

    def ceiling(self) -> EngineCeiling:
        """This report's engine figures as one entry of ``engines``."""
        return EngineCeiling(**{f.name: getattr(self, f.name) for f in fields(EngineCeiling)})

    def for_engine(self, entry: EngineCeiling) -> ThroughputReport:
        """This report with ``entry``'s figures at the top level (one table per engine)."""
        return replace(self, **{f.name: getattr(entry, f.name) for f in fields(EngineCeiling)})

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def batch_limit(result: CapacityPlan) -> int:
    """``min(floor(concurrency), max_num_seqs)``, at least 1 when the plan fits, else 0."""
    if result.verdict in ("wont-start", "weights-dont-fit"):
        return 0
    conc = (
        result.workload_concurrency
        if result.workload_concurrency is not None
        else result.max_concurrency
    )
    limit = max(1, math.floor(conc + 1e-9))
    return min(limit, result.max_num_seqs) if result.max_num_seqs else limit


def context_for(inputs: PlanInputs, max_model_len: int) -> tuple[int, str]:
    """Average context of a decoding sequence: prompt + output/2 with a workload, else max_model_len."""
    if inputs.prompt_len is not None:
        tokens = min(max_model_len, inputs.prompt_len + (inputs.output_len or 0) // 2)
        return tokens, "prompt + output/2, the average over a request's decode"
    return max_model_len, "max_model_len: every running sequence at full context"


def throughput_ceiling(
    model: ModelShape,
    result: CapacityPlan,
    inputs: PlanInputs,
    roof: Roofline,
    *,
    batches: tuple[int, ...] | None = None,
    efficiency: float = 1.0,
    efficiency_source: str = "none (pure ceiling)",
) -> ThroughputReport:
    """The decode ceiling at each batch (default: doubling up to the KV-limited maximum) (pure)."""
    if not 0 < efficiency <= 1.5:
        raise InputError(f"efficiency must be in (0, 1.5], got {efficiency}", code="invalid-input")
    for b in batches or ():
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_COUNT:
            shown = short_int(b) if isinstance(b, int) else repr(b)
            raise InputError(
                f"batch sizes must be integers from 1 to {MAX_COUNT:,}, got {shown}",
                code="invalid-input",
            )
    context, rule = context_for(inputs, result.max_model_len)
    limit = batch_limit(result)
    fits = limit > 0
    cost = step_cost(
        model, context_tokens=context, weights_bytes_per_gpu=result.weights_bytes,
        kv_cache_dtype=inputs.kv_cache_dtype, kv_bytes_per_token=result.kv_bytes_per_token or None,
        tensor_parallel_size=result.tensor_parallel_size, pipeline_parallel_size=result.pipeline_parallel_size,
        dtype=inputs.dtype, quantization=inputs.quantization,
    )  # fmt: skip
    wanted = (batches or default_batches(limit)) if fits else ()
    kv_cap = (
        result.workload_concurrency
        if result.workload_concurrency is not None
        else result.max_concurrency
    )
    points = tuple(
        decode_point(cost, roof, b, efficiency=efficiency, kv_limit=kv_cap) for b in wanted
    )
    prompt = inputs.prompt_len or 0
    report = ThroughputReport(
        model=result.model, gpu=result.gpu or roof.name or None, engine=result.engine,
        kv_cache_dtype=result.kv_cache_dtype, tensor_parallel_size=result.tensor_parallel_size,
        pipeline_parallel_size=result.pipeline_parallel_size,
        data_parallel_replicas=result.data_parallel_replicas, max_model_len=result.max_model_len,
        context_tokens=context, context_rule=rule, max_concurrency=kv_cap,
        max_num_seqs=result.max_num_seqs, batch_limit=limit,
        memory_bandwidth_bytes_per_s=roof.memory_bandwidth_bytes_per_s,
        peak_flops_per_s=roof.peak_flops_per_s, efficiency=efficiency, efficiency_source=efficiency_source,
        weights_bytes=result.weights_bytes, layer_kv_bytes_per_request=cost.kv_bytes_per_sequence,
        points=points,
        prefill=prefill_estimate(cost, roof, prompt, efficiency=efficiency)
        if prompt and roof.peak_flops_per_s else None,
        verdict=result.verdict, verdict_reason=result.verdict_reason,
        assumptions=ASSUMPTIONS + _parallel_assumptions(result),
    )  # fmt: skip
    return replace(report, engines=(report.ceiling(),))


def _parallel_assumptions(result: CapacityPlan) -> tuple[str, ...]:
    if result.data_parallel_size <= 1 and result.moe_parallel_size <= result.tensor_parallel_size:
        return ()
    return (
        f"data parallel {result.data_parallel_size}: the figures are one DP rank's; its routed "
        f"experts ({result.moe_parallel_size} MoE ranks) also serve the other ranks' tokens, "
        "which this per-rank ceiling does not count (unconfirmed)",
    )


def efficiency_of(calibration: Calibration | None) -> tuple[float, str]:
    """The decode efficiency a calibration measured, and where it came from; without a decode
    measurement: 1.0, the pure ceiling."""
    if calibration is None:
        return 1.0, "none (pure ceiling)"
    value = calibration.decode_efficiency
    if not value:
        return 1.0, f"none ({calibration.source} has no decode measurement)"
    return float(value), f"measured ({calibration.source})"


def attach_throughput(
    result: CapacityPlan,
    inputs: PlanInputs,
    model: ModelShape,
    *,
    efficiency: tuple[float, str] = (1.0, "none (pure ceiling)"),
) -> CapacityPlan:
    """``result`` with ``throughput`` set at its concurrency; unchanged when it doesn't fit or the
    GPU's bandwidth is unknown (only ``--gpu-memory`` given). Idempotent. ``efficiency``: the
    measured fraction of the ceiling and its source (:func:`efficiency_of`)."""
    if result.throughput is not None or not inputs.gpu or batch_limit(result) == 0:
        return result
    from kvcalc.model.gpus import get_gpu

    gpu = get_gpu(inputs.gpu)
    roof = gpu_roofline(gpu, fp8_compute=(inputs.quantization or "").lower() == "fp8")
    fraction, source = efficiency
    limit = batch_limit(result)
    batch = min(limit, inputs.target_concurrency) if inputs.target_concurrency else limit
    try:
        report = throughput_ceiling(model, result, inputs, roof, batches=(batch,), efficiency=fraction,
                                    efficiency_source=source)  # fmt: skip
    except InputError:  # no weight dimensions (e.g. --kv-cache-memory with a KV-only config)
        return result
    p = report.points[0]
    summary = PlanThroughput(
        batch=p.batch, tokens_per_s=p.tokens_per_s, per_request_tokens_per_s=p.per_request_tokens_per_s,
        bound=p.bound, bytes_per_step=p.bytes_per_step, weights_bytes_per_step=p.weights_bytes_per_step,
        kv_bytes_per_step=p.kv_bytes_per_step, step_seconds=p.step_seconds,
        context_tokens=report.context_tokens, context_rule=report.context_rule,
        memory_bandwidth_bytes_per_s=roof.memory_bandwidth_bytes_per_s,
        peak_flops_per_s=roof.peak_flops_per_s, efficiency=fraction,
        efficiency_source=source, upper_bound=True, assumptions=ASSUMPTIONS,
    )  # fmt: skip
    from dataclasses import asdict

    return replace(result, throughput=asdict(summary))


@frozen
class PlanThroughput:
    """``plan``'s ``throughput`` object: the decode ceiling at the plan's concurrency (an upper bound)."""

    #: requests decoding together: ``min(floor(concurrency), max_num_seqs)``, or ``--batch`` if smaller
    batch: int
    #: tokens per second over the whole batch, per engine (replica)
    tokens_per_s: float
    per_request_tokens_per_s: float
    #: what limits a step: ``memory`` (bandwidth) or ``compute``
    bound: str
    #: bytes read per step per GPU: weights plus every running request's KV
    bytes_per_step: int
    weights_bytes_per_step: int
    kv_bytes_per_step: int
    step_seconds: float
    #: the context each running request is assumed to hold
    context_tokens: int
    context_rule: str
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: float | None
    #: the measured fraction of the ceiling (1.0: the pure ceiling)
    efficiency: float
    efficiency_source: str
    upper_bound: bool
    assumptions: tuple[str, ...]


def resolve_roofline(
    inputs: PlanInputs, *, bandwidth: str | float | None = None, tflops: float | None = None
) -> Roofline:
    """The catalog GPU's roofs, with ``--bandwidth``/``--tflops`` overrides; an error without a bandwidth."""
    gpu = None
    if inputs.gpu:
        from kvcalc.model.gpus import get_gpu

        gpu = get_gpu(inputs.gpu)
    roof = (
        gpu_roofline(gpu, fp8_compute=(inputs.quantization or "").lower() == "fp8") if gpu else None
    )
    if bandwidth is not None:
        bw = parse_bandwidth(bandwidth) if isinstance(bandwidth, str) else float(bandwidth)
    elif roof is not None:
        bw = roof.memory_bandwidth_bytes_per_s
    else:
        raise InputError(
            "the GPU's memory bandwidth is unknown",
            hint="pass --gpu NAME from the catalog, or --bandwidth 448GB/s with --gpu-memory",
            code="bandwidth-unknown",
        )
    peak = tflops * 1e12 if tflops else (roof.peak_flops_per_s if roof else None)
    return Roofline(
        name=gpu.name if gpu else "", memory_bandwidth_bytes_per_s=bw, peak_flops_per_s=peak
    )
