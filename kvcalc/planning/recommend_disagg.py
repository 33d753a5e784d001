"""``kvcalc recommend --disaggregated``: a prefill pool and a decode pool, each a recommendation.

Prefill/decode disaggregation (vLLM's and SGLang's PD split: prefill instances hand each
request's KV cache to decode instances) sizes two kinds of deployment:

- **decode**: holds every running request's whole prompt and output from admission — the
  workload's ``prompt_len + output_len`` (plus the speculative lookahead), block-rounded as the
  engine rounds it — for ``concurrency`` requests: the ordinary search at the workload;
- **prefill**: holds at least one request at ``max_model_len`` (the longest prompt it must take)
  with the engine's own activation profile: the search for one request at ``max_model_len``.

The ratio of the pools comes from their ceilings (the roofline of :mod:`kvcalc.estimate.roofline`):
one decode deployment finishes ``decode tokens/s ÷ output_len`` requests per second at the
requested concurrency, one prefill deployment ``prefill tokens/s ÷ prompt_len`` (one prompt at a
time per KV pool, compute-bound where the GPU's peak is known). The prefill deployments one decode
deployment needs are the quotient, rounded up. Both rates are upper bounds, so their quotient is an
estimate, not a bound: it is said so in the notes. The KV transfer between the pools (its
bandwidth and the connector's buffers) is not modelled.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.prices import PriceTable
from kvcalc.planning.recommend import Planner
from kvcalc.planning.recommend_result import Candidate, Recommendation, Requirements, Search


@frozen
class PoolRatio:
    """How many prefill deployments one decode deployment needs: the pairing of a decode row and
    a prefill row that costs least per hour in all."""

    #: the rows paired (1-based, in ``decode.candidates`` and ``prefill.candidates``)
    decode_row: int
    prefill_row: int

    #: requests per second one decode deployment finishes (decode ceiling over output_len)
    decode_requests_per_s: float
    #: requests per second one prefill deployment prefills (prefill ceiling over prompt_len)
    prefill_requests_per_s: float
    #: the quotient: prefill deployments per decode deployment (an estimate)
    prefill_per_decode: float
    #: that quotient rounded up: the prefill deployments to run beside one decode deployment
    prefill_deployments: int
    #: what one decode deployment and its prefill deployments cost per hour (null: a price unknown)
    usd_per_hour: float | None


@frozen
class DisaggregatedRecommendation:
    """The answer of ``kvcalc recommend --disaggregated``. Field names are the ``--json`` keys."""

    model: str
    prompt_len: int
    output_len: int
    #: the decode pool's search: ``concurrency`` requests of the workload, whole prompts resident
    decode: Recommendation
    #: the prefill pool's search: one request at ``max_model_len``
    prefill: Recommendation
    #: each prefill row's prefill ceiling at ``prompt_len``, tokens/s over its KV pools (an upper
    #: bound; null without the GPU's compute peak)
    prefill_tokens_per_s: tuple[float | None, ...]
    #: the cheapest pairing of the rows (null when either pool has no row, or no ceiling is known)
    ratio: PoolRatio | None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def disaggregated_bases(base: PlanInputs) -> tuple[PlanInputs, PlanInputs]:
    """The decode pool's and the prefill pool's fixed settings (the workload is required)."""
    if base.prompt_len is None or not base.output_len:
        raise InputError(
            "--disaggregated needs the workload: --prompt-len and --output-len",
            hint="the decode pool holds prompt + output per request; the pools' ratio is their "
            "prefill and decode rates at those lengths",
            code="usage",
        )
    prefill = replace(base, prompt_len=None, output_len=None, shared_prefix=0)
    return base, prefill


def pool_ratio(decode: Candidate, prefill: Candidate, prefill_tokens_per_s: float | None,
               prompt_len: int, output_len: int, rows: tuple[int, int] = (1, 1)
               ) -> PoolRatio | None:  # fmt: skip
    """The ratio of a decode row and a prefill row (see the module); ``prefill_tokens_per_s`` is
    the prefill deployment's ceiling over all its KV pools."""
    tps = decode.decode_tokens_per_s_upper_bound
    if not tps or not prefill_tokens_per_s:
        return None
    decode_rps = tps / output_len
    prefill_rps = prefill_tokens_per_s / prompt_len
    quotient = decode_rps / prefill_rps
    count = max(1, math.ceil(quotient - 1e-9))
    usd = None
    if decode.usd_per_hour is not None and prefill.usd_per_hour is not None:
        usd = decode.usd_per_hour + count * prefill.usd_per_hour
    return PoolRatio(decode_row=rows[0], prefill_row=rows[1], decode_requests_per_s=decode_rps, prefill_requests_per_s=prefill_rps,
                     prefill_per_decode=quotient, prefill_deployments=count,
                     usd_per_hour=usd)  # fmt: skip


