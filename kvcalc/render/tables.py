"""Small rich tables shared by commands."""

from __future__ import annotations

from typing import Any

from kvcalc.cli.console import stdout_console
from kvcalc.render import fmt


def models_table(rows: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="Bundled models (work offline)", title_justify="left")
    table.add_column("alias")
    table.add_column("Hub id")
    table.add_column("attention")
    table.add_column("layers", justify="right")
    table.add_column("KV / token (auto)", justify="right")
    table.add_column("state / seq", justify="right")
    table.add_column("max len", justify="right")
    for row in rows:
        table.add_row(
            row.alias,
            row.hf_id,
            row.attention_kind,
            str(row.num_layers),
            fmt.size(row.kv_bytes_per_token),
            fmt.size(row.state_bytes_per_sequence) if row.state_bytes_per_sequence else "-",
            fmt.int_(row.max_model_len),
        )
    stdout_console().print(table)
