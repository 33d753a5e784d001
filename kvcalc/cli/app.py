"""The ``kvcalc`` command: one typer app, one error boundary.

Every command parses its options, calls one library function and renders the result. Errors:
a :class:`~kvcalc.errors.KvcalcError` prints ``error[<code>]: <message>`` and ``hint: ...`` on
stderr and exits 2; anything unexpected prints ``error[internal]`` (a traceback only with
``KVCALC_DEBUG=1``). Secrets (``--token``, ``HF_TOKEN``) are scrubbed from everything printed.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

import typer

from kvcalc.cli.coercion import Group
from kvcalc.errors import ExitCode, KvcalcError
from kvcalc.render import console
from kvcalc.version import __version__

EXIT_CODES_HELP = (
    "Exit status: 0 the command ran and the deployment passes; 1 it ran and the deployment "
    "does not pass (does not fit, below target); 2 it could not run (bad input, unknown model, "
    "Hub error)."
)

app = typer.Typer(
    name="kvcalc",
    cls=Group,
    help=(
        "How much GPU memory the KV cache takes, how many requests fit, and whether a deployment "
        "will run out of memory, computed the way the serving engine computes it.\n\n"
        + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    # click's plain help: wrapped at the terminal's width (80 columns in a pipe), no option name
    # or help text cut, readable by grep
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvcalc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """kvcalc: engine-exact KV-cache capacity planning."""


#: command -> the module that defines it
COMMAND_MODULES = {
    "inspect": "cmd_inspect",
    "models": "cmd_models",
    "gpus": "cmd_models",
    "plan": "cmd_plan",
    "check": "cmd_check",
    "schema": "cmd_check",
    "verify": "cmd_verify",
    "curve": "cmd_curve",
    "compare": "cmd_compare",
    "recommend": "cmd_recommend",
    "throughput": "cmd_throughput",
}


def _register_commands(args: Sequence[str] = ()) -> None:
    """Import the module of the command being run, or every command module (help, unknown).

    typer builds the whole command group on each run, so registering only the command in use
    keeps start-up short. Command modules keep heavy imports inside their functions.
    """
    command = next((a for a in args if not a.startswith("-")), None)
    wanted = COMMAND_MODULES.get(command) if command else None
    if wanted is None and command is None and any(a in ("--version",) for a in args):
        return
    modules = [wanted] if wanted else sorted(set(COMMAND_MODULES.values()))
    for name in modules:
        __import__(f"kvcalc.cli.{name}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the console script and ``python -m kvcalc``."""
    args = list(sys.argv[1:] if argv is None else argv)
    with console.scrubbed_std_streams(args):
        code = _run(args)
    sys.exit(int(code or 0))


def _run(args: list[str]) -> int:
    """Run one command; every exception ends here as an exit status and at most two lines."""
    if not args:  # bare ``kvcalc``: the overview, not a usage error
        args = ["--help"]
    try:
        _register_commands(args)
        code = app(args=args, prog_name="kvcalc", standalone_mode=False)
        if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) in a command into exit code 130
            console.err("aborted")
    except KvcalcError as exc:
        console.print_error(exc)
        code = ExitCode.ERROR
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):  # typer.Abort has no ``show``
        console.err("aborted")
        code = 130
    except Exception as exc:  # the boundary: never a traceback unless asked for
        format_message = getattr(exc, "format_message", None)
        if (
            callable(getattr(exc, "show", None))
            and isinstance(getattr(exc, "exit_code", None), int)
            and callable(format_message)
        ):
            # click's (or typer's vendored click's) usage errors
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "kvcalc"
            console.print_error(
                KvcalcError(
                    own_words(str(format_message())), hint=f"see '{where} -h'", code="usage"
                )
            )
            code = ExitCode.ERROR
        else:
            if os.environ.get("KVCALC_DEBUG") == "1":
                console.print_traceback()
            text = " ".join(str(exc).split())
            console.print_error(
                KvcalcError(
                    f"unexpected {type(exc).__name__}: {text[:300]}",
                    hint="this is a bug in kvcalc; rerun with KVCALC_DEBUG=1 and report it",
                    code="internal",
                )
            )
            code = ExitCode.ERROR
    return code


#: pydantic's phrases in typer's conversion errors, in kvcalc's words
_PYDANTIC_WORDS = (
    (
        "Input should be a valid integer, unable to parse string as an integer",
        "expected a whole number",
    ),
    ("Input should be a valid number, unable to parse string as a number", "expected a number"),
    ("Input should be a valid integer", "expected a whole number"),
    ("Input should be a valid number", "expected a number"),
    ("Value error, ", ""),
)


#: click's phrase for a number it cannot read (typer before its own conversion: the 0.18 floor),
#: "'abc' is not a valid integer range." → kvcalc's words
_CLICK_NUMBER = re.compile(r"'[^']*' is not a valid (integer|float)( range)?\.")


def own_words(message: str) -> str:
    """A usage error without a dependency's wording ("Input should be a valid integer, unable to
    parse string as an integer" is pydantic's, which typer converts every typed option with;
    "'abc' is not a valid integer range." is click's, in older typer)."""
    for theirs, ours in _PYDANTIC_WORDS:
        message = message.replace(theirs, ours)
    return _CLICK_NUMBER.sub(
        lambda m: "expected a whole number" if m[1] == "integer" else "expected a number", message
    )


if __name__ == "__main__":  # pragma: no cover
    # ``python -m kvcalc.cli.app``: the command modules register on ``kvcalc.cli.app``'s typer app,
    # not on this ``__main__`` copy of it, so run that module's entry point (as ``python -m kvcalc``)
    from kvcalc.cli import app as _app

    _app.main()
