"""``kvcalc curve`` (table, terminal chart, matplotlib file) and ``kvcalc throughput`` reports.

No arithmetic beyond scaling bars: the numbers come from :mod:`kvcalc.planning.curves` and
:mod:`kvcalc.planning.throughput`.
"""

from __future__ import annotations

import math

from rich.markup import escape

from kvcalc.render import fmt
from kvcalc.render.console import stdout_console

CHART_WIDTH = 48
#: one style per series, cycled
STYLES = ("green", "cyan", "magenta", "yellow", "blue", "red", "bright_green", "bright_cyan")


def _conc(value: float, fits: bool) -> str:
    if not fits and value <= 0:
        return "doesn't fit"
    text = f"{value:,.2f}x"
    return text if fits else f"{text} (no fit)"


def _series_heading(s) -> str:
    return f"{s.label}"


def log_axis(values: list[float]) -> tuple[float, float]:
    """Decades that enclose the positive values: ``(10^floor(log10 min), 10^ceil(log10 max))``.

    >>> log_axis([3.2, 275.0])
    (1.0, 1000.0)
    """
    positive = [v for v in values if v > 0]
    if not positive:
        return 1.0, 10.0
    lo = 10.0 ** math.floor(math.log10(min(positive)))
    hi = 10.0 ** math.ceil(math.log10(max(positive)))
    return lo, hi if hi > lo else lo * 10


def bar_cells(value: float, lo: float, hi: float, width: int = CHART_WIDTH) -> int:
    """Cells of a log-scaled bar: 0 at ``lo`` (or below), ``width`` at ``hi``.

    >>> bar_cells(10.0, 1.0, 100.0, 48)
    24
    """
    if value <= lo:
        return 0 if value <= 0 else 1
    return max(1, min(width, round(width * math.log10(value / lo) / math.log10(hi / lo))))