NOTES = (
    "pairing: of every decode row with every prefill row, the one that costs least per hour "
    "with its prefill deployments",
    "pool ratio: the quotient of two ceilings (decode at the requested concurrency, prefill of "
    "one prompt at a time per KV pool), an estimate, not a bound",
    "the KV transfer between the pools (connector buffers, network bandwidth) is not modelled",
)


def prefill_tokens_per_s(model: ModelShape, best: Candidate, base: PlanInputs,
                         prompt_len: int) -> float | None:  # fmt: skip
    """One prefill deployment's prefill ceiling at ``prompt_len``, tokens/s over its KV pools
    (None without the GPU's compute peak)."""
    from kvcalc.estimate.roofline import gpu_roofline, prefill_estimate, step_cost
    from kvcalc.model.gpus import get_gpu

    plan = best.plan
    roof = gpu_roofline(get_gpu(best.gpu), fp8_compute=(best.quantization or "").lower() == "fp8")
    if not roof.peak_flops_per_s:
        return None
    cost = step_cost(
        model, context_tokens=prompt_len, weights_bytes_per_gpu=plan.weights_bytes,
        kv_cache_dtype=best.kv_cache_dtype, kv_bytes_per_token=plan.kv_bytes_per_token or None,
        tensor_parallel_size=plan.tensor_parallel_size,
        pipeline_parallel_size=plan.pipeline_parallel_size, dtype=base.dtype,
        quantization=best.quantization,
    )  # fmt: skip
    return prefill_estimate(cost, roof, prompt_len).tokens_per_s * best.kv_pools


def recommend_disaggregated(model: ModelShape, base: PlanInputs, requirements: Requirements,
                            search: Search, prices: PriceTable, planner: Planner, *,
                            reference: str) -> DisaggregatedRecommendation:  # fmt: skip
    """The decode pool's and the prefill pool's recommendations and their ratio (the module)."""
    from kvcalc.planning.recommend import recommend

    decode_base, prefill_base = disaggregated_bases(base)
    decode = recommend(model, decode_base, requirements, search, prices, planner,
                       reference=reference)  # fmt: skip
    prefill = recommend(model, prefill_base,
                        replace(requirements, concurrency=1, min_decode_tokens_per_s=None),
                        search, prices, planner, reference=reference)  # fmt: skip
    prompt, output = int(base.prompt_len or 0), int(base.output_len or 0)
    rates = tuple(prefill_tokens_per_s(model, c, base, prompt) for c in prefill.candidates)
    pairs = [
        pool_ratio(d, p, rate, prompt, output, (i, j))
        for i, d in enumerate(decode.candidates, start=1)
        for j, (p, rate) in enumerate(zip(prefill.candidates, rates, strict=True), start=1)
    ]
    known = [r for r in pairs if r is not None]
    ratio = min(known, key=_pair_rank) if known else None
    return DisaggregatedRecommendation(model=decode.model, prompt_len=prompt, output_len=output,
                                       decode=decode, prefill=prefill, prefill_tokens_per_s=rates,
                                       ratio=ratio, notes=NOTES)  # fmt: skip


def _pair_rank(r: PoolRatio) -> tuple[bool, float, int, int, int]:
    """Cheapest in all first (unknown prices last, by GPU deployments), then the better rows."""
    usd = r.usd_per_hour
    return (usd is None, usd or float(r.prefill_deployments), r.decode_row, r.prefill_row,
            r.prefill_deployments)  # fmt: skip
