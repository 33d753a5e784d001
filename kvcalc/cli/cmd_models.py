"""``kvcalc models``."""

from __future__ import annotations

from kvcalc.cli.app import app
from kvcalc.cli.options import JsonOpt


@app.command()
def models(json_: JsonOpt = False) -> int:
    """List the bundled models (they work offline) with their attention kind.

    Examples:

    \b
      kvcalc models
      kvcalc models --json
    """
    from kvcalc.render import to_json
    from kvcalc.render.tables import models_table
    from kvcalc.sources.catalog import list_bundled

    rows = list_bundled()
    if json_:
        to_json.print_json([row.to_dict() for row in rows])
    else:
        models_table(rows)
    return 0


@app.command()
def gpus(json_: JsonOpt = False) -> int:
    """List the GPU catalog: memory as the driver reports it, bandwidth, dense TFLOP/s.

    Examples:

    \b
      kvcalc gpus
      kvcalc gpus --json
    """
    from kvcalc.model.gpus import list_gpus
    from kvcalc.render import to_json
    from kvcalc.render.tables import gpus_table

    rows = list_gpus()
    if json_:
        from dataclasses import asdict

        to_json.print_json([asdict(g) for g in rows])
    else:
        gpus_table(rows)
    return 0
