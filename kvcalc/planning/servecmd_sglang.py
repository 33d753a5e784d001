"""Read an SGLang serving command (``python -m sglang.launch_server --model-path M --tp 2 ...``).

Pure: no I/O. Every flag is looked up in SGLang 0.5.23's own parser, recorded
(``ServerArgs.add_cli_args``, a plain ``argparse`` parser: ``--flag value``, ``--flag=value``, a
unique prefix such as ``--tp`` for ``--tp-size``; no ``_`` spellings). A flag is modelled when a
setting names it (``Setting.sglang``: ``--context-length`` is ``max_model_len``,
``--max-running-requests`` ``max_num_seqs``, ``--mem-fraction-static`` the memory fraction) or
when its ``dest`` is an engine option the SGLang module reads (``--page-size`` is ``-E
page_size``, ``--max-total-tokens``, ``--swa-full-tokens-ratio``, ``--disable-radix-cache``,
``--max-mamba-cache-size``, ``--mamba-full-memory-ratio``; ``--attn-dp-size N`` is DP attention
over N ranks, as SGLang resolves the deprecated ``--dp-size N --enable-dp-attention`` into it);
what SGLang refuses (a flag it does
not have, a value outside its choices: ``--kv-cache-dtype fp8`` — SGLang's names are
``fp8_e4m3``, ``fp8_e5m2``, ...) is refused as SGLang refuses it; flags with no effect on memory
are named in a note; the others are not modelled (``flag-not-modelled``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvcalc.engines.flag_table import EngineFlag
from kvcalc.engines.sglang.graphs import graph_config_options
from kvcalc.engines.sglang.server_flags import check_startup, parse_human_int
from kvcalc.errors import InputError
from kvcalc.planning.servecmd_flags import (
    ATTENTION_DP_FLAGS,
    FlagClass,
    check_value,
    classify,
    sglang_dialect,
)
from kvcalc.planning.servecmd_program import STOP, flag_values, is_flag
from kvcalc.planning.settings import Kind, Setting

__all__ = ["SglangRead", "read_sglang"]

CODE = "invalid-serve-command"
#: SGLang's JSON form of the per-phase CUDA-graph flags
GRAPH_CONFIG_FLAG = "--cuda-graph-config"


@dataclass
class SglangRead:
    """What the command says: PlanInputs fields, the model, how each was spelled."""

    values: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    model_flag: str = ""
    no_effect: list[str] = field(default_factory=list)
    unmodelled: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _convert(setting: Setting, text: str, spelled: str) -> Any:
    """The value as SGLang reads it: ``human_readable_int`` for token counts (``32k``, ``32Ki``)."""
    try:
        if setting.kind is Kind.TOKENS:
            return parse_human_int(text, what=spelled)
        return setting.parse(text)
    except InputError as exc:
        raise InputError(exc.message, hint=exc.hint, code=CODE) from None


def _option_value(flag: EngineFlag, values: list[str], spelled: str) -> Any:
    """An engine option's value, by the type SGLang's parser gives the flag."""
    if not flag.takes_value:
        return spelled not in flag.negative
    if flag.nargs == "+" and flag.type == "int":  # --cuda-graph-bs-decode 1 2 4 8
        try:
            return tuple(int(v) for v in values)
        except ValueError:
            raise InputError(f"{spelled}: expected integers, got {' '.join(values)[:40]!r}",
                             code=CODE) from None  # fmt: skip
    text = values[0]
    try:
        if flag.type == "human_readable_int":
            return parse_human_int(text, what=spelled)
        if flag.type == "int":
            return int(text)
        if flag.type == "float":
            return float(text)
    except ValueError:
        raise InputError(f"{spelled}: expected a number, got {text[:40]!r}", code=CODE) from None
    return text


def _set(read: SglangRead, name: str, value: Any, spelled: str) -> None:
    store, flags = (read.options, None) if name.startswith("-E ") else (read.values, read.flags)
    key = name.removeprefix("-E ")
    if name == "model":
        if read.model is not None and read.model != value:
            raise InputError(f"conflicting flags: {read.model_flag} {read.model} and {spelled} {value}",
                             hint="give each setting once", code="conflicting-flags")  # fmt: skip
        read.model, read.model_flag = value, spelled
        return
    if key in store and store[key] != value:
        raise InputError(f"conflicting flags: {spelled} {store[key]} and {spelled} {value}",
                         hint="give each setting once", code="conflicting-flags")  # fmt: skip
    store[key] = value
    if flags is not None:
        flags[key] = spelled


def read_sglang(tokens: list[str], i: int, *, positional_model: bool) -> SglangRead:
    """Read the flags from ``tokens[i]`` on."""
    dialect = sglang_dialect()
    table = dialect.table
    read = SglangRead()
    attention_dp: tuple[int, str] | None = None
    no_effect_values: dict[str, list[str]] = {}
    given: dict[str, list[str]] = {}  # every flag's values, for SGLang's start-up checks
    graph_config: tuple[str, str] | None = None
    while i < len(tokens):
        token = tokens[i]
        if token in STOP:
            read.notes.append(f"read the command up to {token!r}; the rest is ignored")
            break
        if not is_flag(token):
            if positional_model and read.model is None and not read.extra:
                _set(read, "model", token, "the model argument")  # sglang serve MODEL
            else:
                read.extra.append(token)
            i += 1
            continue
        raw, eq, attached = token.partition("=")
        flag = table.resolve(raw)
        if flag is None:
            raise InputError(
                f"{table.program}: unrecognized argument {raw} ({table.engine} has no such flag "
                "and refuses to start)",
                hint="check its spelling in `python -m sglang.launch_server --help`",
                code=CODE,
            )
        values, i = flag_values(flag, tokens, i, raw, attached if eq else None)
        if flag.name == GRAPH_CONFIG_FLAG:  # JSON, above the per-phase flags: read after them
            graph_config = (" ".join(values), raw)
            continue
        for text in values:
            check_value(flag, text, raw, dialect)
            _check_type(flag, text, raw)
        given[flag.name] = values
        cls = classify(flag, values[0] if values else None, dialect)
        if cls is FlagClass.NO_EFFECT:
            read.no_effect.append(flag.name)
            no_effect_values[flag.name] = values
            continue
        if cls is FlagClass.NOT_MODELLED:
            read.unmodelled.append(flag.name)
            continue
        if set(flag.options) & set(ATTENTION_DP_FLAGS):
            attention_dp = (_convert_count(values[0], raw), raw)
            continue
        setting = dialect.setting_for(flag)
        if setting is None:  # an engine option: --page-size is -E page_size
            _set(read, "-E " + flag.dest, _option_value(flag, values, raw), raw)
            continue
        value = (
            raw not in flag.negative if not flag.takes_value
            else _convert(setting, " ".join(values), raw)
        )  # fmt: skip
        _set(
            read, "model" if setting.name == "model" else setting.field or setting.name, value, raw
        )
    if attention_dp is not None:
        _attention_dp(read, *attention_dp)
    if graph_config is not None:
        _graph_config(read, *graph_config)
    check_startup(
        no_effect_values, pipeline_size=read.values.get("pipeline_parallel_size", 1), given=given
    )
    return read


def _check_type(flag: EngineFlag, text: str, spelled: str) -> None:
    """argparse's ``type=int``/``type=float`` conversion, which refuses ``--port abc``."""
    convert = {"int": int, "float": float}.get(flag.type or "")
    if convert is None:
        return
    try:
        convert(text)
    except ValueError:
        raise InputError(
            f"{spelled}: invalid {flag.type} value: {text[:40]!r}",
            hint="SGLang's parser refuses it; write a number",
            code=CODE,
        ) from None


