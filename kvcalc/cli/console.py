"""stdout/stderr consoles for the CLI, with secrets scrubbed from everything written."""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from kvcalc.errors import KvcalcError

_SECRETS: set[str] = set()
_MASK = "***"
#: environment variables whose values are never printed
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def add_secret(value: str | None) -> None:
    if value and len(value) >= 4:
        _SECRETS.add(value)


def register_secrets_from(args: list[str]) -> None:
    """Remember ``--token`` values and token environment variables, to scrub them from output."""
    for name in SECRET_ENV:
        add_secret(os.environ.get(name))
    for i, arg in enumerate(args):
        if arg == "--token" and i + 1 < len(args):
            add_secret(args[i + 1])
        elif arg.startswith("--token="):
            add_secret(arg.split("=", 1)[1])


def scrub(text: str) -> str:
    for secret in _SECRETS:
        text = text.replace(secret, _MASK)
    return text


class ScrubbedStream:
    """A text stream wrapper that removes secrets before writing."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(scrub(text))

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return getattr(self._stream, "isatty", lambda: False)()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def stdout_console(**kwargs: Any):
    """A rich console on (scrubbed) stdout. Created per call so tests capture it."""
    from rich.console import Console

    return Console(file=ScrubbedStream(sys.stdout), **kwargs)


def stderr_console():
    from rich.console import Console

    return Console(file=ScrubbedStream(sys.stderr), highlight=False, soft_wrap=True)


def out(text: str) -> None:
    """Plain text to stdout (JSON, machine-readable output)."""
    sys.stdout.write(scrub(text))
    if not text.endswith("\n"):
        sys.stdout.write("\n")


def err(text: str) -> None:
    sys.stderr.write(scrub(text) + "\n")


def print_error(exc: KvcalcError) -> None:
    """``error[code]: message`` and ``hint: ...`` on stderr, plain text, secrets scrubbed."""
    err(f"error[{exc.code}]: {exc.message}")
    if exc.hint:
        err(f"hint: {exc.hint}")


def print_traceback() -> None:
    import traceback

    err("".join(traceback.format_exc()).rstrip())
