"""The help of ``--engine-version`` and ``-E/--engine-option``: every engine's profiles and options,
from the tables the engines check requests against (:mod:`kvcalc.engines.catalogue`).

Listing them imports every engine, so it runs only when a help page is shown
(:meth:`kvcalc.cli.coercion.Command.format_help`), not when a command runs.
"""

from __future__ import annotations

from typing import Any


def version_help() -> str:
    from kvcalc.engines.catalogue import engine_versions

    listed = "; ".join(f"{name}: {', '.join(v)}" for name, v in engine_versions().items())
    return f"Engine version whose defaults apply (default: the newest); the profiles: {listed}."


def option_help() -> str:
    from kvcalc.engines.catalogue import engine_options

    listed = "; ".join(f"{name}: {', '.join(keys)}" for name, keys in engine_options().items())
    return f"Engine-specific knob KEY=VALUE; repeatable. The keys each engine reads: {listed}."


#: parameter name -> the help it shows
_HELP = {"engine_version": version_help, "engine_option": option_help}


def fill(params: list[Any]) -> None:
    """Give the engine parameters among ``params`` their full help, the command's own note (what
    :func:`kvcalc.cli.options.help_text` adds after the table's text) kept."""
    from kvcalc.planning.settings import Kind, setting

    for param in params:
        name = getattr(param, "name", "")
        build = _HELP.get(name)
        if build is None or getattr(param, "hidden", False) or not getattr(param, "help", None):
            continue
        s = setting(name)
        table = s.help_for("cli")
        if s.kind is Kind.OPTIONS:
            table = table.rstrip(".") + "; repeatable."
        note = param.help[len(table) :] if param.help.startswith(table) else ""
        param.help = build() + note
