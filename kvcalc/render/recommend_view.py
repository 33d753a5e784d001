"""The ``kvcalc recommend`` report: the ranked table (80 columns), each row's commands, the
winner's full plan, and with ``--explain`` why the configurations ranked before it were rejected."""

from __future__ import annotations

import textwrap

from kvcalc.engines.names import traits
from kvcalc.render.console import stdout_console

#: the report's width: the table and the prose fit it (commands stay one line each, to paste)
WIDTH = 80


def parallel_text(c) -> str:
    """``TP 4``, ``TP 2 PP 2``, ``TP 8 EP DCP 8``, ``TP 1 DP 4``, ``TP 1 ×4`` (four independent copies)."""
    parts = [f"TP {c.tensor_parallel_size}"]
    if c.pipeline_parallel_size > 1:
        parts.append(f"PP {c.pipeline_parallel_size}")
    if c.data_parallel_size > 1:  # vLLM's -dp, or independent copies (--num-gpus) elsewhere
        dp = c.data_parallel_size
        parts.append(f"DP {dp}" if traits(c.engine).moe_data_parallel else f"×{dp}")
    if c.enable_expert_parallel:
        parts.append("EP")
    if c.decode_context_parallel_size > 1:
        parts.append(f"DCP {c.decode_context_parallel_size}")
    return " ".join(parts)


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def _requests(c) -> str:
    total = f"{c.total_concurrency:,.1f}"
    if c.kv_pools == 1:
        return total
    return f"{total} ({c.kv_pools}×{c.concurrency_per_replica:,.1f})"


def _ceiling(c) -> str:
    tps = c.decode_tokens_per_s_upper_bound
    return "-" if tps is None else f"{tps:,.0f}"


def _say(console, text: str, indent: str = "") -> None:
    for line in textwrap.wrap(text, WIDTH - 1, initial_indent=indent,
                              subsequent_indent=indent + "  ", break_on_hyphens=False):  # fmt: skip
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _where(result) -> str:
    where = f"{result.concurrency:,} concurrent request{'s' if result.concurrency != 1 else ''}"
    if result.candidates:
        first = result.candidates[0].plan
        where += (f" of {first.workload_tokens:,} tokens" if first.workload_tokens
                  else f" at max_model_len {first.max_model_len:,}")  # fmt: skip
    return where


def _table(result, prefill: tuple[float | None, ...] | None = None) -> None:
    """The ranked rows; ``prefill``: a prefill pool's, with each row's prefill ceiling in place
    of the decode ceiling and the price per output token."""
    from rich.table import Table

    console = stdout_console()
    engines = {c.engine for c in result.candidates}
    table = Table(box=None, pad_edge=False, header_style="bold")
    last = ["prefill ≤", "$/hour"] if prefill is not None else ["decode ≤", "$/hour", "$/M out"]
    heads = ["#", "GPUs", "parallel", "KV", *(["engine"] if len(engines) > 1 else []),
             "requests", "room", *last]  # fmt: skip
    for head in heads:
        table.add_column(head, justify="left" if head in ("GPUs", "parallel", "KV", "engine")
                         else "right", no_wrap=True)  # fmt: skip
    for i, c in enumerate(result.candidates, start=1):
        if prefill is not None:
            rate = prefill[i - 1]
            tail = ["-" if rate is None else f"{rate:,.0f}", _money(c.usd_per_hour)]
        else:
            tail = [_ceiling(c), _money(c.usd_per_hour), _money(c.usd_per_million_output_tokens)]
        cells = [str(i), f"{c.num_gpus}× {c.gpu}", parallel_text(c), c.kv_cache_dtype,
                 *([c.engine] if len(engines) > 1 else []), _requests(c),
                 f"{c.headroom_fraction:.0%}", *tail]  # fmt: skip
        table.add_row(*cells)
    stdout_console(width=WIDTH).print(table)
    if prefill is not None:
        _say(console, "requests: at max_model_len over all KV pools; room: KV headroom beyond "
                      "one request; prefill ≤: prompt tokens/s, an upper bound (the roofline, "
                      "one prompt at a time per KV pool)")  # fmt: skip
        return
    copies = any("×" in parallel_text(c) for c in result.candidates)
    _say(console, ("parallel ×N: N independent copies; " if copies else "") +
                  "requests: concurrent at the workload over all KV pools (pools × each); room: "
                  "KV headroom beyond them; decode ≤: tokens/s, an upper bound (the roofline); "
                  "$/M out: dollars per million output tokens at that ceiling")  # fmt: skip


