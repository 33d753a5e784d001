"""``kvcalc check`` reports: a rich table, Markdown, GitHub workflow annotations, and problem lines.

No arithmetic here: every figure comes from a :class:`~kvcalc.deploy.run.CheckReport`. The text
formats return strings (the command prints them), so tests compare them whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from kvcalc.render import fmt

if TYPE_CHECKING:
    from kvcalc.deploy.judge import Failure
    from kvcalc.deploy.run import CheckReport, DeploymentResult
    from kvcalc.planning.result import CapacityPlan

PASS, FAIL = "PASS", "FAIL"
_RIGHT = ("max len", "requests", "workload", "KV headroom")
_MD_MARK = {True: "✅", False: "❌"}


# -- shared cells -------------------------------------------------------------------------------
def _gpus(plan: CapacityPlan) -> str:
    if plan.gpu:
        each = plan.gpu
    elif plan.memory.total_bytes:
        each = fmt.size(plan.memory.total_bytes)
    else:
        each = "GPU (KV memory given)"
    return f"{plan.num_gpus}× {each}"


def _pass_text(result: DeploymentResult) -> str:
    plan = result.plan
    text = (
        f"{result.deployment.name} passes: {plan.verdict}; {plan.max_concurrency:,.2f} concurrent "
        f"requests fit at max_model_len {plan.max_model_len:,}"
    )
    if result.deployment.has_workload and plan.workload_concurrency is not None:
        text += (
            f", {plan.workload_concurrency:,.2f} at the workload's {plan.workload_tokens:,} tokens"
        )
    if plan.data_parallel_replicas > 1:
        each = "DP rank" if plan.data_parallel_size > 1 else "replica"
        text += f", per {each} (×{plan.data_parallel_replicas})"
    return text + f"; KV headroom {_headroom(plan)}"


def _headroom(plan: CapacityPlan) -> str:
    share = plan.headroom_fraction
    return (
        f"{fmt.size(plan.headroom_bytes)} ({share:.1%})"
        if abs(share) < 0.1
        else f"{fmt.size(plan.headroom_bytes)} ({share:.0%})"
    )


def _where(file: str, line: int | None) -> str:
    return file if line is None else f"{file}:{line}"


def summary(report: CheckReport) -> str:
    """``2 of 3 deployments pass``, or why the check could not run."""
    if report.problems:
        n = len(report.problems)
        return (
            f"the check could not run: {n} problem{'s' if n != 1 else ''} in the deployment files"
        )
    total = len(report.results)
    passed = sum(r.passed for r in report.results)
    noun = "deployment" if total == 1 else "deployments"
    if passed == total:
        return f"all {total} {noun} pass" if total != 1 else "the deployment passes"
    if total == 1:
        return "the deployment fails"
    return f"{passed} of {total} {noun} pass" if passed != 1 else f"1 of {total} {noun} passes"


def _failure_lines(report: CheckReport) -> list[tuple[DeploymentResult, Failure]]:
    return [(r, f) for r in report.results for f in r.failures]


#: suggestions shown per failing deployment
MAX_SUGGESTIONS = 3


def _tries(result: DeploymentResult) -> list[str]:
    """The plan's computed suggestions for a failing deployment (each one was itself planned)."""
    if result.passed:
        return []
    allowed = result.deployment.requirements.allow_verdicts
    ranked = sorted(result.plan.suggestions, key=lambda s: s.verdict not in allowed)  # stable
    return [s.text for s in ranked[:MAX_SUGGESTIONS]]


# -- table --------------------------------------------------------------------------------------
def _starts(plan) -> bool:
    return plan.verdict not in ("wont-start", "weights-dont-fit")


def _table_rows(report: CheckReport) -> tuple[list[str], list[list[Any]]]:
    """Column names and cells shared by the table and Markdown (a workload column if any has one)."""
    workload = any(r.deployment.has_workload for r in report.results)
    names = ["deployment", "model", "GPUs", "max len", "requests"]
    names += ["workload"] if workload else []
    names += ["KV headroom", "verdict"]
    rows = []
    for r in report.results:
        plan = r.plan
        replicas = f" ×{plan.data_parallel_replicas}" if plan.data_parallel_replicas > 1 else ""
        row = [
            r.deployment.name,
            plan.model.rsplit("/", 1)[-1],
            _gpus(plan),
            fmt.int_(plan.max_model_len),
            # a deployment that does not start runs no request (runnable_concurrency 0)
            f"{plan.max_concurrency:,.2f}{replicas}" if _starts(plan) else "-",
        ]
        if workload:
            at = plan.workload_concurrency if r.deployment.has_workload and _starts(plan) else None
            row.append("-" if at is None else f"{at:,.2f}{replicas}")
        row += [_headroom(plan), plan.verdict]
        rows.append(row)
    return names, rows


