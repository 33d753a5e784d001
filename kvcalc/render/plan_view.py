"""The ``kvcalc plan`` report: memory per GPU (table and bar), KV capacity, verdict, suggestions."""

from __future__ import annotations

from kvcalc.engines.dtype_names import engine_spelling
from kvcalc.engines.names import traits
from kvcalc.render import fmt
from kvcalc.render.console import stdout_console

VERDICT_STYLE = {
    "ok": "bold green",
    "tight": "bold yellow",
    "below-target": "bold red",
    "wont-start": "bold red",
    "weights-dont-fit": "bold red",
}
_BAR = (("weights", "W", "blue"), ("activation", "A", "magenta"), ("non_torch", "N", "cyan"),
        ("cudagraph", "G", "yellow"), ("kv_cache", "K", "green"), ("free", ".", "dim"))  # fmt: skip
BAR_WIDTH = 60


def memory_bar(memory, *, cuda_graphs: bool = True, non_torch: bool = True) -> str:
    """One line of ``BAR_WIDTH`` cells, each part proportional to its bytes (rich markup); the
    legend leaves out CUDA graphs and the non-torch term for an engine that has none."""
    total = max(memory.total_bytes, 1)
    parts = []
    used = 0
    for key, char, style in _BAR:
        value = max(0, getattr(memory, f"{key}_bytes"))
        cells = round(value / total * BAR_WIDTH)
        cells = min(cells, BAR_WIDTH - used)
        used += cells
        if cells:
            parts.append(f"[{style}]{char * cells}[/]")
    legend = "  ".join(f"[{style}]{char}[/] {key.replace('_', '-')}" for key, char, style in _BAR
                       if (cuda_graphs or key != "cudagraph") and (non_torch or key != "non_torch"))  # fmt: skip
    return "[" + "".join(parts) + " " * (BAR_WIDTH - used) + "]\n" + legend


