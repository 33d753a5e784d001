"""The ``kvcalc verify`` report: predicted vs measured per component, memory deltas, verdict."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kvcalc.render import fmt
from kvcalc.render.console import stdout_console

if TYPE_CHECKING:
    from rich.console import JustifyMethod


def percent(error: float) -> str:
    return "n/a" if not math.isfinite(error) else f"{error * 100:+.3f}%"


def _opt_size(value: int | None) -> str:
    return "-" if value is None else fmt.size(value)


def render(result) -> None:
    from rich.table import Table

    console = stdout_console()
    console.print(
        f"[bold]{result.model}[/] ({result.num_layers} layers), {result.engine} {result.engine_version}, "
        f"KV cache {result.kv_cache_dtype}, TP {result.tensor_parallel_size}: {result.check} check on "
        f"{result.device} ({result.device_name})"
        + (f", torch {result.torch_version}" if result.torch_version else ""),
        highlight=False,
    )
    console.print(f"layout: {result.layout}; block size {result.block_size}, {result.num_blocks:,} blocks, "
                  f"{result.tokens:,} tokens", highlight=False)  # fmt: skip
    table = Table(title="Predicted vs measured", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("component", "left"), ("layers", "right"), ("tensors", "right"),
        ("predicted (B)", "right"), ("measured (B)", "right"), ("error", "right"),
    )  # fmt: skip
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for c in result.components:
        table.add_row(c.name, fmt.int_(c.num_layers) if c.num_layers else "", fmt.int_(c.tensors),
                      fmt.int_(c.predicted_bytes), fmt.int_(c.measured_bytes), percent(c.relative_error))  # fmt: skip
    table.add_row("[bold]total[/]", fmt.int_(result.num_layers), "", fmt.int_(result.predicted_bytes),
                  fmt.int_(result.measured_bytes), percent(result.relative_error))  # fmt: skip
    console.print(table)
    console.print(f"total: predicted {fmt.size(result.predicted_bytes)}, measured {fmt.size(result.measured_bytes)} "
                  f"= {result.judged_on}", highlight=False)  # fmt: skip
    _memory(console, result)
    _fill(console, result.fill)
    if result.run:
        r = result.run
        console.print(f"transformers {r.transformers_version}: {r.cache_class} ({', '.join(r.layer_classes)}), "
                      f"{r.prompt_tokens} prompt + {r.new_tokens} new tokens → {r.cached_tokens} cached; "
                      f"logical (view) bytes {fmt.bytes_and_size(r.logical_bytes)}", highlight=False)  # fmt: skip
    if result.llamacpp:
        _llamacpp(console, result.llamacpp)
    style = "bold green" if result.passed else "bold red"
    verdict = "passed" if result.passed else "FAILED"
    console.print(f"Verdict: [{style}]{verdict}[/] — error {percent(result.relative_error)}, tolerance "
                  f"±{result.tolerance * 100:g}% (total and every component)")  # fmt: skip
    if result.notes:
        console.print("[dim]Notes:[/]")
        for note in result.notes:
            console.print(f"  [dim]- {note}[/]", highlight=False)


def _llamacpp(console, run) -> None:
    """llama.cpp's own lines, each marked against the predicted one."""
    same = "=" if run.lines_match else "≠"
    console.print(f"llama.cpp {run.llama_cpp_version} printed ({same} predicted):", highlight=False)
    for line in run.measured_lines:
        console.print(f"  {line}", highlight=False, soft_wrap=True)
    if not run.lines_match:
        console.print("predicted:", highlight=False)
        for line in run.predicted_lines:
            console.print(f"  {line}", highlight=False, soft_wrap=True)
    if run.predicted_compute_lines:
        same = "=" if run.compute_match else "≠"
        console.print(f"compute buffer ({same} predicted {run.predicted_compute_mib} MiB; "
                      f"{run.measured_compute_mib or '?'} MiB at llama_free):", highlight=False)  # fmt: skip
        for line in (
            *run.compute_lines,
            *(() if run.compute_match else run.predicted_compute_lines),
        ):
            console.print(f"  {line}", highlight=False, soft_wrap=True)


def _memory(console, result) -> None:
    m = result.memory
    if m is None:
        return
    parts = [f"storage {fmt.size(m.storage_bytes)}"]
    if m.rss_delta_bytes is not None:
        parts.append(f"RSS delta {_opt_size(m.rss_delta_bytes)} (not judged)")
    if m.cuda_allocated_delta_bytes is not None:
        parts += [f"allocated Δ {_opt_size(m.cuda_allocated_delta_bytes)}",
                  f"reserved Δ {_opt_size(m.cuda_reserved_delta_bytes)}",
                  f"driver free Δ {_opt_size(m.driver_free_delta_bytes)}",
                  f"left allocated after free {_opt_size(m.leaked_bytes)}"]  # fmt: skip
    console.print("memory: " + ", ".join(parts), highlight=False)


def _fill(console, f) -> None:
    if f is None:
        return
    from rich.table import Table

    table = Table(
        title=f"Deployment emulated on {f.gpu_name}", title_justify="left", show_header=False
    )
    table.add_column("what")
    table.add_column("value", justify="right")
    util = f" (× {f.gpu_memory_utilization:g})" if f.gpu_memory_utilization else ""
    rows = [
        ("GPU total (driver)", fmt.size(f.total_memory_bytes)),
        (f"budget{util}", fmt.size(f.budget_bytes)),
        ("weights placeholder", fmt.size(f.weights_bytes)),
        ("activation + CUDA-graph reserve", fmt.size(f.activation_bytes + f.cudagraph_bytes)),
        (
            "non-torch: predicted / measured",
            f"{fmt.size(f.predicted_non_torch_bytes)} / {fmt.size(f.measured_non_torch_bytes)}",
        ),
        ("bytes per block", fmt.bytes_and_size(f.bytes_per_block)),
        (
            "blocks: planned / allocatable",
            f"{f.planned_num_blocks:,} / {f.allocatable_num_blocks:,}",
        ),
        ("headroom left", fmt.size(f.headroom_bytes)),
        ("out-of-memory caught", "yes" if f.oom_caught else "no"),
        ("left allocated after the fill", fmt.size(f.leaked_bytes)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