def axis_line(lo: float, hi: float, width: int = CHART_WIDTH) -> str:
    """Tick labels at each decade under a log chart of ``width`` cells."""
    decades = round(math.log10(hi / lo))
    cells = [" "] * (width + 12)
    for i in range(decades + 1):
        label = f"{lo * 10**i:,.10g}"
        pos = round(width * i / decades) if decades else 0
        start = min(max(0, pos - len(label) // 2), len(cells) - len(label))
        cells[start : start + len(label)] = list(label)
    return "".join(cells).rstrip()


def render(curve) -> None:
    from rich.table import Table

    console = stdout_console()
    where = curve.gpu or fmt.size(curve.gpu_memory_bytes or 0)
    tp = f" × TP {curve.tensor_parallel_size}" if curve.tensor_parallel_size > 1 else ""
    console.print(f"[bold]{curve.model}[/] on {where}{tp}: maximum concurrency (and the tokens it holds) "
                  "by context length", highlight=False)  # fmt: skip
    table = Table()
    table.add_column("context", justify="right")
    for s in curve.series:
        table.add_column(_series_heading(s), justify="right")
    for i, length in enumerate(curve.lengths_tokens):
        mark = " *" if length > curve.default_max_model_len else ""
        cells = [f"{length:,}{mark}"]
        for s in curve.series:
            p = s.points[i]
            cells.append(
                _conc(p.max_concurrency, p.fits)
                + (f"\n{p.kv_cache_tokens:,} tok" if p.fits else "")
                + (f"\nruns {s.max_num_seqs:,} ‡" if p.capped_by_max_num_seqs else "")
            )
        table.add_row(*cells)
    console.print(table)
    if _capped(curve):
        console.print("  ‡ max_num_seqs caps the requests the engine runs at once below what the "
                      "KV cache holds", highlight=False)  # fmt: skip
    _chart(console, curve)
    for s in curve.series:
        version = f" {s.engine_version}" if s.engine_version else ""
        extra = f", max_num_seqs {s.max_num_seqs:,}" if s.max_num_seqs else ""
        console.print(
            f"  {s.label}: {s.engine}{version}, KV {s.kv_cache_dtype} {fmt.int_(s.kv_bytes_per_token)} B/token, "
            f"{fmt.size(max(0, s.available_kv_bytes))} for KV{extra}; {s.method}",
            highlight=False,
        )
        for note in s.notes:
            console.print(f"    [dim]- {note}[/]", highlight=False)
    if any(n > curve.default_max_model_len for n in curve.lengths_tokens):
        console.print(f"  * beyond the model's max_model_len {curve.default_max_model_len:,} "
                      "(vLLM refuses unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)", highlight=False)  # fmt: skip


def _capped(curve) -> bool:
    return any(p.capped_by_max_num_seqs for s in curve.series for p in s.points)


def _drawn(p) -> bool:
    """A point is drawn as a bar only when one request fits (below that the engine refuses)."""
    return p.fits and p.max_concurrency > 0


def _chart(console, curve) -> None:
    values = [p.max_concurrency for s in curve.series for p in s.points if _drawn(p)]
    if not values:
        console.print("Nothing fits at these lengths: no chart.")
        return
    lo, hi = log_axis(values)
    console.print(f"[bold]Max concurrency, log scale[/] ({lo:,.10g} to {hi:,.10g} requests)")
    label_width = max(len(s.label) for s in curve.series)
    length_width = max(len(f"{n:,}") for n in curve.lengths_tokens)
    for i, length in enumerate(curve.lengths_tokens):
        for j, s in enumerate(curve.series):
            p = s.points[i]
            head = f"{length:,}".rjust(length_width) if j == 0 else " " * length_width
            cells = bar_cells(p.max_concurrency, lo, hi) if _drawn(p) else 0
            if _drawn(p):
                value = f"{p.max_concurrency:,.1f}"
                value += f" (runs {s.max_num_seqs:,} ‡)" if p.capped_by_max_num_seqs else ""
            elif p.max_concurrency > 0:  # less than one request: the engine refuses to start
                value = f"doesn't fit ({p.max_concurrency:,.2f} of one request)"
            else:
                value = "doesn't fit"
            style = STYLES[j % len(STYLES)]
            console.print(
                f"{head} {s.label.ljust(label_width)} │[{style}]{'█' * cells}[/] {value}",
                highlight=False,
            )
    pad = " " * (length_width + label_width + 2)
    console.print(f"{pad}└{'─' * CHART_WIDTH}", highlight=False)
    console.print(f"{pad} {axis_line(lo, hi)}", highlight=False, markup=False)


def write_plot(curve, path: str) -> None:
    """The same chart as a file (PNG, SVG, PDF by suffix) with matplotlib, imported lazily."""
    from kvcalc.errors import KvcalcError, install_hint

    try:
        import matplotlib
    except ModuleNotFoundError:
        raise KvcalcError("matplotlib is not installed, so --plot cannot draw", hint=install_hint("plot"),
                          code="matplotlib-missing") from None  # fmt: skip
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    try:
        drawn, left_out = plotted_series(curve)
        for s, points in drawn:
            (line,) = ax.plot([p.length_tokens for p in points], [p.max_concurrency for p in points],
                              marker="o", label=s.label)  # fmt: skip
            capped = [p for p in points if p.capped_by_max_num_seqs]
            if capped and s.max_num_seqs:
                ax.axhline(s.max_num_seqs, color=line.get_color(), linestyle=":", linewidth=1,
                           label=f"{s.label}: max_num_seqs {s.max_num_seqs:,} (the engine runs at most)")  # fmt: skip
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="one request")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_tokens_label))
        ax.set_yscale("log")
        ax.set_xlabel("context length (tokens per request)")
        ax.set_ylabel("max concurrent requests")
        ax.set_title(plot_title(curve))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        if left_out:
            fig.text(0.01, 0.01, "not drawn: " + "; ".join(left_out), fontsize=7, wrap=True)
        fig.tight_layout(rect=(0, 0.05 if left_out else 0, 1, 1))
        try:
            fig.savefig(path)
        except (OSError, ValueError) as exc:
            raise KvcalcError(f"cannot write {path}: {exc}", hint="give a writable FILE.png or FILE.svg",
                              code="plot-write-failed") from None  # fmt: skip
    finally:
        plt.close(fig)


