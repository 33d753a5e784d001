"""Small rich tables shared by commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvcalc.render import fmt
from kvcalc.render.console import stdout_console

if TYPE_CHECKING:
    from kvcalc.sources.catalog import BundledRow


def print_whole(table: Any, *, free: tuple[str, ...] = ()) -> None:
    """Identifier and number columns never wrap or shorten: only the ``free`` (prose) columns
    give up width when the terminal is narrow, and are dropped when even that is not enough.
    Past that, lines are longer than the terminal rather than a name cut. When stdout is not a
    terminal the console is wide enough for every column anyway (see
    :data:`kvcalc.render.console.PIPE_WIDTH`)."""
    from rich.cells import cell_len

    from kvcalc.render.console import stdout_console

    needed = 1
    for column in table.columns:
        cells = [cell_len(str(getattr(c, "plain", c))) for c in column.cells]
        header = cell_len(str(column.header))
        if column.header not in free:
            column.no_wrap = True
            column.min_width = max([header, *cells])
        needed += (column.min_width or header) + 3
    width = stdout_console().width
    if needed > width:
        for column in [c for c in table.columns if c.header in free]:
            table.columns.remove(column)
            needed -= max(cell_len(str(column.header)), 1) + 3
    # still too wide: lines longer than the terminal (it wraps them) rather than a cut name
    stdout_console(**({"width": needed} if needed > width else {})).print(table)


def models_table(rows: list[BundledRow]) -> None:
    from rich.table import Table

    table = Table(title="Bundled models (work offline)", title_justify="left")
    table.add_column("alias")
    table.add_column("Hub id")
    table.add_column("attention")
    table.add_column("layers", justify="right")
    table.add_column("KV / token (auto)", justify="right")
    table.add_column("state / request", justify="right")
    table.add_column("max len", justify="right")
    for row in rows:
        table.add_row(
            row.alias,
            row.model,
            row.attention_kind,
            str(row.num_layers),
            fmt.size(row.kv_bytes_per_token),
            fmt.size(row.state_bytes_per_request) if row.state_bytes_per_request else "-",
            fmt.int_(row.max_model_len),
        )
    print_whole(table, free=("attention",))


def gpus_table(rows) -> None:
    from rich.table import Table

    table = Table(title="GPU catalog", title_justify="left")
    table.add_column("name")
    table.add_column("aliases")
    table.add_column("memory (driver)", justify="right")
    table.add_column("bandwidth", justify="right")
    table.add_column("bf16 TFLOP/s", justify="right")
    table.add_column("fp8 TFLOP/s", justify="right")
    for g in rows:
        table.add_row(
            g.name,
            ", ".join(g.aliases[:3]),
            fmt.size(g.memory_bytes) + ("" if g.memory_is_exact else " ~"),
            f"{g.memory_bandwidth_bytes_per_s / 1e9:,.0f} GB/s",
            f"{g.bf16_dense_tflops:g}" if g.bf16_dense_tflops else "-",
            f"{g.fp8_dense_tflops:g}" if g.fp8_dense_tflops else "-",
        )
    print_whole(table, free=("aliases",))
    stdout_console().print("~ = approximate driver figure (see kvcalc/data/gpus.json for sources)")
