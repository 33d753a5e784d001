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


def _size(value: int | None) -> str:
    return fmt.size(value) if value is not None else "-"


def _dtypes(result) -> str:
    """The resolved cache dtypes, with what was asked when it was ``auto`` or differs."""
    resolved = list(dict.fromkeys(r.kv_cache_dtype for r in result.rows))
    asked = result.inputs.get("kv_cache_dtype", "")
    text = "/".join(resolved)
    return text if [asked] == resolved or not asked else f"{text} ({asked})"


def render(result) -> None:
    from rich.table import Table

    console = stdout_console()
    where = ""
    if result.gpu or result.gpu_memory_bytes:
        where = f" on {result.gpu or fmt.size(result.gpu_memory_bytes)} with {', '.join(result.engines)}"
    tp = f", TP {result.tensor_parallel_size}" if result.tensor_parallel_size > 1 else ""
    console.print(f"[bold]{result.max_model_len:,} tokens per request[/]{where}{tp}, KV cache {_dtypes(result)}",
                  highlight=False)  # fmt: skip
    layers = any(r.layer_kv_bytes_per_request is not None for r in result.rows)
    engine = any(r.engine_kv_bytes_per_request is not None for r in result.rows)
    table = Table(title_justify="left")
    table.add_column("model")
    table.add_column("attention")
    table.add_column("layers", justify="right")
    table.add_column("KV heads", justify="right")
    table.add_column("KV / token", justify="right")
    if layers:
        table.add_column("KV / request, layers' bytes", justify="right")
    if engine:
        table.add_column("KV / request, engine blocks", justify="right")
    table.add_column("weights / GPU", justify="right")
    table.add_column("requests that fit", justify="right")
    for r in result.rows:
        cells = [
            r.label,
            r.attention_kind,
            str(r.num_layers),
            r.kv_heads,
            fmt.size(r.kv_bytes_per_token),
        ]
        if layers:
            cells.append(_size(r.layer_kv_bytes_per_request))
        if engine:
            cells.append(_size(r.engine_kv_bytes_per_request))
        table.add_row(*cells, _size(r.weights_bytes), _fit_cell(r))
    from kvcalc.render.tables import print_whole

    print_whole(table, free=("attention",))
    if layers:
        console.print("[dim]layers' bytes: what the layers hold (windows capped, no block rounding), "
                      "as `kvcalc inspect` counts it.[/]", highlight=False)  # fmt: skip
    if engine:
        console.print(f"[dim]engine blocks: what {' or '.join(result.engines)} reserves for one request, as in "
                      "`kvcalc plan`; its concurrency divides by this.[/]", highlight=False)  # fmt: skip
    if result.gpu is None and result.gpu_memory_bytes is None:
        console.print("[dim]No GPU given: layout bytes per tensor-parallel rank and estimated weights; "
                      "add --gpu to plan each model with the engine.[/]", highlight=False)  # fmt: skip
    for r in result.rows:
        if r.fits is False:
            console.print(f"  {r.label}: {r.reason}", highlight=False)
    for note in result.notes:
        console.print(f"  [dim]- {note}[/]", highlight=False)
