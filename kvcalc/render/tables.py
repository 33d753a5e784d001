"""Small rich tables shared by commands."""

from __future__ import annotations

from typing import Any

from kvcalc.render import fmt
from kvcalc.render.console import stdout_console


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
    stdout_console().print(table)
    stdout_console().print("~ = approximate driver figure (see kvcalc/data/gpus.json for sources)")