def _graph_config(read: SglangRead, text: str, spelled: str) -> None:
    """``--cuda-graph-config '{"decode": {"max_bs": 64}}'``: its per-phase ``backend``, ``max_bs``
    and ``bs`` fill the engine options of the per-phase flags, over them (the JSON has the
    highest precedence); its prefill ``max_context_size`` and ``max_seq_len`` fill those of their
    flags (:func:`graph_config_options`)."""
    try:
        options = graph_config_options(text)
    except InputError as exc:
        raise InputError(f"{spelled}{exc.message}", code=CODE) from None
    read.options.update(options)


def _convert_count(text: str, spelled: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{spelled}: expected an integer, got {text[:40]!r}", code=CODE) from None
    if value < 1:
        # arg_groups/parallel_hook.py: "--attn-dp-size must be positive (got N)."
        raise InputError(f"SGLang refuses it: --attn-dp-size must be positive (got {value})",
                         hint="give a size of 1 or more", code=CODE)  # fmt: skip
    return value


def _attention_dp(read: SglangRead, size: int, spelled: str) -> None:
    """``--attn-dp-size N``: N attention data-parallel ranks inside TP. SGLang 0.5.23 resolves the
    deprecated ``--dp-size N --enable-dp-attention`` into ``attn_dp_size = N, dp_size = 1``
    (``arg_groups/parallel_hook.py`` ``handle_deprecated_dp_attention``), which kvcalc plans as
    ``enable_dp_attention`` with ``data_parallel_size`` N; with ``--attn-dp-size`` given the
    deprecated flag adds nothing, and a ``--dp-size`` above 1 beside it counts replicas of the
    attention-DP group — not modelled."""
    if size == 1:
        return
    replicas = read.values.get("data_parallel_size", 1)
    if replicas > 1:
        raise InputError(
            f"{read.flags['data_parallel_size']} {replicas} with {spelled} {size}: {replicas} "
            f"replicas of a {size}-way attention data-parallel group are not modelled",
            hint=f"plan one replica ({spelled} {size} alone) and multiply by the replicas",
            code="unsupported-parallelism",
        )
    read.values["enable_dp_attention"] = True
    read.values["data_parallel_size"] = size
    read.flags["enable_dp_attention"] = read.flags["data_parallel_size"] = spelled
