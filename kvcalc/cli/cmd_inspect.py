"""``kvcalc inspect``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import MODEL_SOURCE, ModelArg, command
from kvcalc.planning.settings import OUTPUT_PANEL


@command(
    app, "kv_cache_dtype", "max_model_len", *MODEL_SOURCE, "trust_layout", "json",
    examples=(
        "kvcalc inspect llama-3.1-8b --max-model-len 32K",
        "kvcalc inspect gemma-2-9b-it --json",
    ),
)  # fmt: skip
def inspect(
    model: ModelArg,
    *,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Show which config keys each figure came from.",
            rich_help_panel=OUTPUT_PANEL,
        ),
    ] = False,
    weights: Annotated[
        bool,
        typer.Option(
            "--weights/--no-weights",
            help="Show exact weights from safetensors metadata (Hub models and local checkpoints).",
            rich_help_panel=OUTPUT_PANEL,
        ),
    ] = True,
    given: dict[str, Any],
) -> int:
    """Show a model's KV-cache layout and bytes per token for every cache dtype."""
    from kvcalc.cli.options import source_kwargs, with_gguf_file
    from kvcalc.planning.inspect import inspect_loaded
    from kvcalc.render import inspect_view, to_json
    from kvcalc.sources.resolve import load_model

    loaded = load_model(
        with_gguf_file(model, given["gguf_file"]),
        **source_kwargs(given),
        trust_layout=given["trust_layout"],
    )
    result = inspect_loaded(
        loaded,
        kv_cache_dtype=given["kv_cache_dtype"],
        max_model_len=given["max_model_len"],
        with_weights=weights,
    )
    if given["json"]:
        to_json.print_json(result.to_dict())
    else:
        inspect_view.render(result, explain=explain)
    return 0
