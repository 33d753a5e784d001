"""Read a vLLM serving command (``vllm serve MODEL --max-model-len 32k -tp 2 ...``) as plan inputs.

Pure: no I/O. :func:`parse_serve_command` splits the text with :mod:`shlex` (POSIX rules;
``\\``-newline continuations and YAML-folded lines both work) and reads the flags that change
KV-cache sizing, spelled as vLLM spells them:

- ``--max-model-len`` (``32k`` = 32,000, ``32K`` = 32,768, ``1M`` = 1,048,576, as vLLM's
  ``human_readable_int``; ``auto`` or ``-1``, "fit to memory", leave it unset with a note),
- ``--tensor-parallel-size``/``-tp``, ``--pipeline-parallel-size``/``-pp``, ``--kv-cache-dtype``,
  ``--gpu-memory-utilization``, ``--max-num-seqs``, ``--max-num-batched-tokens`` (``8k`` too),
  ``--block-size``, ``--dtype``, ``--quantization``/``-q``, ``--enforce-eager`` (and
  ``--no-enforce-eager``), ``--kv-cache-memory-bytes`` (``20G`` too), ``--model``, ``--revision``,
  ``--cudagraph-capture-sizes 1 2 4``, ``--max-cudagraph-capture-size``, the CUDA-graph keys of
  ``-cc``/``--compilation-config`` and ``-O`` levels (:mod:`kvcalc.planning.servecmd_compile`);
- ``--flag=value`` as well as ``--flag value``, and ``_`` for ``-`` in names (``--max_model_len``),
  as vLLM's ``FlexibleArgumentParser`` accepts.

Programs understood: ``vllm serve MODEL``, ``python -m vllm.entrypoints.openai.api_server --model
MODEL``, ``docker run ... vllm/vllm-openai[:tag] ...``, or the flags alone. Leading ``VAR=value``
assignments, ``env``, ``exec`` and ``nohup`` are skipped. Other flags are ignored with a note that
names the flag but never its value (values may be tokens). The same setting given twice with
different values is an error (``conflicting-flags``).

>>> cmd = parse_serve_command("vllm serve meta-llama/Llama-3.1-8B --max-model-len 32k -tp 2")
>>> cmd.model, cmd.values
('meta-llama/Llama-3.1-8B', {'max_model_len': 32000, 'tensor_parallel_size': 2})
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvcalc.errors import InputError
from kvcalc.planning.servecmd_compile import (
    compilation_values,
    is_compilation_flag,
    is_level_flag,
    level_mode,
)
from kvcalc.planning.settings import SETTINGS, Kind, Setting
from kvcalc.units import parse_token_count

__all__ = ["FLAGS", "ServeCommand", "parse_human_int", "parse_serve_command"]

CODE = "invalid-serve-command"


def parse_human_int(text: str, *, what: str = "value") -> int:
    """vLLM's ``human_readable_int`` (:func:`kvcalc.units.parse_token_count`), with this module's
    error code.

    >>> parse_human_int("32k"), parse_human_int("32K"), parse_human_int("1M")
    (32000, 32768, 1048576)
    """
    try:
        return parse_token_count(text, what=what)
    except InputError as exc:
        raise InputError(exc.message, hint=exc.hint, code=CODE) from None


def _converter(s: Setting) -> Callable[[str, str], Any]:
    """The setting's own parser, as vLLM reads the value, with this module's error code."""

    def convert(text: str, what: str) -> Any:
        try:
            return s.parse_serve(text)
        except InputError as exc:
            message = exc.message.replace(s.serve[0], what, 1)
            raise InputError(message, hint=exc.hint, code=CODE) from None

    return convert


def _flag_map() -> dict[str, tuple[Callable[[str, str], Any] | None, tuple[str, ...]]]:
    """Every setting of the table that ``vllm serve`` has, keyed by its PlanInputs field."""
    out: dict[str, tuple[Callable[[str, str], Any] | None, tuple[str, ...]]] = {}
    for s in SETTINGS:
        if s.serve:
            out[s.field or s.name] = (None if s.kind is Kind.BOOL else _converter(s), s.serve)
    return out


#: field → (converter or None for an on/off switch, spellings), from the settings table.
#: ``model`` and ``revision`` are not PlanInputs fields; every other key is.
FLAGS = _flag_map()
_BY_FLAG = {name: fld for fld, (_, names) in FLAGS.items() for name in names}

#: flags with no effect on memory: ignored without a note
_SILENT = frozenset((
    "--host", "--port", "--served-model-name", "--api-key", "--tokenizer", "--tokenizer-mode",
    "--tokenizer-revision", "--chat-template", "--uvicorn-log-level", "--download-dir",
    "--load-format", "--seed", "--response-role", "--ssl-keyfile", "--ssl-certfile",
    "--ssl-ca-certs", "--root-path", "--tool-call-parser", "--reasoning-parser", "--hf-token",
    "--allowed-origins", "--allowed-methods", "--allowed-headers", "--max-log-len",
    "--code-revision", "--config-format", "--api-server-count", "--trust-remote-code",
    "--disable-log-requests", "--disable-log-stats", "--enable-log-requests",
    "--disable-uvicorn-access-log", "--enable-auto-tool-choice", "--disable-fastapi-docs",
    "--enable-request-id-headers", "--generation-config", "--chat-template-content-format",
    "--log-level",
))  # fmt: skip
#: switches that never take a value (besides ``--no-*``, ``--enable-*``, ``--disable-*``)
_SWITCHES = frozenset((
    "--trust-remote-code", "--headless", "--async-scheduling", "--skip-tokenizer-init",
    "--calculate-kv-scales", "--enforce-eager",
))  # fmt: skip
_STOP = frozenset({"&&", "||", ";", "|", "&"})
_SIZES = re.compile(r"\d+(,\d+)*,?")
_WRAPPERS = frozenset({"env", "exec", "nohup", "time"})
_API_MODULES = frozenset({"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"})
_ENV_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?(\.exe)?")


@dataclass(frozen=True)
class ServeCommand:
    """What a serving command says about KV-cache sizing.

    ``values`` is keyed by :class:`~kvcalc.planning.inputs.PlanInputs` field names
    (``kv_cache_memory_bytes`` in bytes), holding only the flags the command gave.
    ``flags`` says how each was spelled (``{"tensor_parallel_size": "-tp"}``), for messages.
    """

    model: str | None
    values: dict[str, Any]
    notes: tuple[str, ...] = ()
    revision: str | None = None
    flags: dict[str, str] = field(default_factory=dict)

    def describe(self, name: str) -> str:
        """``--max-model-len 32000`` for a field the command set (for conflict messages)."""
        flag = self.flags.get(name, FLAGS[name][1][0])
        value = self.values.get(name, self.model if name == "model" else None)
        return flag if isinstance(value, bool) else f"{flag} {value}"


def _tokens(text: str) -> list[str]:
    text = re.sub(r"\\\r?\n", " ", str(text))
    try:
        return shlex.split(text)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise InputError(
            f"cannot split the command: {str(exc).lower()}", hint="check its quotes", code=CODE
        ) from None


def _skip_prefix(tokens: list[str]) -> int:
    """Index of the program: past ``VAR=value`` assignments and ``env``/``exec``/``nohup``."""
    i = 0
    while i < len(tokens) and (_ENV_ASSIGN.match(tokens[i]) or tokens[i] in _WRAPPERS):
        i += 1
    return i


def _program(tokens: list[str]) -> tuple[int, bool]:
    """Where the flags start, and whether a positional model may come first."""
    i = _skip_prefix(tokens)
    if i >= len(tokens):
        raise InputError("the command is empty", hint="paste the `vllm serve ...` line", code=CODE)
    head = os.path.basename(tokens[i])
    if tokens[i].startswith("-"):
        return i, False
    if head == "vllm":
        if i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return i + 2, True
        raise InputError(
            "only `vllm serve` starts a server", hint="write `vllm serve MODEL ...`", code=CODE
        )
    if _PYTHON.fullmatch(head):
        for j in range(i + 1, len(tokens) - 1):
            if tokens[j] == "-m":
                module = tokens[j + 1]
                if module in _API_MODULES:
                    return j + 2, False
                if module == "vllm.entrypoints.cli.main" and tokens[j + 2 : j + 3] == ["serve"]:
                    return j + 3, True
                break
        raise InputError(
            "a python command must run `-m vllm.entrypoints.openai.api_server`", code=CODE
        )
    if head in ("docker", "podman"):
        for j in range(i + 1, len(tokens)):
            if tokens[j].split(":")[0].split("@")[0].endswith("vllm/vllm-openai"):
                return j + 1, True
        raise InputError(f"no vllm/vllm-openai image in this {head} command", code=CODE)
    raise InputError(
        f"not a vLLM serving command: it starts with {tokens[i]!r}",
        hint="expected `vllm serve MODEL ...` or `python -m vllm.entrypoints.openai.api_server "
        "--model MODEL ...`",
        code=CODE,
    )


def _takes_value(flag: str) -> bool:
    return not (flag in _SWITCHES or flag.startswith(("--no-", "--enable-", "--disable-")))


def _is_flag(token: str) -> bool:
    return token.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", token)


class _Reader:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.flags: dict[str, str] = {}
        self.model: str | None = None
        self.model_flag = ""
        self.unknown: list[str] = []
        self.extra: list[str] = []
        self.notes: list[str] = []
        self.ignored_keys: list[str] = []
        self.level: tuple[str, str] | None = None

    def set(self, name: str, value: Any, spelled: str) -> None:
        if name == "model" and self.model is not None or name in self.values:
            old = self.model if name == "model" else self.values[name]
            old_flag = self.model_flag if name == "model" else self.flags[name]
            if old != value:
                raise InputError(
                    f"conflicting flags: {_shown(old_flag, old)} and {_shown(spelled, value)}",
                    hint="give each setting once",
                    code="conflicting-flags",
                )
            return
        if name == "model":
            self.model, self.model_flag = value, spelled
        else:
            self.values[name], self.flags[name] = value, spelled

    def flag(self, tokens: list[str], i: int) -> int:
        """Read the flag at ``tokens[i]``; return the index after it (and its value)."""
        raw, eq, attached = tokens[i].partition("=")
        if is_compilation_flag(raw) or is_level_flag(raw):
            return self.compilation(tokens, i, raw, attached if eq else None)
        name = "--" + raw[2:].replace("_", "-") if raw.startswith("--") else raw
        negated = name.startswith("--no-") and _BY_FLAG.get("--" + name[5:]) == "enforce_eager"
        fld = "enforce_eager" if negated else _BY_FLAG.get(name)
        if fld is None:
            return self.skip(tokens, i, name, bool(eq))
        convert = FLAGS[fld][0]
        if convert is None:
            if eq:
                raise InputError(f"{raw} takes no value (got {raw}={attached})", code=CODE)
            self.set(fld, not negated, name)
            return i + 1
        if eq:
            value, after = attached, i + 1
        elif i + 1 < len(tokens) and not _is_flag(tokens[i + 1]) and tokens[i + 1] not in _STOP:
            value, after = tokens[i + 1], i + 2
            if fld == "cudagraph_capture_sizes":  # nargs="+": 1 2 4 8
                while after < len(tokens) and _SIZES.fullmatch(tokens[after]):
                    value, after = f"{value},{tokens[after]}", after + 1
        else:
            raise InputError(f"{raw} needs a value", code=CODE)
        converted = convert(value, raw)
        if converted is None and fld == "max_model_len":  # --max-model-len auto
            self.notes.append(
                f"{raw} {value}: vLLM fits the length to memory; kvcalc plans with "
                "the model's default and reports the longest length that fits"
            )
            return after
        self.set(fld, converted, raw)
        return after

    def compilation(self, tokens: list[str], i: int, raw: str, attached: str | None) -> int:
        """``-cc``/``--compilation-config`` (JSON or dotted) and ``-O`` levels."""
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if following is not None and (_is_flag(following) or following in _STOP):
            following = None
        if is_level_flag(raw):
            level_text = attached if attached is not None else None
            mode, used = level_mode(raw if level_text is None else "-O" + level_text, following)
            self.level = (mode, raw)
            return i + 1 if used is None else i + 2
        text = attached if attached is not None else following
        if text is None:
            raise InputError(f"{raw} needs a value", code=CODE)
        values, ignored = compilation_values(raw, text)
        for fld, value in values.items():
            self.set(fld, value, raw)
        self.ignored_keys += ignored
        return i + 1 if attached is not None else i + 2

    def skip(self, tokens: list[str], i: int, name: str, has_eq: bool) -> int:
        if name not in _SILENT:
            self.unknown.append(name)
        if has_eq or not _takes_value(name):
            return i + 1
        if i + 1 < len(tokens) and not _is_flag(tokens[i + 1]) and tokens[i + 1] not in _STOP:
            return i + 2
        return i + 1


def _shown(flag: str, value: Any) -> str:
    return flag if isinstance(value, bool) else f"{flag} {value}"


def parse_serve_command(text: str) -> ServeCommand:
    """Read a vLLM serving command; raise :class:`~kvcalc.errors.InputError` if it is not one.

    >>> parse_serve_command("python -m vllm.entrypoints.openai.api_server --model=qwen3-8b "
    ...                     "--kv-cache-dtype fp8 --enforce-eager").values
    {'kv_cache_dtype': 'fp8', 'enforce_eager': True}
    """
    tokens = _tokens(text)
    i, positional_model = _program(tokens)
    reader = _Reader()
    while i < len(tokens):
        token = tokens[i]
        if token in _STOP:
            reader.notes.append(f"read the command up to {token!r}; the rest is ignored")
            break
        if _is_flag(token):
            i = reader.flag(tokens, i)
            continue
        if positional_model and not reader.extra:
            reader.set("model", token, "the model argument")
            positional_model = False
        else:
            reader.extra.append(token)
        i += 1
    if reader.level is not None and "cudagraph_mode" not in reader.values:
        mode, spelled = reader.level
        reader.set("cudagraph_mode", mode, spelled)
        reader.notes.append(f"{spelled}: cudagraph_mode {mode}, that level's default")
    reader.unknown += reader.ignored_keys
    if reader.unknown:
        names = ", ".join(dict.fromkeys(reader.unknown))
        reader.notes.append(f"ignored flags kvcalc does not model: {names}")
    if reader.extra:
        reader.notes.append(f"ignored {len(reader.extra)} extra argument(s)")
    revision = reader.values.pop("revision", None)
    reader.flags.pop("revision", None)
    return ServeCommand(
        model=reader.model,
        values=reader.values,
        notes=tuple(reader.notes),
        revision=revision,
        flags=reader.flags,
    )