def plotted_series(curve) -> tuple[list, list[str]]:
    """The series with a line to draw (and their points where one request fits), and why each
    other series is left out of the chart and its legend."""
    drawn, left_out = [], []
    for s in curve.series:
        points = [p for p in s.points if _drawn(p)]
        if points:
            drawn.append((s, points))
        else:
            left_out.append(f"{s.label}: nothing fits ({s.notes[0] if s.notes else s.verdict})")
    return drawn, left_out


def plot_title(curve) -> str:
    """``Llama-3.1-70B on H100-SXM × TP 2`` (the parallelism is part of what was planned)."""
    where = curve.gpu or fmt.size(curve.gpu_memory_bytes or 0)
    tp = f" × TP {curve.tensor_parallel_size}" if curve.tensor_parallel_size > 1 else ""
    return f"{curve.model} on {where}{tp}"


def _tokens_label(value: float, _pos: object = None) -> str:
    """Axis labels in tokens: ``1K``, ``32K``, ``1M`` (K = 1,024, vLLM's spelling)."""
    if value >= 1 << 20:
        return f"{value / (1 << 20):g}M"
    return f"{value / 1024:g}K" if value >= 1024 else f"{value:g}"


def render_throughput(report) -> None:
    from rich.table import Table

    console = stdout_console()
    peak = (
        f", {report.peak_flops_per_s / 1e12:,.1f} TFLOP/s"
        if report.peak_flops_per_s
        else ", no compute roof"
    )
    console.print(
        f"[bold]{report.model}[/] on {report.gpu or 'the given GPU'} "
        f"({report.memory_bandwidth_bytes_per_s / 1e9:,.0f} GB/s{peak}), {report.engine}, KV {report.kv_cache_dtype}",
        highlight=False,
    )
    console.print(f"Decode throughput [bold]ceiling[/], an upper bound, not a prediction. Context per sequence: "
                  f"{report.context_tokens:,} tokens", highlight=False)  # fmt: skip
    console.print(f"  ({report.context_rule})", highlight=False)
    table = Table(title_justify="left")
    for name in ("batch", "weights read", "KV read", "step", "bound", "tok/s", "tok/s per request"):
        table.add_column(name, justify="right" if name != "bound" else "left")
    for p in report.points:
        mark = " *" if p.beyond_kv_limit else ""
        table.add_row(f"{p.batch:,}{mark}", fmt.size(p.weights_bytes_per_step), fmt.size(p.kv_bytes_per_step),
                      f"{p.step_seconds * 1e3:,.2f} ms", p.bound, f"{p.tokens_per_s:,.0f}",
                      f"{p.per_request_tokens_per_s:,.1f}")  # fmt: skip
    if report.points:
        console.print(table)
    if report.batch_limit:
        cap = f" (max_num_seqs {report.max_num_seqs:,})" if report.max_num_seqs else ""
        console.print(f"KV-limited concurrency {report.max_concurrency:,.2f}; largest batch that runs: "
                      f"{report.batch_limit:,}{cap}", highlight=False)  # fmt: skip
    else:
        console.print(
            f"[bold red]Nothing runs[/] ({report.verdict}): {escape(report.verdict_reason)}",
            highlight=False,
        )
    if any(p.beyond_kv_limit for p in report.points):
        console.print("  * more sequences than the KV cache holds at this context", highlight=False)
    if report.prefill:
        f = report.prefill
        console.print(f"Prefill of {f.prompt_tokens:,} tokens: {f.seconds * 1e3:,.1f} ms ({f.bound}-bound, "
                      f"{f.tokens_per_s:,.0f} tok/s)", highlight=False)  # fmt: skip
    elif report.peak_flops_per_s is None:
        console.print(
            "Prefill: not estimated without a compute roof (pass --tflops)", highlight=False
        )
    console.print(
        f"Efficiency factor: {report.efficiency:g}, {report.efficiency_source}", highlight=False
    )
    console.print("[dim]Assumptions:[/]")
    for a in report.assumptions:
        console.print(f"  [dim]- {a}[/]", highlight=False)
