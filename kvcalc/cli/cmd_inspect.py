"""``kvcalc inspect``."""

from __future__ import annotations

from typing import Annotated

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import (
    OUTPUT_PANEL,
    GgufFileOpt,
    JsonOpt,
    KvCacheDtypeOpt,
    MaxModelLenOpt,
    ModelArg,
    OfflineOpt,
    RevisionOpt,
    TokenOpt,
    TrustLayoutOpt,
)


@app.command()
def inspect(
    model: ModelArg,
    *,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    max_model_len: MaxModelLenOpt = None,
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
    revision: RevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    token: TokenOpt = None,
    offline: OfflineOpt = False,
    trust_layout: TrustLayoutOpt = False,
    json_: JsonOpt = False,
) -> int:
    """Show a model's KV-cache layout and bytes per token for every cache dtype.

    Examples:

    \b
      kvcalc inspect llama-3.1-8b --max-model-len 32K
      kvcalc inspect gemma-2-9b-it --json
    """
    from kvcalc.cli.options import with_gguf_file
    from kvcalc.planning.inspect import inspect_loaded
    from kvcalc.render import inspect_view, to_json
    from kvcalc.sources.resolve import load_model

    loaded = load_model(
        with_gguf_file(model, gguf_file),
        revision=revision,
        token=token,
        offline=offline or None,
        trust_layout=trust_layout,
    )
    result = inspect_loaded(
        loaded, kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len, with_weights=weights
    )
    if json_:
        to_json.print_json(result.to_dict())
    else:
        inspect_view.render(result, explain=explain)
    return 0