def render(result) -> None:
    from rich.table import Table

    console = stdout_console()
    if not result.layout_validated:
        console.print(fmt.unverified_warning(result.model))
    if not result.fully_modelled:
        console.print(fmt.unmodelled_warning(result.inputs.get("unmodelled_flags", ())))
    par = fmt.parallelism(result)
    console.print(
        f"[bold]{result.model}[/] on {result.num_gpus} × {result.gpu or fmt.size(result.memory.total_bytes)} "
        f"({par}) with {result.engine} {result.engine_version}, max_model_len {result.max_model_len:,}, "
        f"KV cache {engine_spelling(result.engine, result.kv_cache_dtype)}"
    )
    m = result.memory
    table = Table(title="Memory per GPU", title_justify="left")
    table.add_column("part")
    table.add_column("bytes", justify="right")
    table.add_column("", justify="left")
    can = traits(result.engine)
    util = f" (× {m.gpu_memory_utilization:g})" if m.gpu_memory_utilization else ""
    if util and can.overhead_in_reserve:  # SGLang: (total − non-torch) × mem_fraction_static
        util = f" ((total − non-torch) × {m.gpu_memory_utilization:g})"

    # what the engine allocates after its KV cache is not taken from its budget (memory.outside_budget)
    def outside(key: str) -> str:
        return ", outside the budget" if key in m.outside_budget else ""

    rows = [
        ("GPU total", m.total_bytes, ""),
        (f"engine budget{util}", m.budget_bytes, ""),
        ("weights", m.weights_bytes, result.weights_source),
        ("… of which LoRA slots", result.lora_bytes, "--enable-lora"),
        (
            "… moved to host memory",
            result.weights_offloaded_bytes,
            "--cpu-offload-gb, not counted above",
        ),
        ("activation peak", m.activation_bytes, "estimate" + outside("activation")),
        ("non-torch (CUDA context, NCCL)", m.non_torch_bytes, "estimate" + outside("non_torch")),
        (
            "CUDA graphs",
            m.cudagraph_bytes,
            ("estimate" + outside("cudagraph")) if m.cudagraph_bytes else "",
        ),  # fmt: skip
        ("KV cache pool", m.kv_cache_bytes, f"{result.num_blocks:,} blocks"),
        ("left free", m.free_bytes, ""),
    ]
    for name, value, note in rows:
        if name == "CUDA graphs" and not can.cuda_graphs:
            continue  # the engine captures none kvcalc sizes
        if name.startswith(("… of which LoRA", "… moved to host")) and not value:
            continue
        if name.startswith("non-torch") and not can.torch_runtime:
            continue  # no PyTorch: the notes say what is not modelled instead
        table.add_row(name, fmt.size(value), note)
    console.print(table)
    if m.total_bytes:
        console.print(memory_bar(m, cuda_graphs=can.cuda_graphs, non_torch=can.torch_runtime))
    kv = Table(title="KV cache", title_justify="left", show_header=False)
    kv.add_column("what")
    kv.add_column("value", justify="right")
    kv.add_row("available for KV per GPU", _with_band(result))
    kv.add_row("KV per token (per GPU)", fmt.bytes_and_size(result.kv_bytes_per_token))
    spec = result.speculative
    if spec is not None:
        kv.add_row(
            f"… speculative draft ({spec.method}, {spec.num_speculative_tokens} token(s) a step)",
            f"{spec.draft_layers} layer(s), {fmt.int_(spec.draft_kv_bytes_per_token)} B/token",
        )
        if spec.draft_weights_bytes:
            kv.add_row("… draft weights (in weights)", fmt.size(spec.draft_weights_bytes))
    kv.add_row(
        f"KV per request at {result.max_model_len:,} tokens (blocks)",
        fmt.size(result.engine_kv_bytes_per_request),
    )
    if result.layer_kv_bytes_per_request is not None and (
        result.layer_kv_bytes_per_request != result.engine_kv_bytes_per_request
    ):
        kv.add_row(
            "… own bytes (windows capped, no blocks)",
            fmt.size(result.layer_kv_bytes_per_request),
        )
    kv.add_row("block size (tokens)", fmt.int_(result.block_size))
    kv.add_row("blocks", fmt.int_(result.num_blocks))
    blocks_tokens = result.num_blocks * result.block_size
    if can.block_pool and result.kv_cache_tokens != blocks_tokens:
        # vLLM 0.21 on prints concurrency × max_model_len: the blocks are shared by every group
        kv.add_row("tokens printed (concurrency × length)", fmt.int_(result.kv_cache_tokens))
        kv.add_row("… blocks × block size", fmt.int_(blocks_tokens))
    else:
        kv.add_row("token capacity", fmt.int_(result.kv_cache_tokens))
    starts = result.verdict not in ("wont-start", "weights-dont-fit")
    # a deployment that does not start runs none of what its cache would hold
    per_rank = " per DP rank" if result.data_parallel_size > 1 else ""
    kv.add_row(
        f"max concurrency at {result.max_model_len:,} tokens",
        f"{result.max_concurrency:.2f}x{per_rank}" + ("" if starts else " (none run)"),
    )
    if result.data_parallel_replicas > 1:
        kv.add_row(
            f"… over all {result.data_parallel_replicas} KV pools",
            f"{result.total_max_concurrency:.2f}x",
        )
    if result.host_kv_tokens is not None:
        kv.add_row("host KV tier (offloaded, beside GPU)", f"{result.host_kv_tokens:,} tokens")
    if result.host_memory_bytes is None:
        kv.add_row("host memory needed", "not known (see notes)")
    elif result.host_memory_bytes:
        kv.add_row("host memory needed (all GPUs)", fmt.size(result.host_memory_bytes))
    if result.workload_concurrency is not None:
        kv.add_row(
            f"workload concurrency ({result.workload_tokens:,} tokens)",
            f"{result.workload_concurrency:.2f}x",
        )
    if result.max_num_seqs and result.runnable_concurrency >= result.max_num_seqs:
        kv.add_row(
            f"runs at once ({can.max_num_seqs_name} {result.max_num_seqs:,})",
            f"{result.runnable_concurrency:,.2f}x",
        )
    if result.target_concurrency is not None:
        kv.add_row("target concurrency", fmt.int_(result.target_concurrency))
    if can.fixed_pool:  # the pool is sized by the settings: what is left of the KV budget
        label, what = "headroom", "of the KV budget"
    else:  # the pool fills the budget: the share beyond the target concurrency
        label = f"headroom beyond {fmt.count(result.target_concurrency or 1, 'request')}"
        what = "of the pool"
    kv.add_row(label, f"{fmt.size(result.headroom_bytes)} ({result.headroom_fraction:.0%} {what})")
    if result.throughput:
        t = result.throughput
        kv.add_row(
            f"decode ceiling at {fmt.count(t.get('batch', 0), 'request')} (upper bound)",
            f"{t.get('tokens_per_s', 0):,.0f} tok/s total, "
            f"{t.get('per_request_tokens_per_s', 0):,.1f} each",
        )
    console.print(kv)
    if result.log_lines:
        console.print(f"[bold]{result.engine} would print:[/]")
        for line in result.log_lines:
            console.print(f"  {line}", highlight=False, markup=False)
    style = VERDICT_STYLE.get(result.verdict, "bold")
    from rich.markup import escape  # engine text may hold brackets: "[block_size not supported]"

    console.print(f"Verdict: [{style}]{result.verdict}[/] — {escape(result.verdict_reason)}")
    if result.suggestions:
        console.print("[bold]What would change it[/] (each planned):")
        for s in result.suggestions:
            console.print(f"  • {escape(s.text)}", highlight=False)
    if result.notes:
        console.print("[dim]Notes:[/]")
        for note in result.notes:
            for line in hanging(note, console.width, first="  - ", rest="    "):
                console.print(f"[dim]{escape(line)}[/]", highlight=False, soft_wrap=True)


def hanging(text: str, width: int, *, first: str, rest: str) -> list[str]:
    """``text`` wrapped at ``width`` columns, later lines indented under the first's text."""
    import textwrap

    return textwrap.wrap(text, width=max(40, width), initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first]  # fmt: skip


def _with_band(result) -> str:
    """``53.10 GiB ± 0.80`` (or ``-0.26/+0.25``); the bare figure when no band applies."""
    value = result.available_kv_bytes
    down, up = value - result.available_kv_bytes_low, result.available_kv_bytes_high - value
    if not down and not up:
        return fmt.size(value)
    if down == up:
        return f"{fmt.size(value)} ± {down / (1 << 30):.2f}"
    return f"{fmt.size(value)} -{down / (1 << 30):.2f}/+{up / (1 << 30):.2f}"
