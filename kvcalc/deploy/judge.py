"""Judge a plan against a deployment's requirements: a list of :class:`Failure`, empty if it passes.

Pure arithmetic on a :class:`~kvcalc.planning.result.CapacityPlan`:

- ``allow_verdicts`` (default ``[ok, tight]``): the plan's verdict must be one of them, minus the
  verdicts named by ``--fail-on``. ``wont-start`` and ``weights-dont-fit`` always fail.
- ``min_concurrency``: concurrent requests across all data-parallel replicas — at the workload's
  lengths when the deployment gives a ``workload`` (``workload_concurrency``), else at
  ``max_model_len`` (``max_concurrency``).
- ``min_max_model_len``: the configured ``max_model_len`` (the model's default if not set).
- ``max_host_memory``: ``host_memory_bytes`` (the host tiers: KV offloading, a NIXL host buffer,
  offloaded weights) at most this size; a tier of unknown size fails it;
- ``min_headroom``: ``headroom_bytes`` (KV memory left beyond the target concurrency) against a size,
  or ``headroom_fraction`` (its share of the KV pool) against a percentage.

Each failure records the requirement, what was expected and what the plan gives (in the
requirement's own unit: requests, tokens, bytes or a fraction), a sentence, and the line to point at.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kvcalc.deploy.spec import Deployment
from kvcalc.frozen import frozen
from kvcalc.units import GIB

if TYPE_CHECKING:
    from kvcalc.planning.result import CapacityPlan

#: the file key whose line a verdict failure points at, when written
_VERDICT_KEYS = {
    "wont-start": ("max_model_len", "command", "model"),
    "weights-dont-fit": ("model", "command", "gpu", "gpu_memory"),
    "below-target": ("max_num_seqs", "batch", "command"),
    "tight": ("requirements.allow_verdicts", "gpu_memory_utilization", "command"),
    "ok": ("requirements.allow_verdicts",),
}


@frozen
class Failure:
    """A requirement the plan misses."""

    #: the requirement's key (``min_concurrency``, ``allow_verdicts``...)
    requirement: str
    #: what the file asks for
    expected: Any
    #: what the plan gives
    actual: Any
    message: str
    #: the line of the key in the file
    line: int

    def to_dict(self) -> dict[str, Any]:
        return {"requirement": self.requirement, "expected": self.expected, "actual": self.actual,
                "message": self.message, "line": self.line}  # fmt: skip


def _gib(num_bytes: float) -> str:
    return f"{num_bytes / GIB:.2f} GiB"


def judge(
    dep: Deployment, plan: CapacityPlan, *, fail_on: Iterable[str] = ()
) -> tuple[Failure, ...]:
    """Every requirement of ``dep`` that ``plan`` misses."""
    req = dep.requirements
    failures = []
    refused = set(fail_on)
    allowed = [v for v in req.allow_verdicts if v not in refused]
    if plan.verdict not in allowed:
        why = f" (--fail-on {plan.verdict})" if plan.verdict in req.allow_verdicts else ""
        failures.append(
            Failure(
                requirement="allow_verdicts",
                expected=allowed,
                actual=plan.verdict,
                message=f"verdict {plan.verdict}{why}: {plan.verdict_reason}",
                line=dep.line_of(*_VERDICT_KEYS.get(plan.verdict, ())),
            )
        )
    if req.min_concurrency is not None:
        replicas = max(1, plan.data_parallel_replicas)
        per_engine = plan.max_concurrency
        where = f"at max_model_len {plan.max_model_len:,}"
        if dep.has_workload and plan.workload_concurrency is not None:
            per_engine = plan.workload_concurrency
            where = f"at the workload's {plan.workload_tokens:,} tokens"
        capped = ""
        if plan.max_num_seqs and per_engine > plan.max_num_seqs:
            capped = f" but max_num_seqs {plan.max_num_seqs:,} runs {plan.max_num_seqs:,} at once"
            where += f" ({per_engine:.2f} in the KV cache)"
            per_engine = plan.max_num_seqs
        actual = per_engine * replicas
        if actual < req.min_concurrency:
            across = f" across {replicas} replicas" if replicas > 1 else ""
            where += capped
            failures.append(
                Failure(
                    requirement="min_concurrency",
                    expected=req.min_concurrency,
                    actual=round(actual, 2),
                    message=f"{actual:.2f} concurrent requests fit {where}{across}; "
                    f"min_concurrency is {req.min_concurrency:g}",
                    line=dep.line_of("requirements.min_concurrency"),
                )
            )
    if req.min_max_model_len is not None and plan.max_model_len < req.min_max_model_len:
        failures.append(
            Failure(
                requirement="min_max_model_len",
                expected=req.min_max_model_len,
                actual=plan.max_model_len,
                message=f"max_model_len is {plan.max_model_len:,} tokens; min_max_model_len is "
                f"{req.min_max_model_len:,}",
                line=dep.line_of("requirements.min_max_model_len", "max_model_len"),
            )
        )
    if req.min_headroom is not None:
        failures.extend(_headroom(dep, plan, req.min_headroom))
    if req.max_host_memory is not None:
        failures.extend(_host_memory(dep, plan, req.max_host_memory))
    return tuple(failures)


def _host_memory(dep: Deployment, plan: CapacityPlan, maximum: int) -> list[Failure]:
    """``max_host_memory``: the host tiers' bytes (``host_memory_bytes``); unknown never passes."""
    need = plan.host_memory_bytes
    if need is not None and need <= maximum:
        return []
    message = (f"host memory needed is not known (a host tier kvcalc cannot size, see the notes); "
               f"max_host_memory is {_gib(maximum)}" if need is None else
               f"host memory needed is {_gib(need)}; max_host_memory is {_gib(maximum)}")  # fmt: skip
    return [Failure(requirement="max_host_memory", expected=int(maximum), actual=need,
                    message=message, line=dep.line_of("requirements.max_host_memory"))]  # fmt: skip


def _headroom(
    dep: Deployment, plan: CapacityPlan, min_headroom: tuple[str, float]
) -> list[Failure]:
    unit, minimum = min_headroom
    line = dep.line_of("requirements.min_headroom")
    if unit == "bytes":
        if plan.headroom_bytes >= minimum:
            return []
        return [
            Failure(
                requirement="min_headroom",
                expected=int(minimum),
                actual=plan.headroom_bytes,
                message=f"KV headroom is {_gib(plan.headroom_bytes)} beyond the target concurrency; "
                f"min_headroom is {_gib(minimum)}",
                line=line,
            )
        ]
    if plan.headroom_fraction >= minimum:
        return []
    return [
        Failure(
            requirement="min_headroom",
            expected=minimum,
            actual=round(plan.headroom_fraction, 4),
            message=f"KV headroom is {plan.headroom_fraction:.1%} of the KV cache beyond the target "
            f"concurrency; min_headroom is {minimum:.1%}",
            line=line,
        )
    ]