def render_table(report: CheckReport) -> None:

    from rich import box
    from rich.table import Table
    from rich.text import Text

    from kvcalc.render.console import stdout_console
    from kvcalc.render.plan_view import VERDICT_STYLE

    console = stdout_console()
    names, rows = _table_rows(report)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("result")
    for name in names:
        right = name in _RIGHT
        table.add_column(name, justify="right" if right else "left")
    for r, row in zip(report.results, rows, strict=False):
        verdict = Text(row[-1], style=VERDICT_STYLE.get(row[-1], ""))
        result = Text(PASS if r.passed else FAIL, style="bold green" if r.passed else "bold red")
        table.add_row(result, *row[:-1], verdict)
    from kvcalc.render.tables import print_whole

    print_whole(table, lead=2)
    for r in report.results:
        for f in r.failures:
            console.print(
                f"[bold red]{FAIL}[/] {r.deployment.name} "
                f"({_where(r.deployment.file, f.line)}): {escape(f.message)}",
                soft_wrap=True,
            )
        for text in _tries(r):
            console.print(f"  try: {text}", soft_wrap=True, markup=False)
    for r in report.results:
        for note in _notes(r):
            console.print(
                f"[dim]note: {escape(r.deployment.name)}: {escape(note)}[/]", soft_wrap=True
            )
    console.print(summary(report), style="bold green" if report.passed else "bold red")


def _notes(r: DeploymentResult) -> tuple[str, ...]:
    """The file's notes, then what ``recommend: true`` found (unless it is a failure already)."""
    found = r.recommend
    if found is None or any(f.requirement == "recommend" for f in r.failures):
        return r.deployment.notes
    return (*r.deployment.notes, found.message)


# -- markdown -----------------------------------------------------------------------------------
def _md(text: Any) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown(report: CheckReport) -> str:
    """A Markdown report for ``$GITHUB_STEP_SUMMARY`` and pull-request comments."""
    mark = _MD_MARK[report.passed]
    lines = [f"### {mark} kvcalc check: {summary(report)}", ""]
    if report.problems:
        lines += [f"- `{_md(p)}`" for p in report.problems]
        return "\n".join(lines) + "\n"
    names, rows = _table_rows(report)
    right = _RIGHT
    lines.append("| | " + " | ".join(n[:1].upper() + n[1:] for n in names) + " |")
    lines.append("|:-:|" + "|".join("--:" if n in right else "---" for n in names) + "|")
    for r, row in zip(report.results, rows, strict=False):
        row[0] = f"**{_md(row[0])}**<br>`{_md(_where(r.deployment.file, r.deployment.line))}`"
        row[1] = f"`{_md(r.plan.model)}`"
        row[-1] = f"`{row[-1]}`"
        cells = [_MD_MARK[r.passed], *(c if i in (0, 1) else _md(c) for i, c in enumerate(row))]
        lines.append("| " + " | ".join(cells) + " |")
    if _failure_lines(report):
        lines += ["", "**Failures**", ""]
    for r in report.results:
        lines += [
            f"- **{_md(r.deployment.name)}** (`{_md(_where(r.deployment.file, f.line))}`, "
            f"{f.requirement}): {_md(f.message)}"
            for f in r.failures
        ]
        lines += [f"  - try: {_md(text)}" for text in _tries(r)]
    notes = [(r, n) for r in report.results for n in _notes(r)]
    if notes:
        lines += ["", "<details><summary>Notes</summary>", ""]
        lines += [f"- **{_md(r.deployment.name)}**: {_md(n)}" for r, n in notes]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


# -- GitHub workflow commands ---------------------------------------------------------------------
def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation(
    level: str, file: str, line: int | None, title: str, message: str, column: int | None = None
) -> str:
    props = [f"file={_gh_prop(file)}"]
    if line is not None:
        props.append(f"line={line}")
        if column is not None:
            props.append(f"col={column}")
    props.append(f"title={_gh_prop(title)}")
    return f"::{level} {','.join(props)}::{_gh_data(message)}"


def github(report: CheckReport) -> str:
    """Workflow annotations: ``::error`` at each failing line, ``::notice`` for each pass."""
    out = []
    for p in report.problems:
        out.append(
            _annotation(
                "error",
                p.file,
                p.line,
                "kvcalc check: invalid deployment file",
                p.message,
                p.column,
            )
        )
    for r in report.results if not report.problems else ():
        dep = r.deployment
        tries = _tries(r)
        for f in r.failures:
            hint = f"; try {tries[0]}" if tries and f.requirement == "allow_verdicts" else ""
            out.append(
                _annotation(
                    "error",
                    dep.file,
                    f.line,
                    f"kvcalc check: {dep.name}",
                    f"{dep.name}: {f.message}{hint}",
                )
            )
        if r.passed:
            out.append(
                _annotation(
                    "notice", dep.file, dep.line, f"kvcalc check: {dep.name}", _pass_text(r)
                )
            )
        found = r.recommend
        if found is not None and found.cheaper is not None and found.message in _notes(r):
            out.append(_annotation("notice", dep.file, dep.line_of("recommend"),
                                   f"kvcalc check: {dep.name}: cheaper", found.message))  # fmt: skip
    out.append(f"kvcalc check: {summary(report)}")
    return "\n".join(out) + "\n"


# -- problems (stderr) ----------------------------------------------------------------------------
def problem_lines(report: CheckReport) -> list[str]:
    """``file:line:column: message``, one per problem, in file and line order."""
    return [str(p) for p in report.problems]