def _commands(console, result) -> None:
    console.print("Commands (each reproduces its row):", highlight=False)
    for i, c in enumerate(result.candidates, start=1):
        console.print(f"  {i}  {c.kvcalc_command}", highlight=False, markup=False)
        if c.serve_command:
            console.print(f"     {c.serve_command}", highlight=False, markup=False)


def _searched(console, result) -> None:
    _say(console, f"searched: {result.planned:,} plans, {result.bounded:,} candidates ruled out "
                  "by bounds without planning")  # fmt: skip


def render(result, *, explain: bool = False) -> None:
    console = stdout_console()
    _say(console, f"{result.model}: {_where(result)}, objective {result.objective}")
    _say(console, f"prices: {result.prices}")
    if not result.candidates:
        _say(console, "No searched deployment meets the requirements.")
        _rejections(console, result, every=True)
        return
    _table(result)
    console.print("")
    _commands(console, result)
    console.print("")
    console.print("The best, planned in full:", highlight=False)
    from kvcalc.render import plan_view

    plan_view.render(result.candidates[0].plan)
    console.print("")
    for note in result.notes:
        _say(console, f"note: {note}")
    _searched(console, result)
    if explain:
        _rejections(console, result, every=False)


def render_pools(pools, *, explain: bool = False) -> None:
    """``recommend --disaggregated``: each pool's table and commands, then their ratio."""
    console = stdout_console()
    decode = pools.decode
    _say(console, f"{pools.model}: prefill/decode disaggregation, prompts of "
                  f"{pools.prompt_len:,} tokens, outputs of {pools.output_len:,}, objective "
                  f"{decode.objective}")  # fmt: skip
    _say(console, f"prices: {decode.prices}")
    for title, result in (("Decode pool", decode), ("Prefill pool", pools.prefill)):
        console.print("")
        what = (
            "whole prompts resident from admission"
            if result is decode
            else "one request at max_model_len, the engine's activation profile"
        )
        _say(console, f"{title}: {_where(result)} ({what})")
        if not result.candidates:
            _say(console, "No searched deployment meets the requirements.")
            _rejections(console, result, every=True)
            continue
        _table(result, None if result is decode else pools.prefill_tokens_per_s)
        _commands(console, result)
        _searched(console, result)
        if explain:
            _rejections(console, result, every=False)
    console.print("")
    ratio = pools.ratio
    if ratio is None:
        _say(console, "Pool ratio: unknown (a pool has no row, or its GPU's compute peak or "
                      "bandwidth is unknown)")  # fmt: skip
    else:
        d = decode.candidates[ratio.decode_row - 1]
        p = pools.prefill.candidates[ratio.prefill_row - 1]
        cost = ("price unknown" if ratio.usd_per_hour is None
                else f"${ratio.usd_per_hour:,.2f}/h in all")  # fmt: skip
        _say(console, f"Pool ratio: one decode deployment (decode #{ratio.decode_row}, "
                      f"{d.num_gpus}× {d.gpu}) finishes {ratio.decode_requests_per_s:,.2f} "
                      f"requests/s at most; one prefill deployment (prefill "
                      f"#{ratio.prefill_row}, {p.num_gpus}× {p.gpu}) prefills "
                      f"{ratio.prefill_requests_per_s:,.2f}/s at most: "
                      f"{ratio.prefill_per_decode:,.2f} prefill per decode, so "
                      f"{ratio.prefill_deployments} prefill beside each decode deployment "
                      f"({cost})")  # fmt: skip
    for note in (*pools.notes, *decode.notes):
        _say(console, f"note: {note}")


def _rejections(console, result, *, every: bool) -> None:
    if not result.rejected:
        return
    console.print("")
    console.print("Rejected (searched, not meeting the requirements):" if every else
                  "Rejected before the best (they rank ahead of it):", highlight=False)  # fmt: skip
    for r in result.rejected:
        price = "price unknown" if r.usd_per_hour is None else f"${r.usd_per_hour:,.2f}/h"
        engine = f" {r.engine}" if len({x.engine for x in result.rejected}) > 1 else ""
        _say(console, f"{r.num_gpus}× {r.gpu}{engine} ({price}): {r.reason}", indent="  ")
