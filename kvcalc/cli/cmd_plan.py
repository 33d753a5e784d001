"""``kvcalc plan``: flag names follow vLLM's, so serving flags can be pasted."""

from __future__ import annotations

from typing import Annotated

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import (
    HARDWARE_PANEL,
    OUTPUT_PANEL,
    SERVING_PANEL,
    AllowLongOpt,
    GgufFileOpt,
    JsonOpt,
    KvCacheDtypeOpt,
    MaxModelLenOpt,
    OfflineOpt,
    RevisionOpt,
    TokenOpt,
    TrustLayoutOpt,
    opt,
    tokens_opt,
)

WORKLOAD_PANEL = "Workload"


@app.command()
def plan(
    model: Annotated[
        str | None,
        typer.Argument(
            help="Bundled model, config path or Hub id (optional with --from-command).",
            show_default=False,
        ),
    ] = None,
    *,
    gpu: Annotated[
        str | None,
        opt(
            "--gpu",
            help="GPU from the catalog (`kvcalc gpus`), e.g. H100-80GB.",
            panel=HARDWARE_PANEL,
        ),
    ] = None,
    gpu_memory: Annotated[
        str | None,
        opt(
            "--gpu-memory",
            help="Memory per GPU instead of --gpu: 80GB, 79.2GiB; a bare number means GiB.",
            panel=HARDWARE_PANEL,
        ),
    ] = None,
    num_gpus: Annotated[
        int | None,
        opt(
            "--num-gpus",
            min=1,
            help="GPUs in all (default TP × PP); more make data-parallel replicas.",
            panel=HARDWARE_PANEL,
        ),
    ] = None,
    tensor_parallel_size: Annotated[
        int,
        opt(
            "--tensor-parallel-size",
            "-tp",
            min=1,
            help="Tensor-parallel ranks.",
            panel=HARDWARE_PANEL,
            show_default=True,
        ),
    ] = 1,
    pipeline_parallel_size: Annotated[
        int,
        opt(
            "--pipeline-parallel-size",
            "-pp",
            min=1,
            help="Pipeline stages.",
            panel=HARDWARE_PANEL,
            show_default=True,
        ),
    ] = 1,
    engine: Annotated[
        str,
        opt(
            "--engine",
            help="vllm, sglang, llamacpp, hf (transformers), trtllm or lmdeploy (TurboMind).",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = "vllm",
    engine_version: Annotated[
        str | None,
        opt(
            "--engine-version",
            help="Engine version whose defaults apply (vLLM: 0.33, 0.21, 0.10, 0.8, 0.6); default newest.",
            panel=SERVING_PANEL,
        ),
    ] = None,
    max_model_len: MaxModelLenOpt = None,
    max_num_seqs: Annotated[
        int | None,
        opt(
            "--max-num-seqs",
            min=1,
            help="Concurrent requests wanted (the engine's cap).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    batch: Annotated[
        int | None,
        opt(
            "--batch",
            min=1,
            help="Concurrent requests wanted (overrides --max-num-seqs as the target).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    dtype: Annotated[
        str | None,
        opt("--dtype", help="Weight dtype: auto, bfloat16, float16, float32.", panel=SERVING_PANEL),
    ] = None,
    quantization: Annotated[
        str | None,
        opt(
            "--quantization",
            "-q",
            help="Weight quantization: fp8, awq, gptq, mxfp4, bitsandbytes, none (default: the checkpoint's).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    weights_memory: Annotated[
        str | None,
        opt(
            "--weights-memory",
            help="Weight bytes per GPU you already know (e.g. vLLM's 'Model loading took X GiB'); a bare number means GiB.",
            panel=SERVING_PANEL,
        ),
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        opt(
            "--gpu-memory-utilization",
            help="Fraction of total GPU memory the engine may use (vLLM default 0.92; 0.9 before).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    block_size: Annotated[
        int | None,
        opt(
            "--block-size",
            min=1,
            help="Tokens per KV block (default: the engine's).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        tokens_opt(
            "--max-num-batched-tokens",
            help="Tokens per scheduler step (default: the engine's, by GPU).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    enforce_eager: Annotated[
        bool, opt("--enforce-eager", help="No CUDA graphs (no graph memory).", panel=SERVING_PANEL)
    ] = False,
    kv_cache_memory: Annotated[
        str | None,
        opt(
            "--kv-cache-memory",
            help="KV-cache bytes per GPU, skipping the memory estimate (vLLM kv_cache_memory_bytes); a bare number means GiB.",
            panel=SERVING_PANEL,
        ),
    ] = None,
    prompt_len: Annotated[
        int | None,
        tokens_opt(
            "--prompt-len", help="Expected prompt tokens per request.", panel=WORKLOAD_PANEL
        ),
    ] = None,
    output_len: Annotated[
        int | None,
        tokens_opt(
            "--output-len",
            minimum=0,
            help="Expected output tokens per request.",
            panel=WORKLOAD_PANEL,
        ),
    ] = None,
    shared_prefix: Annotated[
        int,
        tokens_opt(
            "--shared-prefix",
            minimum=0,
            help="Prompt tokens shared by all requests (prefix caching).",
            panel=WORKLOAD_PANEL,
        ),
    ] = 0,
    tight_threshold: Annotated[
        float,
        opt(
            "--tight-threshold",
            min=0.0,
            max=0.99,
            help="Headroom below this fraction of the KV cache is 'tight'.",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = 0.10,
    engine_option: Annotated[
        list[str] | None,
        opt(
            "--engine-option",
            "-E",
            help="Engine-specific KEY=VALUE, repeatable: llama.cpp n_seq_max, n_ubatch, kv_unified, swa_full; hf cache_implementation=static; sglang page_size; vllm usage_context=llm.",
            panel=SERVING_PANEL,
        ),
    ] = None,
    calibration: Annotated[
        str | None,
        opt(
            "--calibration",
            help="A `kvcalc verify --record` file correcting the overhead estimate.",
            panel=SERVING_PANEL,
        ),
    ] = None,
    from_command: Annotated[
        str | None,
        opt(
            "--from-command",
            help="Read the settings from a serving command: 'vllm serve MODEL --max-model-len 32768 -tp 2'.",
            panel=SERVING_PANEL,
        ),
    ] = None,
    allow_long_max_model_len: AllowLongOpt = False,
    revision: RevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    token: TokenOpt = None,
    offline: OfflineOpt = False,
    trust_layout: TrustLayoutOpt = False,
    json_: JsonOpt = False,
    no_throughput: Annotated[
        bool, opt("--no-throughput", help="Skip the decode-throughput ceiling.", panel=OUTPUT_PANEL)
    ] = False,
) -> int:
    """Plan a deployment: memory per GPU, KV blocks, token capacity, concurrency and a verdict.

    Exit status: 0 ok or tight; 1 below-target, wont-start or weights-dont-fit; 2 bad input.

    Examples:

    \b
      kvcalc plan llama-3.1-8b --gpu H100-80GB --max-model-len 32K
      kvcalc plan --from-command 'vllm serve Qwen/Qwen3-8B -tp 2' --gpu L40S
    """
    from kvcalc.cli.options import with_gguf_file
    from kvcalc.cli.plan_args import build_inputs
    from kvcalc.planning.api import plan_reference

    request = build_inputs({k: v for k, v in locals().items() if k != "gguf_file"})
    result = plan_reference(
        with_gguf_file(request.reference, gguf_file),
        request.inputs,
        revision=request.revision,
        token=token,
        offline=offline or None,
        with_throughput=not no_throughput,
        notes=request.notes,
    )
    if json_:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import plan_view

        plan_view.render(result)
    return 0 if result.passed else 1
