"""``kvcalc plan``: flag names follow vLLM's, so serving flags can be pasted."""

from __future__ import annotations

from typing import Annotated, Any

from kvcalc.cli.app import app
from kvcalc.cli.options import DEPLOYMENT, MODEL_SOURCE, OptionalModelArgument, command, opt, use
from kvcalc.planning.settings import OUTPUT_PANEL


@command(
    app,
    *DEPLOYMENT, "num_gpus", use("batch", note="The target; --max-num-seqs only caps what runs at once."),
    "tight_threshold", "calibration", "from_command", "ignore_unmodelled",
    "prompt_len", "output_len", "shared_prefix", *MODEL_SOURCE, "json",
    examples=(
        "kvcalc plan llama-3.1-8b --gpu H100-80GB --max-model-len 32K",
        "kvcalc plan --from-command 'vllm serve Qwen/Qwen3-8B -tp 2' --gpu L40S",
    ),
)  # fmt: skip
def plan(
    model: OptionalModelArgument = None,
    *,
    no_throughput: Annotated[
        bool, opt("--no-throughput", help="Skip the decode-throughput ceiling.", panel=OUTPUT_PANEL)
    ] = False,
    given: dict[str, Any],
) -> int:
    """Plan a deployment: memory per GPU, KV blocks, token capacity, concurrency and a verdict.

    Exit status: 0 ok or tight; 1 below-target, wont-start or weights-dont-fit; 2 bad input.
    """
    from kvcalc.cli.options import with_gguf_file
    from kvcalc.cli.plan_args import build_inputs
    from kvcalc.planning.api import plan_reference

    request = build_inputs(given, model)
    result = plan_reference(
        with_gguf_file(request.reference, given["gguf_file"]),
        request.inputs,
        revision=request.revision,
        token=given["token"],
        offline=given["offline"] or None,
        with_throughput=not no_throughput,
        notes=request.notes,
    )
    if given["json"]:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import plan_view

        plan_view.render(result)
    return 0 if result.passed else 1
