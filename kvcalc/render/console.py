"""stdout/stderr consoles for the CLI, with secrets scrubbed from everything written."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import IO, Any, cast

from kvcalc.errors import KvcalcError

_SECRETS: set[str] = set()
_MASK = "***"
#: environment variables whose values are never printed
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def add_secret(value: str | None) -> None:
    """Scrub ``value`` from everything printed, also as a ``repr`` or a URL would spell it."""
    if value and len(value) >= 4:
        from urllib.parse import quote

        for form in (value, repr(value)[1:-1], quote(value, safe="")):
            if len(form) >= 4:
                _SECRETS.add(form)


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
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return text


def one_line(text: str) -> str:
    """``text`` as one line of printable characters: line breaks, terminal escape sequences and
    other control characters (from file names, config values...) are shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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


#: width of the output when stdout is not a terminal (a pipe, a file, CI): wide enough that no
#: table cell or line is cut or wrapped, so ``grep`` and ``cut`` see whole names and numbers
PIPE_WIDTH = 400


def stdout_is_terminal() -> bool:
    return bool(getattr(sys.stdout, "isatty", lambda: False)())


def stdout_console(**kwargs: Any):
    """A rich console on (scrubbed) stdout. Created per call so tests capture it.

    Data is never highlighted (rich would colour the digits inside ``gemma-2-9b-it`` or split
    ``8,192``); when stdout is not a terminal, lines are as wide as they need to be.
    """
    from rich.console import Console

    kwargs.setdefault("highlight", False)
    if not stdout_is_terminal():
        kwargs.setdefault("width", PIPE_WIDTH)
        kwargs.setdefault("soft_wrap", True)  # a line of text stays one line for grep
    # ScrubbedStream is a duck-typed IO[str]: write/flush/isatty, the rest delegated
    return Console(file=cast(IO[str], ScrubbedStream(sys.stdout)), **kwargs)


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
    """``error[code]: message`` and ``hint: ...`` on stderr: one line each, secrets scrubbed."""
    err(f"error[{exc.code}]: {one_line(exc.message)}")
    if exc.hint:
        err(f"hint: {one_line(exc.hint)}")


@contextlib.contextmanager
def scrubbed_std_streams(args: list[str]) -> Iterator[None]:
    """While one command runs: the secrets of ``args`` and the environment registered, and
    ``sys.stdout``/``sys.stderr`` scrubbed, so that what other code writes there (warnings, a
    library's ``print`` or progress bar) cannot show a token either. Both are undone afterwards:
    an argument of one run (``--token plan``) is not masked in the next one's output."""
    saved, secrets = (sys.stdout, sys.stderr), set(_SECRETS)
    register_secrets_from(args)
    sys.stdout, sys.stderr = ScrubbedStream(saved[0]), ScrubbedStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        _SECRETS.intersection_update(secrets)


def print_traceback() -> None:
    import traceback

    err("".join(traceback.format_exc()).rstrip())
