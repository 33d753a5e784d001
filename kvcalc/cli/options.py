"""The commands' options, generated from the one table of settings (:mod:`kvcalc.planning.settings`).

A command names the settings it can use; :func:`command` adds one typer option per setting (same
flags, parser, help and default in every command), orders the help by panel, puts the two worked
examples at the end of ``--help``, and hands the command a ``given`` dict (setting name → value).
A setting a command cannot use is not offered, or — where people reach for it (``verify --gpu``) —
refused with kvcalc's own message (:func:`refuse`). Options only one command has stay in that
command's module, written with :func:`opt`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, get_type_hints

import typer

from kvcalc.cli.coercion import Command
from kvcalc.planning.settings import BY_NAME, PANELS, SETTINGS, Kind, Setting

_TABLE: Any = object()  # "the table's default"


@dataclass(frozen=True)
class Use:
    """How a command uses a setting: as the table says, repeatable, or with its own default."""

    name: str
    multi: bool = False
    default: Any = _TABLE
    #: appended to the table's help: what the setting does in this command
    note: str = ""
    #: not offered: giving it is an error with this message and hint
    refused: tuple[str, str] | None = None


def use(name: str, *, multi: bool = False, default: Any = _TABLE, note: str = "") -> Use:
    return Use(name, multi=multi, default=default, note=note)


def refuse(name: str, message: str, hint: str) -> Use:
    """A setting this command cannot use, named anyway: an ``error[usage]`` with our own hint."""
    return Use(name, refused=(message, hint))


#: the settings that say which model to read, for every command that reads one
MODEL_SOURCE = ("revision", "gguf_file", "token", "offline")
#: the MODEL argument of the commands that plan one model
ModelArgument = Annotated[
    str, typer.Argument(help="Bundled model, config path or Hub id.", show_default=False)
]
#: the same, optional: ``plan`` and ``recommend`` also take the model of ``--from-command``
OptionalModelArgument = Annotated[
    str | None,
    typer.Argument(
        help="Bundled model, config path or Hub id (optional with --from-command).",
        show_default=False,
    ),
]
#: the settings that shape the memory of one deployment (every planning command takes them)
DEPLOYMENT = (
    "gpu", "gpu_memory", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
    "enable_expert_parallel", "enable_eplb", "num_redundant_experts",
    "decode_context_parallel_size", "cp_kv_cache_interleave_size",
    "prefill_context_parallel_size", "all2all_backend", "enable_dp_attention", "engine",
    "engine_version", "max_model_len", "max_num_seqs", "kv_cache_dtype", "dtype", "quantization",
    "weights_memory", "gpu_memory_utilization", "block_size", "max_num_batched_tokens",
    "enforce_eager", "disable_sliding_window", "enable_prefix_caching", "async_scheduling",
    "cudagraph_capture_sizes", "max_cudagraph_capture_size", "cudagraph_mode",
    "kv_cache_memory", "engine_option", "trust_layout", "allow_long_max_model_len",
    "speculative_config", "spec_method", "spec_model", "spec_tokens",
    "enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras", "fully_sharded_loras",
    "lora_dtype", "lora_target_modules", "kv_offloading_size", "kv_offloading_backend",
    "kv_transfer_config",
    "cpu_offload_gb", "limit_mm_per_prompt", "mm_encoder_tp_mode", "mm_ipc_gpu_memory_gb",
    "mamba_cache_dtype", "mamba_ssm_cache_dtype",
)  # fmt: skip


def _metavar(s: Setting) -> str | None:
    if s.metavar:
        return s.metavar
    return {Kind.COUNT: "N", Kind.TOKENS: "TOKENS", Kind.FRACTION: "FRACTION", Kind.SIZE: "SIZE",
            Kind.GPU: "GPU", Kind.ENGINE: "ENGINE", Kind.CACHE_DTYPE: "DTYPE",
            Kind.WEIGHT_DTYPE: "DTYPE"}.get(s.kind, "TEXT")  # fmt: skip


def help_text(s: Setting, u: Use) -> str:
    """The help a command shows for a setting: the table's, plus the command's note."""
    default = s.default if u.default is _TABLE else u.default
    shown = default not in (None, False)
    text = s.help_for("cli", default_shown=shown)
    if u.multi or s.kind is Kind.OPTIONS:
        text = text.rstrip(".") + "; repeatable."
    return text + (f" {u.note}" if u.note else "")


def typer_parameter(s: Setting, u: Use) -> tuple[Any, Any]:
    """``(annotation, typer.Option)`` for setting ``s`` as command use ``u`` wants it."""
    default = s.default if u.default is _TABLE else u.default
    multi = u.multi or s.kind is Kind.OPTIONS
    if u.refused:
        return str | None, typer.Option(None, *s.cli_flags, hidden=True)
    common: dict[str, Any] = {"help": help_text(s, u), "rich_help_panel": s.panel}
    if s.kind is Kind.BOOL and default is None:  # on, off or the engine's own (--x/--no-x)
        return bool | None, typer.Option(None, "/".join(s.cli_flags), show_default=False, **common)
    if s.kind is Kind.BOOL:
        return bool, typer.Option(bool(default), *s.cli_flags, show_default=False, **common)
    annotation: Any = list[str] | None if multi else str | None
    return annotation, typer.Option(
        None if multi else default,
        *s.cli_flags,
        parser=s.parse,
        metavar=_metavar(s),
        show_default=default not in (None, False) and not multi,
        **common,
    )


def opt(*names: str, help: str, panel: str, **kw: Any) -> Any:
    """A ``typer.Option`` of one command only, in a help panel, its default not shown unless asked."""
    return typer.Option(
        *names, help=help, rich_help_panel=panel, show_default=kw.pop("show_default", False), **kw
    )


def _panel_rank(panel: str | None) -> int:
    # the table's panels in order, a command's own panels before Output
    if panel in PANELS:
        rank = PANELS.index(panel)
        return rank + 1 if panel == PANELS[-1] else rank
    return len(PANELS) - 1


def _examples_epilog(examples: Sequence[str], epilog: str) -> str:
    lines = "\n".join(f"  {e}" for e in examples)
    return (f"{epilog}\n\n" if epilog else "") + f"Examples:\n\n\b\n{lines}"


def command(
    app: typer.Typer,
    *uses: str | Use,
    examples: Sequence[str],
    epilog: str = "",
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Register a command taking the named settings; it receives them as ``given``."""
    wanted = [u if isinstance(u, Use) else Use(u) for u in uses]

    def decorate(fn: Callable[..., int]) -> Callable[..., int]:
        hints = get_type_hints(fn, include_extras=True)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(fn).parameters.values()
            if p.name != "given"
        ]
        generated = []
        for u in wanted:
            s = BY_NAME[u.name]
            annotation, info = typer_parameter(s, u)
            generated.append(
                inspect.Parameter(
                    s.param, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation
                )  # fmt: skip
            )
        positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        order = {s.param: i for i, s in enumerate(SETTINGS)}
        keyword = sorted(
            [*generated, *(p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY)],
            key=lambda p: (_panel_rank(_panel_of(p)), order.get(p.name, len(order))),
        )
        params = [*positional, *keyword]
        names = {BY_NAME[u.name].param: u for u in wanted}

        @functools.wraps(fn)
        def run(**kwargs: Any) -> int:
            given = {}
            for param, u in names.items():
                value = kwargs.pop(param)
                if u.refused:
                    if value is not None:
                        from kvcalc.errors import InputError

                        raise InputError(u.refused[0], hint=u.refused[1], code="usage")
                    continue
                given[u.name] = tuple(value) if isinstance(value, list) else value
            return fn(**kwargs, given=given)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return app.command(cls=Command, epilog=_examples_epilog(examples, epilog))(run)

    return decorate


def _panel_of(p: inspect.Parameter) -> str | None:
    infos = [p.default] + list(getattr(p.annotation, "__metadata__", ()))
    for info in infos:
        panel = getattr(info, "rich_help_panel", None)
        if panel:
            return str(panel)
    return None


# -- arguments and helpers -----------------------------------------------------------------------
ModelArg = Annotated[
    str,
    typer.Argument(
        help="A bundled model (alias or HF id, see `kvcalc models`), a path to config.json or its "
        "folder, or a Hub id `org/name[@revision]`.",
        show_default=False,
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


def source_kwargs(given: dict[str, Any]) -> dict[str, Any]:
    """``revision``, ``token`` and ``offline`` as the library's reference-resolving functions take them."""
    return {
        "revision": given.get("revision"),
        "token": given.get("token"),
        "offline": given.get("offline") or None,
    }
