"""``kvcalc curve``: concurrency and token capacity as a function of context length."""

from __future__ import annotations

from typing import Annotated, Any

from kvcalc.cli.app import app
from kvcalc.cli.options import DEPLOYMENT, MODEL_SOURCE, ModelArgument, command, opt, use
from kvcalc.planning.settings import OUTPUT_PANEL, SERVING_PANEL

_ONE_SERIES = "One series per engine and cache dtype."


@command(
    app,
    *(use(n, multi=True, note=_ONE_SERIES) if n in ("engine", "kv_cache_dtype") else n
      for n in DEPLOYMENT),
    "from_command", "ignore_unmodelled", *MODEL_SOURCE, "json",
    examples=(
        "kvcalc curve llama-3.1-8b --gpu H100 --kv-cache-dtype fp8",
        "kvcalc curve qwen3-8b --gpu L40S --lengths 4K,8K,32K",
    ),
)  # fmt: skip
def curve(
    model: ModelArgument,
    *,
    lengths: Annotated[
        str | None,
        opt(
            "--lengths",
            help="Context lengths, comma-separated, as vLLM spells them (k = 1,000, K = 1,024): "
            "4K,8K,32K (default: doubling from 1K to --max-model-len or the model's maximum).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    plot: Annotated[
        str | None,
        opt(
            "--plot",
            help="Also write the chart to FILE.png or FILE.svg (needs the `plot` extra: matplotlib).",
            panel=OUTPUT_PANEL,
        ),
    ] = None,
    given: dict[str, Any],
) -> int:
    """Maximum concurrency and token capacity as a function of context length, per KV dtype and engine.

    Figures are per engine instance (one data-parallel replica).
    """
    from kvcalc.cli.options import source_kwargs, with_gguf_file
    from kvcalc.cli.plan_args import plan_request, say_notes
    from kvcalc.planning.api import capacity_curve_reference
    from kvcalc.planning.curves import parse_lengths

    engines, dtypes = given["engine"] or (), given["kv_cache_dtype"] or ()
    request = plan_request(given, model, engine=(engines or ("vllm",))[0],
                           kv_cache_dtype=(dtypes or ("auto",))[0])  # fmt: skip
    result = capacity_curve_reference(
        with_gguf_file(model, given["gguf_file"]), request.inputs,
        **{**source_kwargs(given), "revision": request.revision},
        lengths=parse_lengths(lengths) if lengths else None,
        kv_cache_dtypes=tuple(dtypes), engines=tuple(engines),
    )  # fmt: skip
    say_notes(request.notes)
    from kvcalc.render import curve_view

    if plot:
        curve_view.write_plot(result, plot)
    if given["json"]:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        curve_view.render(result)
    if plot:
        from kvcalc.render import console

        console.err(f"wrote {plot}")
    return 0
