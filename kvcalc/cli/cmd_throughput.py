"""``kvcalc throughput``: the decode-throughput ceiling per batch size."""

from __future__ import annotations

from typing import Annotated, Any

from kvcalc.cli.app import app
from kvcalc.cli.options import DEPLOYMENT, MODEL_SOURCE, ModelArgument, command, opt, use
from kvcalc.planning.settings import HARDWARE_PANEL, SERVING_PANEL


@command(
    app,
    *(use(n, multi=True, note="One table per engine.") if n == "engine" else n
      for n in DEPLOYMENT), "num_gpus",
    use("batch", multi=True, note="One row per batch size (default: 1, 2, 4... up to the "
        "KV-limited maximum)."),
    "prompt_len", "output_len",
    use("calibration", note="Its measured decode efficiency applies too."),
    "from_command", "ignore_unmodelled", *MODEL_SOURCE, "json",
    examples=(
        "kvcalc throughput llama-3.1-8b --gpu H100 --prompt-len 2k --output-len 500",
        "kvcalc throughput qwen3-1.7b --gpu-memory 8GiB --bandwidth 272GB/s",
    ),
)  # fmt: skip
def throughput(
    model: ModelArgument,
    *,
    bandwidth: Annotated[
        str | None,
        opt(
            "--bandwidth",
            metavar="BYTES/S",
            help="Memory bandwidth per GPU, e.g. 448GB/s (overrides the catalog's; needed with --gpu-memory).",
            panel=HARDWARE_PANEL,
        ),
    ] = None,
    tflops: Annotated[
        float | None,
        opt(
            "--tflops",
            metavar="TFLOPS",
            min=0.001,
            help="Dense 16-bit tensor TFLOP/s per GPU (overrides the catalog's; without it only the memory roof applies).",
            panel=HARDWARE_PANEL,
        ),
    ] = None,
    efficiency: Annotated[
        float | None,
        opt(
            "--efficiency",
            metavar="FRACTION",
            min=0.01,
            max=1.5,
            help="Measured fraction of the ceiling to apply (default 1.0, or a --calibration record's).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    given: dict[str, Any],
) -> int:
    """Decode-throughput ceiling (an upper bound) from the memory-bandwidth roofline, per batch size.

    Context per request: prompt + output/2 with --prompt-len, else --max-model-len. Exit status:
    0 computed; 1 the deployment does not fit (nothing to run); 2 bad input.
    """
    from kvcalc.cli.options import source_kwargs, with_gguf_file
    from kvcalc.cli.plan_args import plan_request, say_notes
    from kvcalc.planning.api import throughput_reference

    engines = given["engine"] or ("vllm",)
    request = plan_request(given, model, batch=None, engine=engines[0])
    result = throughput_reference(
        with_gguf_file(model, given["gguf_file"]), request.inputs, bandwidth=bandwidth,
        tflops=tflops, batches=tuple(given["batch"] or ()), efficiency=efficiency,
        engines=tuple(engines), **{**source_kwargs(given), "revision": request.revision},
    )  # fmt: skip
    say_notes(request.notes)
    if given["json"]:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import curve_view

        for i, entry in enumerate(result.engines):
            if i:
                curve_view.stdout_console().print()
            curve_view.render_throughput(result.for_engine(entry))
    return 0 if all(e.points for e in result.engines) else 1
