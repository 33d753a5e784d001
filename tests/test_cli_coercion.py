"""kvcalc's own conversion of option values (kvcalc.cli.coercion) gives what typer's gives.

Every parameter of every command that got kvcalc's conversion is fed the same values through it
and through the conversion typer builds for that parameter (a pydantic adapter): the same value
back, or the same error (type and message) — including where kvcalc's conversion hands the value
to typer's (numbers, enums, parsers raising ``ValueError``).
"""

from __future__ import annotations

import typer
import typer.core
import typer.main

from kvcalc.cli import app as cli_app
from kvcalc.cli.coercion import _OwnConversion

#: values a person types, good and bad for the settings' parsers
TEXTS = ["1", "0", "-3", "2.5", "32K", "32k", "80GB", "0.9", "10%", "H100-80GB", "fp8", "auto",
         "vllm", "llama-cpp", "a=b", "true", "x", "", " 4 ", "1_000", "\u00e9"]  # fmt: skip
#: not text: a default typer passes through the conversion
OTHERS = [1, 0.5, True, 16]


def _commands():
    cli_app._register_commands([])  # every command
    group = typer.main.get_command(cli_app.app)
    ctx = typer.Context(group)
    return [(name, group.commands[name], ctx) for name in sorted(group.commands)]


def _outcome(conversion, value, param, ctx):
    try:
        return ("value", conversion.coerce(value, param=param, ctx=ctx))
    except Exception as exc:  # the same error either way, whatever it is
        return ("error", type(exc).__name__, str(exc))


def _typer_conversion(param):
    own = param._runtime_param
    param._runtime_param = None
    try:
        return param.get_runtime_param()
    finally:
        param._runtime_param = own


def _params():
    found = []
    for name, command, ctx in _commands():
        for param in command.get_params(typer.Context(command, parent=ctx)):
            if isinstance(getattr(param, "_runtime_param", None), _OwnConversion):
                found.append((f"{name}-{param.name}", command, param))
    return found


#: typer converts each parameter itself (typer 0.2x with its own click), or leaves it to click
TYPER_CONVERTS = hasattr(typer.core, "_TyperParameter")


def test_the_planning_options_get_kvcalcs_conversion():
    names = {name for name, _, _ in _params()}
    if not TYPER_CONVERTS:  # older typer: click's types convert, kvcalc changes nothing
        assert names == set()
        return
    # plan: every option of the settings table and the model argument; the help option
    for expected in ("plan-model", "plan-gpu", "plan-tensor_parallel_size", "plan-engine_option",
                     "plan-help", "curve-lengths", "compare-models", "verify-num_blocks"):  # fmt: skip
        assert expected in names, expected
    assert len(names) > 150


def test_same_value_or_error_as_typers_own():
    for name, command, param in _params():
        ctx = typer.Context(command)
        own, theirs = param._runtime_param, _typer_conversion(param)
        multi = param.multiple or param.nargs == -1
        values = [None, *TEXTS, *OTHERS]
        if multi:
            values = [None, (), *((t,) for t in TEXTS), tuple(TEXTS[:4]), ["32K", "x"], "1"]
        for value in values:
            assert _outcome(own, value, param, ctx) == _outcome(theirs, value, param, ctx), (
                name,
                value,
            )
