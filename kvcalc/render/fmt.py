"""Number formatting for tables."""

from __future__ import annotations

from kvcalc.units import GIB, KIB, MIB


def int_(n: int) -> str:
    return f"{n:,}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 request``, ``152 requests``, ``1,024 requests``."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def size(num_bytes: int | float) -> str:
    """Binary units, two decimals: ``16.00 GiB``, ``128.00 KiB``, ``512 B``."""
    b = float(num_bytes)
    sign = "-" if b < 0 else ""
    b = abs(b)
    if b >= GIB:
        return f"{sign}{b / GIB:,.2f} GiB"
    if b >= MIB:
        return f"{sign}{b / MIB:,.2f} MiB"
    if b >= KIB:
        return f"{sign}{b / KIB:,.2f} KiB"
    return f"{sign}{int(b):,} B"


def bytes_and_size(num_bytes: int) -> str:
    return f"{num_bytes:,} B ({size(num_bytes)})" if num_bytes >= KIB else f"{num_bytes:,} B"


def unmodelled_warning(flags: tuple[str, ...] | list[str]) -> str:
    """The line printed above the tables of a plan that left serving flags out."""
    return (
        f"[bold yellow]warning:[/] not fully modelled: kvcalc does not model {', '.join(flags)} "
        "of the serving command (--ignore-unmodelled), so the figures below leave "
        f"{'them' if len(flags) > 1 else 'it'} out"
    )


def unverified_warning(model: str, keys: tuple[str, ...] = ()) -> str:
    """The line printed above the tables of a plan whose layout was not verified."""
    why = f" ({', '.join(keys)})" if keys else ""
    return (
        f"[bold yellow]warning:[/] {model}: layout not verified{why}; planned as plain attention "
        "because of --trust-layout, so the figures below are a guess"
    )


def parallelism(plan) -> str:
    """``DP 8 × TP 1 × PP 1, EP`` (with ``× N replicas`` and the context-parallel sizes)."""
    text = f"TP {plan.tensor_parallel_size} × PP {plan.pipeline_parallel_size}"
    dp = plan.data_parallel_size
    if dp > 1:
        text = f"DP {dp} × {text}"
    if plan.prefill_context_parallel_size > 1:
        text += f" × PCP {plan.prefill_context_parallel_size}"
    if plan.decode_context_parallel_size > 1:
        text += f", DCP {plan.decode_context_parallel_size}"
    if plan.expert_parallel:
        text += ", EP"
    replicas = plan.data_parallel_replicas // max(1, dp)
    if replicas > 1:
        text += f" × {replicas} replicas"
    return text
