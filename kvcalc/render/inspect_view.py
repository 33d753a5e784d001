"""The ``kvcalc inspect`` report."""

from __future__ import annotations

from typing import Any

from kvcalc.model.layouts import LayerKind
from kvcalc.planning.inspect import InspectResult, LayerInfo
from kvcalc.render import fmt
from kvcalc.render.console import stdout_console


def _indices(indices: tuple[int, ...]) -> str:
    if len(indices) <= 6:
        return ",".join(map(str, indices))
    step = indices[1] - indices[0]
    if all(b - a == step for a, b in zip(indices, indices[1:], strict=False)):
        return (
            f"{indices[0]}..{indices[-1]} step {step}"
            if step > 1
            else f"{indices[0]}..{indices[-1]}"
        )
    return ",".join(map(str, indices[:5])) + f",... ({len(indices)})"


def _state_label(result: Any) -> str:
    """What the constant per-request bytes are: recurrent state, or a cross-attention's encoder K/V."""
    kinds = {layer.kind for layer in result.layers}
    if LayerKind.CROSS in kinds and LayerKind.RECURRENT not in kinds:
        return "Cross-attention K/V of the encoder's tokens"
    return "Recurrent state"


def _shape(layer: LayerInfo) -> str:
    if layer.kind is LayerKind.RECURRENT:
        state = "; ".join(f"{n} {tuple(s)} {d}" for n, s, d in layer.state_shapes)
        kv = f"; {layer.num_kv_heads} KV heads × {layer.head_dim_k}" if layer.num_kv_heads else ""
        return f"{layer.mixer}: {state}{kv}" if layer.mixer else state + kv
    if layer.kind in (LayerKind.MLA, LayerKind.COMPRESSED):
        return f"latent {layer.head_dim_k}"
    if layer.kind is LayerKind.SHARED:
        return "an earlier layer's KV"
    if layer.kind is LayerKind.NONE:
        return "-"
    dims = (
        str(layer.head_dim_k)
        if layer.head_dim_k == layer.head_dim_v
        else f"{layer.head_dim_k}/{layer.head_dim_v}"
    )
    return f"{layer.num_kv_heads} KV heads × {dims}"


def _print_wrapping_shape(table: Any) -> None:
    """Every column but ``shape`` keeps its whole width (header lines and cells: numbers and their
    units are never cut); ``shape`` wraps into what is left, and when too little is left each
    layer group is stacked (:func:`kvcalc.render.tables.print_stacked`) rather than a header cut."""
    from rich.cells import cell_len

    console = stdout_console()
    widths = {}
    for column in table.columns:
        lines = [*str(column.header).split("\n"), *(str(c) for c in column.cells)]
        widths[column.header] = max(cell_len(x) for x in lines)
    others = sum(w for h, w in widths.items() if h != "shape")
    left = console.width - others - 3 * len(table.columns) - 1
    for column in table.columns:
        if column.header != "shape":
            column.no_wrap = True
            column.min_width = widths[column.header]
    if left >= 12:
        console.print(table)
    else:  # too narrow even for a wrapped shape: one block per layer group
        from kvcalc.render.tables import print_stacked

        print_stacked(console, table, lead=1)


