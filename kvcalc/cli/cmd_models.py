"""``kvcalc models``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import command


@command(
    app,
    "json",
    examples=("kvcalc models", "kvcalc models --architectures"),
)
def models(
    *,
    architectures: Annotated[
        bool,
        typer.Option(
            "--architectures",
            help="List every architecture vLLM 0.33 registers with kvcalc's status: exact (a "
            "family reads its configs, checked against vLLM's own code) or refused, with why.",
        ),
    ] = False,
    engines: Annotated[
        bool,
        typer.Option(
            "--engines",
            help="With --architectures: also plan each exact family's bundled model on every "
            "engine and say which plan it and which refuse it (slower).",
        ),
    ] = False,
    given: dict[str, Any],
) -> int:
    """List the bundled models (they work offline) with their attention kind, or with
    --architectures every architecture of vLLM's registry and kvcalc's status."""
    from kvcalc.render import to_json

    if architectures or engines:
        from kvcalc.planning.api import architectures_reference
        from kvcalc.render.architectures_view import render

        listing = architectures_reference(engines=engines)
        if given["json"]:
            to_json.print_json(listing.to_dict())
        else:
            render(listing)
        return 0
    from kvcalc.render.tables import models_table
    from kvcalc.sources.catalog import list_bundled

    rows = list_bundled()
    if given["json"]:
        to_json.print_json([row.to_dict() for row in rows])
    else:
        models_table(rows)
    return 0


@command(app, "json", examples=("kvcalc gpus", "kvcalc gpus --json"))
def gpus(*, given: dict[str, Any]) -> int:
    """List the GPU catalog: memory as the driver reports it, bandwidth, dense TFLOP/s."""
    from kvcalc.model.gpus import list_gpus
    from kvcalc.render import to_json
    from kvcalc.render.tables import gpus_table

    rows = list_gpus()
    if given["json"]:
        from dataclasses import asdict

        to_json.print_json([asdict(g) for g in rows])
    else:
        gpus_table(rows)
    return 0
