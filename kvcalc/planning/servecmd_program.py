"""Where a pasted serving command's flags start: its program, wrappers and shell syntax.

Pure: no I/O. :func:`split_command` splits the text with :mod:`shlex` (POSIX rules;
``\\``-newline continuations and YAML-folded lines both work); :func:`flags_start` skips leading
``VAR=value`` assignments and ``env``/``exec``/``nohup``/``time``, and finds the program: ``vllm
serve MODEL``, ``python -m vllm.entrypoints.openai.api_server``, ``python -m
vllm.entrypoints.cli.main serve``, a ``vllm/vllm-openai`` container, or the flags alone.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from kvcalc.engines.flag_table import EngineFlag
from kvcalc.engines.names import EngineName
from kvcalc.errors import InputError

__all__ = [
    "STOP",
    "Start",
    "flag_values",
    "flags_start",
    "is_flag",
    "skip_unknown",
    "split_command",
]

CODE = "invalid-serve-command"
STOP = frozenset({"&&", "||", ";", "|", "&"})
_WRAPPERS = frozenset({"env", "exec", "nohup", "time"})
_API_MODULES = frozenset({"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"})
_ENV_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SGLANG_MODULE = "sglang.launch_server"
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?(\.exe)?")


def split_command(text: str) -> list[str]:
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


@dataclass(frozen=True)
class Start:
    """Where a command's flags start, whether a positional model may come first, and the
    engine whose parser reads them."""

    index: int
    positional_model: bool
    engine: EngineName = EngineName.VLLM

    @property
    def sglang(self) -> bool:
        return self.engine is EngineName.SGLANG


#: the executables that start a server, by their base name
_PROGRAMS = {"vllm": EngineName.VLLM, "sglang": EngineName.SGLANG}
#: the container images, and whether the flags follow the image (vLLM's entrypoint is
#: ``vllm serve``; SGLang's image runs the command written after it)
_IMAGES = {"vllm/vllm-openai": EngineName.VLLM, "lmsysorg/sglang": EngineName.SGLANG}


def flags_start(tokens: list[str]) -> Start:
    """Where the flags start, and whether a positional model may come first."""
    i = _skip_prefix(tokens)
    if i >= len(tokens):
        raise InputError("the command is empty", hint="paste the `vllm serve ...` line", code=CODE)
    head = os.path.basename(tokens[i])
    if tokens[i].startswith("-"):
        return Start(i, False)
    if head in _PROGRAMS:
        if i + 1 < len(tokens) and tokens[i + 1] == "serve":  # vllm serve, sglang serve
            return Start(i + 2, True, _PROGRAMS[head])
        raise InputError(
            f"only `{head} serve` starts a server",
            hint=f"write `{head} serve MODEL ...`",
            code=CODE,
        )
    if _PYTHON.fullmatch(head):
        for j in range(i + 1, len(tokens) - 1):
            if tokens[j] == "-m":
                module = tokens[j + 1]
                if module in _API_MODULES:
                    return Start(j + 2, False)
                if module == "vllm.entrypoints.cli.main" and tokens[j + 2 : j + 3] == ["serve"]:
                    return Start(j + 3, True)
                if module == _SGLANG_MODULE:  # sglang/launch_server.py: --model-path only
                    return Start(j + 2, False, EngineName.SGLANG)
                break
        raise InputError(
            "a python command must run `-m vllm.entrypoints.openai.api_server` or "
            f"`-m {_SGLANG_MODULE}`",
            code=CODE,
        )
    if head in ("docker", "podman"):
        for j in range(i + 1, len(tokens)):
            image = tokens[j].split(":")[0].split("@")[0]
            engine = next((e for name, e in _IMAGES.items() if image.endswith(name)), None)
            if engine is EngineName.VLLM:
                return Start(j + 1, True)
            if engine is not None:  # lmsysorg/sglang python3 -m sglang.launch_server ...
                inner = flags_start(tokens[j + 1 :])
                return Start(j + 1 + inner.index, inner.positional_model, inner.engine)
        raise InputError(f"no vllm/vllm-openai or lmsysorg/sglang image in this {head} command",
                         code=CODE)  # fmt: skip
    raise InputError(
        f"not a vLLM or SGLang serving command: it starts with {tokens[i]!r}",
        hint="expected `vllm serve MODEL ...`, `python -m vllm.entrypoints.openai.api_server "
        "--model MODEL ...` or `python -m sglang.launch_server --model-path MODEL ...`",
        code=CODE,
    )


def flag_values(
    flag: EngineFlag, tokens: list[str], i: int, raw: str, attached: str | None
) -> tuple[list[str], int]:
    """The values argparse gives ``flag`` at ``tokens[i]`` (by its nargs), and the index after."""
    if not flag.takes_value:
        if attached is not None:
            raise InputError(f"{raw} takes no value (got {raw}={attached})", code=CODE)
        return [], i + 1
    if attached is not None:
        return [attached], i + 1
    j = i + 1
    found: list[str] = []
    while j < len(tokens) and not is_flag(tokens[j]) and tokens[j] not in STOP:
        found.append(tokens[j])
        j += 1
        if flag.nargs in (None, "?") or isinstance(flag.nargs, int) and len(found) == flag.nargs:
            break
    needed = flag.nargs if isinstance(flag.nargs, int) else int(flag.nargs in (None, "+"))
    if len(found) < needed:
        raise InputError(f"{raw} needs a value", code=CODE)
    return found, j


def skip_unknown(tokens: list[str], i: int, has_eq: bool) -> int:
    """Past a flag the recorded parser lacks, and the value that seems to follow it."""
    if has_eq or i + 1 >= len(tokens) or is_flag(tokens[i + 1]) or tokens[i + 1] in STOP:
        return i + 1
    return i + 2


def is_flag(token: str) -> bool:
    return token.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", token)
