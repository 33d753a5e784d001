"""``kvcalc verify``: allocate the engine's real cache tensors with torch and measure them."""

from __future__ import annotations

from typing import Annotated, Any

from kvcalc.cli.app import app
from kvcalc.cli.options import MODEL_SOURCE, ModelArgument, command, opt, refuse, use
from kvcalc.planning.settings import HARDWARE_PANEL, OUTPUT_PANEL

CHECK_PANEL = "Check"
_ON_THIS_MACHINE = (
    "verify measures the cache on this machine's device; {flag} names memory it does not have",
    "use --device cpu or --device cuda here (--fill emulates the deployment on the GPU present); "
    "kvcalc plan MODEL {flag} ... predicts for a GPU you do not have",
)


@command(
    app,
    use("engine", note="verify: vllm, hf (transformers), llamacpp or sglang."),
    use("engine_version", note="hf: the installed transformers."),
    "kv_cache_dtype",
    use("tensor_parallel_size", note="Verify one rank's share."),
    "block_size", "max_model_len", "engine_option",
    use("gpu_memory_utilization", note="The --fill budget."),
    use("batch", default=1, note="Sequences in the transformers cache."),
    *MODEL_SOURCE, "json",
    refuse("gpu", *(t.format(flag="--gpu") for t in _ON_THIS_MACHINE)),
    refuse("gpu_memory", *(t.format(flag="--gpu-memory") for t in _ON_THIS_MACHINE)),
    examples=(
        "kvcalc verify llama-3.1-8b --engine vllm --kv-cache-dtype fp8",
        "kvcalc verify qwen3-8b --engine hf --max-model-len 4K",
    ),
)  # fmt: skip
def verify(
    model: ModelArgument,
    *,
    num_blocks: Annotated[
        int | None,
        opt(
            "--num-blocks",
            metavar="N",
            min=1,
            help="vLLM blocks to allocate (default 4).",
            panel=CHECK_PANEL,
        ),
    ] = None,
    tokens: Annotated[
        int | None,
        opt(
            "--tokens",
            metavar="N",
            min=1,
            help="Tokens per sequence for hf, llamacpp and sglang (default 64; llama.cpp pads to 256).",
            panel=CHECK_PANEL,
        ),
    ] = None,
    layers: Annotated[
        int | None,
        opt(
            "--layers",
            metavar="N",
            min=1,
            help="Keep only the first N layers (their pattern kept).",
            panel=CHECK_PANEL,
        ),
    ] = None,
    device: Annotated[
        str,
        opt(
            "--device",
            metavar="DEVICE",
            help="auto (CUDA if available), cpu, cuda or cuda:N.",
            panel=HARDWARE_PANEL,
            show_default=True,
        ),
    ] = "auto",
    tolerance: Annotated[
        float,
        opt(
            "--tolerance",
            metavar="FRACTION",
            min=0.0,
            max=0.99,
            help="Largest relative error that passes.",
            panel=CHECK_PANEL,
            show_default=True,
        ),
    ] = 0.01,
    fill: Annotated[
        bool,
        opt(
            "--fill",
            help="CUDA only: emulate the deployment (weights, reserve, cache blocks up to the budget).",
            panel=CHECK_PANEL,
        ),
    ] = False,
    run: Annotated[
        bool,
        opt(
            "--run",
            help="hf: transformers generates with random weights; llamacpp: llama.cpp loads a GGUF in the model's layout (CPU). Their own cache measured.",
            panel=CHECK_PANEL,
        ),
    ] = False,
    prompt_tokens: Annotated[
        int | None,
        opt(
            "--prompt-tokens",
            metavar="N",
            min=1,
            help="--run prompt length (default: past every sliding window).",
            panel=CHECK_PANEL,
        ),
    ] = None,
    new_tokens: Annotated[
        int,
        opt(
            "--new-tokens",
            metavar="N",
            min=2,
            help="--run tokens to generate.",
            panel=CHECK_PANEL,
            show_default=True,
        ),
    ] = 4,
    record: Annotated[
        str | None,
        opt(
            "--record",
            metavar="FILE",
            help="Append a calibration record (JSON line) to FILE, for plan --calibration.",
            panel=OUTPUT_PANEL,
        ),
    ] = None,
    given: dict[str, Any],
) -> int:
    """Prove the prediction: allocate the KV cache exactly as the engine lays it out and measure it.

    Needs torch (the verify extra: pip install ".[verify]" in a kvcalc checkout). Exit status: 0 within --tolerance; 1 beyond it;
    2 could not run (no torch, --fill without CUDA, bad input).
    """
    from kvcalc.cli.options import source_kwargs, with_gguf_file
    from kvcalc.verify.check import verify as run_verify
    from kvcalc.verify.spec import VerifyOptions

    g = given
    opts = VerifyOptions(
        engine=g["engine"], engine_version=g["engine_version"], kv_cache_dtype=g["kv_cache_dtype"],
        tensor_parallel_size=g["tensor_parallel_size"], block_size=g["block_size"],
        num_blocks=num_blocks, tokens=tokens, batch_size=g["batch"], max_model_len=g["max_model_len"],
        engine_options=tuple(g["engine_option"] or ()),
    )  # fmt: skip
    result = run_verify(
        with_gguf_file(model, g["gguf_file"]), opts, layers=layers, device=device, tolerance=tolerance,
        fill=fill, run=run, prompt_tokens=prompt_tokens, new_tokens=new_tokens,
        gpu_memory_utilization=g["gpu_memory_utilization"], **source_kwargs(g),
    )  # fmt: skip
    if record:
        from kvcalc.sources.calibration import append_record, make_record

        append_record(record, make_record(result))
    if g["json"]:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import verify_view

        verify_view.render(result)
    return 0 if result.passed else 1
