"""Options shared by several commands, defined once (typer ``Annotated`` aliases)."""

from __future__ import annotations

from typing import Annotated

import typer

MODEL_PANEL = "Model"
SERVING_PANEL = "Serving"
HARDWARE_PANEL = "Hardware"
OUTPUT_PANEL = "Output"

ModelArg = Annotated[
    str,
    typer.Argument(
        help="A bundled model (alias or HF id, see `kvcalc models`), a path to config.json or its "
        "folder, or a Hub id `org/name[@revision]`.",
        show_default=False,
    ),
]
RevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--revision", help="Hub revision (branch, tag or commit).", rich_help_panel=MODEL_PANEL
    ),
]
GgufFileOpt = Annotated[
    str | None,
    typer.Option(
        "--gguf-file",
        help="The GGUF file of a Hub repo to read (same as MODEL:FILE.gguf; MODEL:Q4_K_M picks by quant tag).",
        rich_help_panel=MODEL_PANEL,
    ),
]


def with_gguf_file(model: str, gguf_file: str | None) -> str:
    """``org/name`` + ``--gguf-file F`` → ``org/name:F``, the reference form the resolver reads."""
    if not gguf_file:
        return model
    from kvcalc.errors import InputError

    if ":" in model or not gguf_file.lower().endswith(".gguf"):
        raise InputError(f"--gguf-file {gguf_file!r} with {model!r}: give a Hub id without a tag "
                         "and a file name ending in .gguf", code="conflicting-options")  # fmt: skip
    return f"{model}:{gguf_file}"


TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="Hugging Face token (default: HF_TOKEN or the stored login). Never printed.",
        rich_help_panel=MODEL_PANEL,
        show_default=False,
    ),
]
OfflineOpt = Annotated[
    bool,
    typer.Option(
        "--offline",
        help="Never touch the network (also HF_HUB_OFFLINE=1): bundled models, paths and the Hub cache only.",
        rich_help_panel=MODEL_PANEL,
    ),
]
KvCacheDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-cache-dtype",
        help="Cache dtype, as the engine names it: auto (the model's); vLLM fp8, fp8_e5m2, "
        "fp8_per_token_head, int8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla (MLA); SGLang "
        "fp8_e4m3, fp8_e5m2; llama.cpp f16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; transformers fp32, "
        "bf16, quanto_int4, quanto_int2, hqq_int1..8, fp8; TensorRT-LLM fp8, nvfp4, int8; LMDeploy "
        "int8, int4. int4/int8 alone: the engine's own 4-/8-bit format where it has one.",
        rich_help_panel=SERVING_PANEL,
    ),
]
TOKENS_HELP = "32k = 32,000, 32K = 32,768, as vLLM reads them"


def token_count(name: str, minimum: int = 1):
    """A typer ``parser`` reading a token count as vLLM spells it (``32k``, ``32K``, ``1M``)."""

    def parse(value: str | int) -> int:
        from kvcalc.units import parse_token_count

        return parse_token_count(value, what=name, minimum=minimum)

    return parse


def tokens_opt(name: str, *, help: str, panel: str, minimum: int = 1, **kw):
    """An option taking a token count in vLLM's spelling."""
    return typer.Option(
        name,
        help=help,
        rich_help_panel=panel,
        parser=token_count(name, minimum),
        metavar="TOKENS",
        show_default=kw.pop("show_default", False),
        **kw,
    )


MaxModelLenOpt = Annotated[
    int | None,
    tokens_opt(
        "--max-model-len",
        help=f"Tokens per request (default: the model's, as vLLM derives it); {TOKENS_HELP}.",
        panel=SERVING_PANEL,
    ),
]
TrustLayoutOpt = Annotated[
    bool,
    typer.Option(
        "--trust-layout",
        help="Plan a config whose architecture kvcalc has not verified anyway, as plain attention "
        "(marked layout_validated: false).",
        rich_help_panel=MODEL_PANEL,
    ),
]
AllowLongOpt = Annotated[
    bool,
    typer.Option(
        "--allow-long-max-model-len",
        help="Model VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a --max-model-len above the model's derived "
        "maximum starts.",
        rich_help_panel=SERVING_PANEL,
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON.", rich_help_panel=OUTPUT_PANEL)
]


def opt(*names: str, help: str, panel: str, **kw):
    """A ``typer.Option`` in a help panel, without a shown default unless asked for."""
    return typer.Option(
        *names, help=help, rich_help_panel=panel, show_default=kw.pop("show_default", False), **kw
    )
