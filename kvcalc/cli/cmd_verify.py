"""``kvcalc verify``: allocate the engine's real cache tensors with torch and measure them."""

from __future__ import annotations

from typing import Annotated

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import (
    HARDWARE_PANEL,
    OUTPUT_PANEL,
    SERVING_PANEL,
    GgufFileOpt,
    JsonOpt,
    KvCacheDtypeOpt,
    MaxModelLenOpt,
    OfflineOpt,
    RevisionOpt,
    TokenOpt,
    opt,
)

CHECK_PANEL = "Check"


@app.command()
def verify(
    model: Annotated[
        str, typer.Argument(help="Bundled model, config path or Hub id.", show_default=False)
    ],
    *,
    engine: Annotated[
        str,
        opt(
            "--engine",
            help="vllm, hf (transformers), llamacpp or sglang.",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = "vllm",
    engine_version: Annotated[
        str | None,
        opt(
            "--engine-version",
            help="Engine version whose layout applies (default newest; hf: the installed transformers).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    tensor_parallel_size: Annotated[
        int,
        opt(
            "--tensor-parallel-size",
            "-tp",
            min=1,
            help="Verify one rank's share of this many.",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = 1,
    block_size: Annotated[
        int | None,
        opt(
            "--block-size",
            min=1,
            help="Tokens per block (default: the engine's).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    max_model_len: MaxModelLenOpt = None,
    engine_option: Annotated[
        list[str] | None,
        opt(
            "--engine-option",
            "-E",
            help="Engine-specific KEY=VALUE, repeatable (as for plan).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    num_blocks: Annotated[
        int | None,
        opt("--num-blocks", min=1, help="vLLM blocks to allocate (default 4).", panel=CHECK_PANEL),
    ] = None,
    tokens: Annotated[
        int | None,
        opt(
            "--tokens",
            min=1,
            help="Tokens per sequence for hf, llamacpp and sglang (default 64; llama.cpp pads to 256).",
            panel=CHECK_PANEL,
        ),
    ] = None,
    batch: Annotated[
        int,
        opt(
            "--batch",
            min=1,
            help="Sequences in the transformers cache.",
            panel=CHECK_PANEL,
            show_default=True,
        ),
    ] = 1,
    layers: Annotated[
        int | None,
        opt(
            "--layers",
            min=1,
            help="Keep only the first N layers (their pattern kept).",
            panel=CHECK_PANEL,
        ),
    ] = None,
    device: Annotated[
        str,
        opt(
            "--device",
            help="auto (CUDA if available), cpu, cuda or cuda:N.",
            panel=HARDWARE_PANEL,
            show_default=True,
        ),
    ] = "auto",
    tolerance: Annotated[
        float,
        opt(
            "--tolerance",
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
    gpu_memory_utilization: Annotated[
        float | None,
        opt(
            "--gpu-memory-utilization",
            help="--fill budget fraction (default: the engine's).",
            panel=CHECK_PANEL,
        ),
    ] = None,
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
            min=1,
            help="--run prompt length (default: past every sliding window).",
            panel=CHECK_PANEL,
        ),
    ] = None,
    new_tokens: Annotated[
        int,
        opt(
            "--new-tokens",
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
            help="Append a calibration record (JSON line) to FILE, for plan --calibration.",
            panel=OUTPUT_PANEL,
        ),
    ] = None,
    revision: RevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    token: TokenOpt = None,
    offline: OfflineOpt = False,
    json_: JsonOpt = False,
) -> int:
    """Prove the prediction: allocate the KV cache exactly as the engine lays it out and measure it.

    Needs torch (pip install 'kvcalc[verify]'). Exit status: 0 within --tolerance; 1 beyond it;
    2 could not run (no torch, --fill without CUDA, bad input).

    Examples:

    \b
      kvcalc verify llama-3.1-8b --engine vllm --kv-cache-dtype fp8
      kvcalc verify qwen3-8b --engine hf --max-model-len 4K
    """
    from kvcalc.cli.plan_args import parse_engine_options
    from kvcalc.verify.check import verify as run_verify
    from kvcalc.verify.spec import VerifyOptions

    opts = VerifyOptions(
        engine=engine, engine_version=engine_version, kv_cache_dtype=kv_cache_dtype,
        tensor_parallel_size=tensor_parallel_size, block_size=block_size, num_blocks=num_blocks,
        tokens=tokens, batch_size=batch, max_model_len=max_model_len,
        engine_options=parse_engine_options(engine_option or ()),
    )  # fmt: skip
    from kvcalc.cli.options import with_gguf_file

    result = run_verify(
        with_gguf_file(model, gguf_file), opts, layers=layers, device=device, tolerance=tolerance, fill=fill, run=run,
        prompt_tokens=prompt_tokens, new_tokens=new_tokens, gpu_memory_utilization=gpu_memory_utilization,
        revision=revision, token=token, offline=offline or None,
    )  # fmt: skip
    if record:
        from kvcalc.sources.calibration import append_record, make_record

        append_record(record, make_record(result))
    if json_:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import verify_view

        verify_view.render(result)
    return 0 if result.passed else 1