def render(result: InspectResult, *, explain: bool = False) -> None:
    from rich.table import Table

    console = stdout_console()
    if not result.layout_validated:
        console.print(fmt.unverified_warning(result.model, result.unverified_keys))
    console.print(
        f"[bold]{result.model}[/]  ({result.model_source})\n"
        f"{result.model_type} · {result.attention_kind} · {result.num_layers} layers · "
        f"model dtype {result.model_dtype} · default max_model_len {result.default_max_model_len:,}"
    )
    layers = Table(title=f"Layers (cache dtype {result.kv_cache_dtype})", title_justify="left")
    for col in ("kind", "layers", "which", "shape", "window"):
        layers.add_column(col)
    # the units stay in the headers: two lines each rather than cut in a narrow terminal
    layers.add_column("bytes/token\nper layer", justify="right")
    layers.add_column("state/request\nper layer", justify="right")
    for layer in result.layer_groups:
        layers.add_row(
            layer.kind,
            str(layer.count),
            _indices(layer.indices),
            _shape(layer),
            f"{layer.window:,}" if layer.window else "-",
            fmt.int_(layer.bytes_per_token),
            fmt.size(layer.state_bytes) if layer.state_bytes else "-",
        )
    _print_wrapping_shape(layers)
    console.print(
        f"KV per token (all layers, every token): [bold]{fmt.bytes_and_size(result.kv_bytes_per_token)}[/]\n"
        f"KV per request at {result.max_model_len:,} tokens, the layers' own bytes "
        f"(windows capped, state added, no engine blocks): "
        f"[bold]{fmt.bytes_and_size(result.layer_kv_bytes_per_request)}[/]"
        + (
            f"\n{_state_label(result)} per request: "
            f"{fmt.bytes_and_size(result.state_bytes_per_request)}"
            if result.state_bytes_per_request
            else ""
        )
    )
    dtypes = Table(title="By cache dtype", title_justify="left")
    dtypes.add_column("cache dtype")
    dtypes.add_column("bytes / token", justify="right")
    dtypes.add_column(f"layers' bytes / request @ {result.max_model_len:,}", justify="right")
    for row in result.by_dtype:
        dtypes.add_row(
            row.kv_cache_dtype,
            fmt.int_(row.kv_bytes_per_token),
            fmt.size(row.layer_kv_bytes_per_request),
        )
    console.print(dtypes)
    if result.low_bit_by_engine:
        low = Table(title=f"4- and 8-bit caches by engine (each engine's own blocks, one request "
                    f"@ {result.max_model_len:,})", title_justify="left")  # fmt: skip
        low.add_column("engine")
        low.add_column("--kv-cache-dtype")
        low.add_column("bits", justify="right")
        low.add_column("bytes / token", justify="right")
        low.add_column("engine bytes / request", justify="right")
        for r in result.low_bit_by_engine:
            if r.refused:
                low.add_row(r.engine, r.kv_cache_dtype, str(r.bits), "refused", "-")
            else:
                low.add_row(r.engine, r.kv_cache_dtype, str(r.bits), fmt.int_(r.kv_bytes_per_token or 0),
                            fmt.size(r.engine_kv_bytes_per_request or 0))  # fmt: skip
        console.print(low)
    if result.weights:
        _weights(console, result.weights)
    if explain:
        prov = Table(title="Where each figure came from", title_justify="left")
        prov.add_column("figure")
        prov.add_column("config.json")
        for key, text in result.provenance.items():
            prov.add_row(key, text)
        console.print(prov)
        keys = Table(title="config.json keys", title_justify="left")
        keys.add_column("")
        keys.add_column("keys")
        keys.add_row("read", ", ".join(result.config_keys) or "-")
        keys.add_row("ignored", ", ".join(result.ignored_keys) or "-")
        console.print(keys)


def _weights(console, weights: dict) -> None:
    from rich.table import Table

    table = Table(title=f"Weights ({weights.get('source', 'safetensors')})", title_justify="left")
    table.add_column("dtype")
    table.add_column("parameters", justify="right")
    table.add_column("bytes", justify="right")
    for dtype, entry in (weights.get("by_dtype") or {}).items():
        params = entry.get("num_parameters")
        table.add_row(
            str(dtype),
            "" if params is None else fmt.int_(int(params)),
            fmt.size(int(entry["total_bytes"])),
        )
    table.add_row(
        "[bold]total[/]",
        fmt.int_(int(weights.get("num_parameters", 0))),
        fmt.size(int(weights.get("total_bytes", 0))),
    )
    if weights.get("experts_bytes"):
        table.add_row("  experts", "", fmt.size(int(weights["experts_bytes"])))
        table.add_row("  rest", "", fmt.size(int(weights.get("non_expert_bytes", 0))))
    console.print(table)
