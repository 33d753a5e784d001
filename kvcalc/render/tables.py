"""Small rich tables shared by commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvcalc.render import fmt
from kvcalc.render.console import stdout_console

if TYPE_CHECKING:
    from kvcalc.sources.catalog import BundledRow


def print_whole(table: Any, *, free: tuple[str, ...] = (), lead: int = 1) -> None:
    """Identifier and number columns never wrap or shorten. When the terminal is too narrow for
    every column, the ``free`` (prose) columns are dropped first and listed under the table, one
    line per row; when even that is too wide, every row is stacked: its first ``lead`` cells on
    one line, the others below as ``header value`` pairs, so nothing is cut and no row wraps.
    When stdout is not a terminal the console is wide enough for every column anyway (see
    :data:`kvcalc.render.console.PIPE_WIDTH`)."""
    from rich.cells import cell_len

    from kvcalc.render.console import stdout_console

    def width_of(column: Any) -> int:
        cells = [cell_len(_plain(c)) for c in column.cells]
        return max([cell_len(str(column.header)), *cells])

    console = stdout_console()
    pad = 3 if table.box is not None and table.show_edge else 2
    needed = 1 + sum(width_of(c) + pad for c in table.columns)
    if needed <= console.width:
        _fix_widths(table, width_of)
        console.print(table)
        return
    kept = [c for c in table.columns if c.header not in free]
    if 1 + sum(width_of(c) + pad for c in kept) <= console.width:
        dropped = [c for c in table.columns if c.header in free]
        for column in dropped:
            table.columns.remove(column)
        _fix_widths(table, width_of)
        console.print(table)
        names = [_plain(c) for c in table.columns[0].cells]
        for column in dropped:
            console.print(f"{column.header}:")
            wide = max((cell_len(n) for n in names), default=0)
            for name, cell in zip(names, column.cells, strict=False):
                items = _plain(cell).split(", ")
                for line in _wrap(
                    items, ", ", console.width - 1, f"  {name:<{wide}}  ", " " * (wide + 4)
                ):
                    console.print(line, soft_wrap=False, highlight=False, markup=False)
        return
    print_stacked(console, table, lead)


def _fix_widths(table: Any, width_of: Any) -> None:
    for column in table.columns:
        column.no_wrap = True
        column.min_width = width_of(column)


def _plain(cell: Any) -> str:
    return str(getattr(cell, "plain", cell))


def print_stacked(console: Any, table: Any, lead: int) -> None:
    """Each row as a block: its first ``lead`` cells, then ``header value`` pairs wrapped to the
    terminal under a four-space indent (empty cells, ``-``, left out)."""
    if table.title:
        console.print(table.title)
    columns = table.columns
    rows = zip(*(list(c.cells) for c in columns), strict=False)
    for cells in rows:
        console.print("  ".join(_plain(c) for c in cells[:lead]), soft_wrap=False)
        pairs = [
            f"{' '.join(str(column.header).split())} {_plain(cell)}"
            for column, cell in zip(columns[lead:], cells[lead:], strict=False)
            if _plain(cell).strip() not in ("", "-")
        ]
        for line in _wrap(pairs, " · ", console.width - 1, "    ", "    "):
            console.print(line, soft_wrap=False, highlight=False, markup=False)


def _wrap(items: list[str], sep: str, width: int, first: str, indent: str) -> list[str]:
    """``items`` joined by ``sep`` into lines of at most ``width`` cells (a line that goes on ends
    with the separator), never breaking an item: one longer than a line gets a line of its own."""
    from rich.cells import cell_len

    tail = sep.rstrip()
    lines: list[list[str]] = [[]]
    for item in items:
        prefix = first if len(lines) == 1 else indent
        trial = prefix + sep.join([*lines[-1], item]) + tail
        if lines[-1] and cell_len(trial) > width:
            lines.append([])
        lines[-1].append(item)
    out = [
        (first if i == 0 else indent) + sep.join(chunk) for i, chunk in enumerate(lines) if chunk
    ]
    return [line + tail if i < len(out) - 1 else line for i, line in enumerate(out)]


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
    print_whole(table, free=("attention",), lead=2)


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
            ", ".join(g.aliases),
            fmt.size(g.memory_bytes) + ("" if g.memory_is_exact else " ~"),
            f"{g.memory_bandwidth_bytes_per_s / 1e9:,.0f} GB/s",
            f"{g.bf16_dense_tflops:g}" if g.bf16_dense_tflops else "-",
            f"{g.fp8_dense_tflops:g}" if g.fp8_dense_tflops else "-",
        )
    print_whole(table, free=("aliases",))
    stdout_console().print("~ = approximate driver figure (see kvcalc/data/gpus.json for sources)")
