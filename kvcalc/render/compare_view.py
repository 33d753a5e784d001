"""The ``kvcalc compare`` table: one row per model (or attention variant)."""

from __future__ import annotations

from kvcalc.render import fmt
from kvcalc.render.console import stdout_console


def _fit_cell(row) -> str:
    if row.fits is None:
        return "-"
    if not row.fits:
        return "doesn't fit"
    return f"{row.max_concurrency:,.2f}x"


def render(result) -> None:
    from rich.table import Table

    console = stdout_console()
    where = ""
    if result.gpu or result.gpu_memory_bytes:
        where = f" on {result.gpu or fmt.size(result.gpu_memory_bytes)} with {result.engine}"
    tp = f", TP {result.tensor_parallel_size}" if result.tensor_parallel_size > 1 else ""
    console.print(f"[bold]{result.max_model_len:,} tokens per request[/]{where}{tp}, KV cache {result.kv_cache_dtype}",
                  highlight=False)  # fmt: skip
    table = Table(title_justify="left")
    table.add_column("model")
    table.add_column("attention")
    table.add_column("layers", justify="right")
    table.add_column("KV heads", justify="right")
    table.add_column("KV / token", justify="right")
    table.add_column(f"KV / request ({result.max_model_len:,})", justify="right")
    table.add_column("weights / GPU", justify="right")
    table.add_column("requests that fit", justify="right")
    for r in result.rows:
        table.add_row(
            r.label, r.attention, str(r.num_layers), r.kv_heads, fmt.size(r.kv_bytes_per_token),
            fmt.size(r.kv_bytes_per_request), fmt.size(r.weights_bytes) if r.weights_bytes is not None else "-",
            _fit_cell(r),
        )  # fmt: skip
    from kvcalc.render.tables import print_whole

    print_whole(table, free=("attention",))
    if result.gpu is None and result.gpu_memory_bytes is None:
        console.print("[dim]No GPU given: layout bytes per tensor-parallel rank and estimated weights; "
                      "add --gpu to plan each model with the engine.[/]", highlight=False)  # fmt: skip
    for r in result.rows:
        if r.fits is False:
            console.print(f"  {r.label}: {r.reason}", highlight=False)
    for note in result.notes:
        console.print(f"  [dim]- {note}[/]", highlight=False)
