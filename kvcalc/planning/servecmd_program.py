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

from kvcalc.errors import InputError

__all__ = ["STOP", "flags_start", "is_flag", "split_command"]

CODE = "invalid-serve-command"
STOP = frozenset({"&&", "||", ";", "|", "&"})
_WRAPPERS = frozenset({"env", "exec", "nohup", "time"})
_API_MODULES = frozenset({"vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"})
_ENV_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
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


def flags_start(tokens: list[str]) -> tuple[int, bool]:
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


def is_flag(token: str) -> bool:
    return token.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", token)
