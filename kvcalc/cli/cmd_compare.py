"""``kvcalc compare``: models side by side."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import DEPLOYMENT, MODEL_SOURCE, command, opt, use
from kvcalc.planning.settings import BY_NAME, SERVING_PANEL

#: what compare uses without a GPU: the layouts' bytes at this length, dtype, engine and TP
_WITHOUT_GPU = frozenset(
    {"engine", "kv_cache_dtype", "tensor_parallel_size", "max_model_len", *MODEL_SOURCE, "json"}
)
#: what names the memory to plan on; without one of them the other settings have nothing to act on
_MEMORY = ("gpu", "gpu_memory", "kv_cache_memory")


@command(
    app,
    *(use(n, default=32768) if n == "max_model_len"
      else use(n, multi=True, note="One row per model and engine.") if n == "engine" else n
      for n in DEPLOYMENT if n != "trust_layout"),
    *MODEL_SOURCE, "json",
    examples=(
        "kvcalc compare qwen2.5-7b llama-3.1-8b mistral-7b-v0.1 --max-model-len 32K",
        "kvcalc compare qwen3-8b llama-3.1-8b --gpu H100 --kv-cache-dtype fp8",
    ),
)  # fmt: skip
def compare(
    models: Annotated[
        list[str],
        typer.Argument(help="Models to compare (bundled, paths or Hub ids).", show_default=False),
    ],
    *,
    attention_variants: Annotated[
        bool,
        opt(
            "--attention-variants",
            help="Compare one model's dimensions as MHA, its own GQA, MQA and MLA (latent 512 + rope 64).",
            panel=SERVING_PANEL,
        ),
    ] = False,
    given: dict[str, Any],
) -> int:
    """Models side by side: KV bytes per token and per request, weights, and how many requests fit.

    Without --gpu (or --gpu-memory, --kv-cache-memory), the layouts' bytes and the estimated
    weights only. Figures are per engine instance (one data-parallel replica).
    """
    from kvcalc.cli.options import source_kwargs, with_gguf_file
    from kvcalc.cli.plan_args import plan_inputs
    from kvcalc.errors import InputError
    from kvcalc.planning.api import compare_references

    if attention_variants and len(models) != 1:
        raise InputError("--attention-variants takes exactly one model", code="invalid-input")
    inputs = None
    engines = given["engine"] or ("vllm",)
    if any(given[name] is not None for name in _MEMORY):
        inputs = plan_inputs(given, models[0], engine=engines[0])
    else:
        _refuse_without_memory(given)
    if given["gguf_file"] and len(models) != 1:
        raise InputError("--gguf-file takes exactly one model (or write each as MODEL:FILE.gguf)",
                         code="invalid-input")  # fmt: skip
    models = [with_gguf_file(m, given["gguf_file"]) for m in models]
    result = compare_references(
        models, inputs, max_model_len=given["max_model_len"],
        attention_variants_of=attention_variants, **source_kwargs(given),
        kv_cache_dtype=given["kv_cache_dtype"], engine=engines[0], engines=engines,
        tensor_parallel_size=given["tensor_parallel_size"],
    )  # fmt: skip
    if given["json"]:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import compare_view

        compare_view.render(result)
    return 0


def _refuse_without_memory(given: dict[str, Any]) -> None:
    """A setting that only acts on a planned deployment, given without a GPU: refused, not ignored."""
    from kvcalc.errors import InputError

    for name, value in given.items():
        if name in _WITHOUT_GPU or value in (None, False, (), BY_NAME[name].default):
            continue
        flag = BY_NAME[name].cli_flags[0]
        raise InputError(
            f"{flag} needs a GPU: without one compare shows the layouts' bytes and the "
            "checkpoint's estimated weights only",
            hint="add --gpu NAME (see `kvcalc gpus`), --gpu-memory or --kv-cache-memory",
            code="missing-gpu",
        )
