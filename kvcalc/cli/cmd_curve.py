"""``kvcalc curve``, ``kvcalc compare`` and ``kvcalc throughput``: the trade-offs, shown."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import (
    HARDWARE_PANEL,
    OUTPUT_PANEL,
    SERVING_PANEL,
    TOKENS_HELP,
    GgufFileOpt,
    JsonOpt,
    MaxModelLenOpt,
    OfflineOpt,
    RevisionOpt,
    TokenOpt,
    opt,
    tokens_opt,
)

WORKLOAD_PANEL = "Workload"
_PLAN_DEFAULTS: dict[str, Any] = {
    "engine": "vllm", "engine_version": None, "gpu": None, "gpu_memory": None, "num_gpus": None,
    "tensor_parallel_size": 1, "pipeline_parallel_size": 1, "max_model_len": None, "max_num_seqs": None,
    "batch": None, "kv_cache_dtype": "auto", "dtype": None, "quantization": None, "weights_memory": None,
    "gpu_memory_utilization": None, "block_size": None, "max_num_batched_tokens": None,
    "enforce_eager": False, "kv_cache_memory": None, "prompt_len": None, "output_len": None,
    "shared_prefix": 0, "tight_threshold": 0.10, "calibration": None, "engine_option": None,
}  # fmt: skip


GpuOpt = Annotated[
    str | None,
    opt(
        "--gpu", help="GPU from the catalog (`kvcalc gpus`), e.g. H100-80GB.", panel=HARDWARE_PANEL
    ),
]
GpuMemoryOpt = Annotated[
    str | None,
    opt(
        "--gpu-memory",
        help="Memory per GPU instead of --gpu: 80GB, 79.2GiB; a bare number means GiB.",
        panel=HARDWARE_PANEL,
    ),
]
TpOpt = Annotated[
    int,
    opt(
        "--tensor-parallel-size",
        "-tp",
        min=1,
        help="Tensor-parallel ranks.",
        panel=HARDWARE_PANEL,
        show_default=True,
    ),
]
EngineVersionOpt = Annotated[
    str | None,
    opt(
        "--engine-version",
        help="Engine version whose defaults apply; default newest.",
        panel=SERVING_PANEL,
    ),
]
UtilOpt = Annotated[
    float | None,
    opt(
        "--gpu-memory-utilization",
        help="Fraction of GPU memory the engine may use (default: the engine's).",
        panel=SERVING_PANEL,
    ),
]
MaxSeqsOpt = Annotated[
    int | None,
    opt(
        "--max-num-seqs",
        min=1,
        help="The engine's cap on running requests (default: the engine's).",
        panel=SERVING_PANEL,
    ),
]
QuantOpt = Annotated[
    str | None,
    opt(
        "--quantization",
        "-q",
        help="Weight quantization: fp8, awq, gptq, mxfp4, bitsandbytes, none (default: the checkpoint's).",
        panel=SERVING_PANEL,
    ),
]
WeightsMemoryOpt = Annotated[
    str | None,
    opt(
        "--weights-memory",
        help="Weight bytes per GPU you already know; a bare number means GiB.",
        panel=SERVING_PANEL,
    ),
]


def _inputs(model: str | None, **given: Any):
    from kvcalc.cli.plan_args import build_inputs

    return build_inputs({**_PLAN_DEFAULTS, "model": model, **given}).inputs


@app.command()
def curve(
    model: Annotated[
        str, typer.Argument(help="Bundled model, config path or Hub id.", show_default=False)
    ],
    *,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    tensor_parallel_size: TpOpt = 1,
    engine: Annotated[
        list[str] | None,
        opt(
            "--engine",
            help="Engine, repeatable: vllm, sglang, llamacpp, hf, trtllm, lmdeploy (default vllm).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    engine_version: EngineVersionOpt = None,
    kv_cache_dtype: Annotated[
        list[str] | None,
        opt(
            "--kv-cache-dtype",
            help="Cache dtype, repeatable: auto, bf16, fp8, int8, nvfp4, q8_0... (default auto).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    lengths: Annotated[
        str | None,
        opt(
            "--lengths",
            help="Context lengths, comma-separated, as vLLM spells them (K = 1,024, k = 1,000): 4K,8K,32K (default: doubling from 1K to the model's max).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    gpu_memory_utilization: UtilOpt = None,
    max_num_seqs: MaxSeqsOpt = None,
    quantization: QuantOpt = None,
    weights_memory: WeightsMemoryOpt = None,
    plot: Annotated[
        str | None,
        opt(
            "--plot",
            help="Also write the chart to FILE.png or FILE.svg (needs the `plot` extra: matplotlib).",
            panel=OUTPUT_PANEL,
        ),
    ] = None,
    revision: RevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    token: TokenOpt = None,
    offline: OfflineOpt = False,
    json_: JsonOpt = False,
) -> int:
    """Maximum concurrency and token capacity as a function of context length, per KV dtype and engine.

    Examples:

    \b
      kvcalc curve llama-3.1-8b --gpu H100 --kv-cache-dtype fp8
      kvcalc curve qwen3-8b --gpu L40S --lengths 4K,8K,32K
    """
    from kvcalc.planning.api import capacity_curve_reference
    from kvcalc.planning.curves import parse_lengths

    inputs = _inputs(model, gpu=gpu, gpu_memory=gpu_memory, tensor_parallel_size=tensor_parallel_size,
                     engine=(engine or ["vllm"])[0], engine_version=engine_version,
                     gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
                     quantization=quantization, weights_memory=weights_memory)  # fmt: skip
    from kvcalc.cli.options import with_gguf_file

    result = capacity_curve_reference(
        with_gguf_file(model, gguf_file), inputs, revision=revision, token=token, offline=offline or None,
        lengths=parse_lengths(lengths) if lengths else None,
        kv_cache_dtypes=tuple(kv_cache_dtype or ()), engines=tuple(engine or ()),
    )  # fmt: skip
    from kvcalc.render import curve_view

    if plot:
        curve_view.write_plot(result, plot)
    if json_:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        curve_view.render(result)
    if plot:
        from kvcalc.render import console

        console.err(f"wrote {plot}")
    return 0


@app.command()
def compare(
    models: Annotated[
        list[str],
        typer.Argument(help="Models to compare (bundled, paths or Hub ids).", show_default=False),
    ],
    *,
    max_model_len: Annotated[
        int,
        tokens_opt(
            "--max-model-len",
            help=f"Tokens per request for every model; {TOKENS_HELP}.",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = 32768,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    tensor_parallel_size: TpOpt = 1,
    engine: Annotated[
        str,
        opt(
            "--engine",
            help="vllm, sglang, llamacpp, hf, trtllm or lmdeploy.",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = "vllm",
    engine_version: EngineVersionOpt = None,
    kv_cache_dtype: Annotated[
        str,
        opt(
            "--kv-cache-dtype",
            help="Cache dtype: auto, bf16, fp8, int8...",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = "auto",
    gpu_memory_utilization: UtilOpt = None,
    attention_variants: Annotated[
        bool,
        opt(
            "--attention-variants",
            help="Compare one model's dimensions as MHA, its own GQA, MQA and MLA (latent 512 + rope 64).",
            panel=SERVING_PANEL,
        ),
    ] = False,
    revision: RevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    token: TokenOpt = None,
    offline: OfflineOpt = False,
    json_: JsonOpt = False,
) -> int:
    """Models side by side: KV bytes per token and per request, weights, and how many requests fit.

    Without --gpu, the layouts' bytes and the estimated weights only.

    Examples:

    \b
      kvcalc compare qwen2.5-7b llama-3.1-8b mistral-7b-v0.1 --max-model-len 32K
      kvcalc compare qwen3-8b llama-3.1-8b --gpu H100 --kv-cache-dtype fp8
    """
    from kvcalc.errors import InputError
    from kvcalc.planning.api import compare_references

    if attention_variants and len(models) != 1:
        raise InputError("--attention-variants takes exactly one model", code="invalid-input")
    inputs = None
    if gpu or gpu_memory:
        inputs = _inputs(models[0], gpu=gpu, gpu_memory=gpu_memory, tensor_parallel_size=tensor_parallel_size,
                         engine=engine, engine_version=engine_version, kv_cache_dtype=kv_cache_dtype,
                         gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len)  # fmt: skip
    from kvcalc.cli.options import with_gguf_file

    if gguf_file and len(models) != 1:
        raise InputError("--gguf-file takes exactly one model (or write each as MODEL:FILE.gguf)",
                         code="invalid-input")  # fmt: skip
    models = [with_gguf_file(m, gguf_file) for m in models]
    result = compare_references(
        models, inputs, max_model_len=max_model_len, attention_variants_of=attention_variants,
        revision=revision, token=token, offline=offline or None,
        kv_cache_dtype=kv_cache_dtype, engine=engine, tensor_parallel_size=tensor_parallel_size,
    )  # fmt: skip
    if json_:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import compare_view

        compare_view.render(result)
    return 0


@app.command()
def throughput(
    model: Annotated[
        str, typer.Argument(help="Bundled model, config path or Hub id.", show_default=False)
    ],
    *,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    bandwidth: Annotated[
        str | None,
        opt(
            "--bandwidth",
            help="Memory bandwidth per GPU, e.g. 448GB/s (overrides the catalog's; needed with --gpu-memory).",
            panel=HARDWARE_PANEL,
        ),
    ] = None,
    tflops: Annotated[
        float | None,
        opt(
            "--tflops",
            min=0.001,
            help="Dense 16-bit tensor TFLOP/s per GPU (overrides the catalog's; without it only the memory roof applies).",
            panel=HARDWARE_PANEL,
        ),
    ] = None,
    tensor_parallel_size: TpOpt = 1,
    engine: Annotated[
        str,
        opt(
            "--engine",
            help="vllm, sglang, llamacpp, hf, trtllm or lmdeploy.",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = "vllm",
    engine_version: EngineVersionOpt = None,
    max_model_len: MaxModelLenOpt = None,
    kv_cache_dtype: Annotated[
        str,
        opt(
            "--kv-cache-dtype",
            help="Cache dtype: auto, bf16, fp8, int8...",
            panel=SERVING_PANEL,
            show_default=True,
        ),
    ] = "auto",
    gpu_memory_utilization: UtilOpt = None,
    max_num_seqs: MaxSeqsOpt = None,
    quantization: QuantOpt = None,
    weights_memory: WeightsMemoryOpt = None,
    batch: Annotated[
        list[int] | None,
        opt(
            "--batch",
            min=1,
            help="Batch sizes, repeatable (default: 1, 2, 4... up to the KV-limited maximum).",
            panel=WORKLOAD_PANEL,
        ),
    ] = None,
    prompt_len: Annotated[
        int | None,
        tokens_opt(
            "--prompt-len",
            help="Prompt tokens per request (context = prompt + output/2; also the prefill estimate).",
            panel=WORKLOAD_PANEL,
        ),
    ] = None,
    output_len: Annotated[
        int | None,
        tokens_opt(
            "--output-len", minimum=0, help="Output tokens per request.", panel=WORKLOAD_PANEL
        ),
    ] = None,
    efficiency: Annotated[
        float | None,
        opt(
            "--efficiency",
            min=0.01,
            max=1.5,
            help="Measured fraction of the ceiling to apply (default 1.0, or a --calibration record's).",
            panel=SERVING_PANEL,
        ),
    ] = None,
    calibration: Annotated[
        str | None,
        opt(
            "--calibration",
            help="A `kvcalc verify --record` file with a measured decode efficiency.",
            panel=SERVING_PANEL,
        ),
    ] = None,
    revision: RevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    token: TokenOpt = None,
    offline: OfflineOpt = False,
    json_: JsonOpt = False,
) -> int:
    """Decode-throughput ceiling (an upper bound) from the memory-bandwidth roofline, per batch size.

    Exit status: 0 computed; 1 the deployment does not fit (nothing to run); 2 bad input.

    Examples:

    \b
      kvcalc throughput llama-3.1-8b --gpu H100 --prompt-len 2k --output-len 500
      kvcalc throughput qwen3-1.7b --gpu-memory 8GiB --bandwidth 272GB/s
    """
    from kvcalc.planning.api import throughput_reference

    inputs = _inputs(model, gpu=gpu, gpu_memory=gpu_memory, tensor_parallel_size=tensor_parallel_size,
                     engine=engine, engine_version=engine_version, max_model_len=max_model_len,
                     kv_cache_dtype=kv_cache_dtype, gpu_memory_utilization=gpu_memory_utilization,
                     max_num_seqs=max_num_seqs, quantization=quantization, weights_memory=weights_memory,
                     prompt_len=prompt_len, output_len=output_len, calibration=calibration)  # fmt: skip
    from kvcalc.cli.options import with_gguf_file

    result = throughput_reference(
        with_gguf_file(model, gguf_file), inputs, bandwidth=bandwidth, tflops=tflops, batches=tuple(batch or ()), efficiency=efficiency,
        revision=revision, token=token, offline=offline or None,
    )  # fmt: skip
    if json_:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import curve_view

        curve_view.render_throughput(result)
    return 0 if result.points else 1
