"""``kvcalc models``."""

from __future__ import annotations

from typing import Any

from kvcalc.cli.app import app
from kvcalc.cli.options import command


@command(app, "json", examples=("kvcalc models", "kvcalc models --json"))
def models(*, given: dict[str, Any]) -> int:
    """List the bundled models (they work offline) with their attention kind."""
    from kvcalc.render import to_json
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
