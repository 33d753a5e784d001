"""``kvcalc check`` (deployment files in CI) and ``kvcalc schema`` (their JSON Schema)."""

from __future__ import annotations

import os
from enum import Enum
from typing import Annotated, Any

import typer

from kvcalc.cli.app import app
from kvcalc.cli.options import command
from kvcalc.errors import ExitCode, InputError
from kvcalc.planning.settings import OUTPUT_PANEL

CHECK_EXIT_HELP = (
    "Exit status: 0 every deployment passes; 1 at least one fails its requirements or would not "
    "start (0 with --exit-zero); 2 the check could not run (unreadable or invalid file, unknown "
    "model or GPU), each problem printed as file:line:column: message."
)


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    github = "github"


def _format(text: str | Format) -> Format:
    """``--format``, refused in kvcalc's words (typer's enum conversion said "Value error, 'html'
    is not one of ...")."""
    if isinstance(text, Format):
        return text  # the default
    try:
        return Format(str(text).strip().lower())
    except ValueError:
        raise InputError(
            f"--format {text!r} is not a report format",
            hint="choose one of: " + ", ".join(f.value for f in Format),
            code="usage",
        ) from None


def _fail_on(values: list[str] | None) -> tuple[str, ...]:
    from kvcalc.deploy.cheaper import FAIL_ON_CHEAPER
    from kvcalc.deploy.keys import ALLOWABLE_VERDICTS

    choices = (*ALLOWABLE_VERDICTS, FAIL_ON_CHEAPER)
    out = []
    for value in values or ():
        for item in value.split(","):
            item = item.strip()
            if item not in choices:
                raise InputError(
                    f"--fail-on: unknown verdict {item!r}",
                    hint="choose from: " + ", ".join(choices),
                    code="usage",
                )
            out.append(item)
    return tuple(out)


@command(
    app,
    "token",
    "offline",
    examples=(
        "kvcalc check examples/deployments/fleet.yaml",
        "kvcalc check examples/deployments/fleet.yaml --format markdown",
    ),
    epilog=CHECK_EXIT_HELP,
)
def check(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Deployment files, folders (their *.yaml, *.yml) or globs ('deploy/**/*.yaml').",
            show_default=False,
        ),
    ],
    *,
    # a str, read by _format: typer 0.18 looks an Enum-typed option's parsed value up by str(),
    # which a str Enum's member does not pass (the format came back None)
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            parser=_format,
            metavar="[table|json|markdown|github]",
            help="table (the default, terminal or not), json, markdown "
            "(for $GITHUB_STEP_SUMMARY) or github (workflow annotations).",
            rich_help_panel=OUTPUT_PANEL,
        ),
    ] = Format.table.value,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on",
            help="Also fail on this verdict (tight or below-target) even "
            "where a file allows it, or on `cheaper` (a deployment with `recommend: true` that "
            "a cheaper one could replace); repeatable.",
            rich_help_panel=OUTPUT_PANEL,
            show_default=False,
        ),
    ] = None,
    prices: Annotated[
        str | None,
        typer.Option(
            "--prices",
            help="Prices per GPU-hour for `recommend: true`: YAML, or CSV with the header "
            "gpu,usd_per_hour (default: $KVCALC_PRICES, else the bundled table).",
            metavar="FILE",
            rich_help_panel=OUTPUT_PANEL,
            show_default=False,
        ),
    ] = None,
    exit_zero: Annotated[
        bool,
        typer.Option(
            "--exit-zero",
            help="Exit 0 even when deployments fail (report-only runs); "
            "a check that cannot run still exits 2.",
            rich_help_panel=OUTPUT_PANEL,
        ),
    ] = False,
    given: dict[str, Any],
) -> int:
    """Check deployment files: plan every deployment and judge it against its requirements.

    A file holds one deployment or a list under `deployments:` (format: `kvcalc schema`).

    Keys follow `kvcalc plan` and vLLM; `command: vllm serve ...` is read too.

    Every problem in every file is reported at once, as file:line:column: message.
    """
    from kvcalc.deploy.run import check_paths
    from kvcalc.render import check_view, to_json

    fail_on_verdicts = _fail_on(fail_on)
    report = check_paths(
        paths, fail_on=fail_on_verdicts, token=given["token"], offline=given["offline"] or None,
        prices=prices,
    )  # fmt: skip
    fmt = _format(output_format).value
    if report.problems:
        return _report_problems(report, fmt)
    if fmt == "json":
        to_json.print_json([r.to_dict() for r in report.results])
    elif fmt == "markdown":
        _write(check_view.markdown(report))
    elif fmt == "github":
        _write(check_view.github(report))
        _step_summary(check_view.markdown(report))
    else:
        check_view.render_table(report)
    return int(report.exit_code(exit_zero=exit_zero))


def _write(text: str) -> None:
    from kvcalc.render import console

    console.out(text.rstrip("\n"))


def _step_summary(text: str) -> None:
    """With ``--format github`` inside Actions, also append the Markdown report to the job summary."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as exc:
        from kvcalc.render import console

        console.err(f"warning: cannot append to $GITHUB_STEP_SUMMARY: {exc.strerror or exc}")


def _report_problems(report, fmt: str) -> int:
    from kvcalc.errors import KvcalcError
    from kvcalc.render import check_view, console

    if fmt == "github":
        _write(check_view.github(report))
        _step_summary(check_view.markdown(report))
    elif fmt == "markdown":
        _write(check_view.markdown(report))
    for line in check_view.problem_lines(report):
        console.err(line)
    n = len(report.problems)
    console.print_error(
        KvcalcError(
            f"{n} problem{'s' if n != 1 else ''} in the deployment files; the check could not run",
            hint="fix the lines above; `kvcalc schema` prints the file format",
            code="invalid-deployment",
        )
    )
    return int(ExitCode.ERROR)


@command(app, examples=("kvcalc schema", "kvcalc schema plan"))
def schema(
    document: Annotated[
        str,
        typer.Argument(
            help="deployment (the YAML files `check` reads), plan (`plan --json`), check "
            "(`check --format json`), recommend (`recommend --json`) or "
            "recommend-disaggregated (`recommend --disaggregated --json`).",
            metavar="[deployment|plan|check|recommend|recommend-disaggregated]",
        ),
    ] = "deployment",
    *,
    given: dict[str, Any],
) -> int:
    """Print the JSON Schema of deployment files (for editors and other validators).

    `kvcalc schema plan`, `kvcalc schema check` and `kvcalc schema recommend` print the schemas
    of `plan --json`, `check --format json` and `recommend --json` (docs/json.md describes every
    key).
    """
    import json

    from kvcalc.render import console

    if document == "deployment":
        from kvcalc.deploy.schema import build_schema

        data = build_schema()
    else:
        from kvcalc.render.json_shapes import SCHEMAS
        from kvcalc.render.json_shapes import schema as output_schema

        if document not in SCHEMAS:
            raise InputError(
                f"no schema named {document!r}",
                hint="choose from: deployment, " + ", ".join(SCHEMAS),
                code="usage",
            )
        data = output_schema(document)
    console.out(json.dumps(data, indent=2, ensure_ascii=False))
    return 0
