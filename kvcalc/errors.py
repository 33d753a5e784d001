"""Errors kvcalc reports to people. A leaf module: it imports nothing from kvcalc.

Every user mistake or environment failure is a :class:`KvcalcError` with a stable
kebab-case ``code``, a one-line ``message`` and an optional ``hint``. The CLI renders it as::

    error[<code>]: <message>
    hint: <hint>

and exits with :data:`ExitCode.ERROR` (2). The catalogue of codes lives in ``docs/errors.md``.
"""

from __future__ import annotations

from enum import IntEnum

#: where kvcalc is installed from. It is not on the package index (installing ``kvcalc`` by name finds
#: nothing), so every install kvcalc suggests names a checkout or this repository:
#: :func:`install_hint` builds the text, here and only here.
REPOSITORY_URL = "https://github.com/OWNER/kvcalc"


def install_hint(extra: str | None = None) -> str:
    """How to install kvcalc (with the optional dependencies ``extra``): from a checkout, or with
    pip straight from the repository.

    >>> install_hint("plot")
    'pip install ".[plot]" in a kvcalc checkout, or pip install "kvcalc[plot] @ git+https://github.com/OWNER/kvcalc"'
    """
    local = f'".[{extra}]"' if extra else "."
    name = f"kvcalc[{extra}]" if extra else "kvcalc"
    return (
        f'pip install {local} in a kvcalc checkout, or pip install "{name} @ git+{REPOSITORY_URL}"'
    )


class ExitCode(IntEnum):
    """The three-value exit status shared by every command."""

    OK = 0  #: the command ran and the deployment passes (or there was nothing to judge)
    FAILED = 1  #: the command ran and the deployment does not pass
    ERROR = 2  #: the command could not run (bad input, unreachable Hub, ...)


class KvcalcError(Exception):
    """A problem the user can act on. ``code`` is stable; ``message`` is one line."""

    code: str = "error"
    #: used when a raise site gives no hint of its own
    default_hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint
        if code is not None:
            self.code = code

    def __str__(self) -> str:  # pragma: no cover - trivial
        return f"error[{self.code}]: {self.message}"


class ConfigError(KvcalcError):
    """A ``config.json`` that kvcalc cannot turn into a cache layout."""

    code = "config-invalid"
    default_hint = "fix config.json, or report the model if its config is published this way"


class ModelNotFoundError(KvcalcError):
    code = "model-not-found"
    default_hint = (
        "`kvcalc models` lists the bundled models; a path or a Hub id org/name also works"
    )


class InputError(KvcalcError):
    """A bad value on the command line or in a deployment file."""

    code = "invalid-input"
    default_hint = "see the command's -h for accepted values"


class HubError(KvcalcError):
    """A Hugging Face Hub failure (network, auth, missing repo...). Every raise names its
    ``hub-*`` code (``kvcalc.sources.hub.hub_error`` maps each client exception to one)."""

    default_hint = "retry, or use --offline with a bundled model or a local config.json"
