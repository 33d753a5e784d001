"""``kvcalc check`` as a library call: files in, a :class:`CheckReport` out.

:func:`check_paths` expands the paths (files, folders, globs), reads and validates every file
(:mod:`kvcalc.deploy.spec`), plans each valid deployment (:func:`kvcalc.planning.api.plan_reference`,
which loads each model once per process) and judges it (:mod:`kvcalc.deploy.judge`). Problems that
stop a check — unreadable files, invalid values, an unknown model — are collected from every file
and deployment, not just the first, and returned as :class:`~kvcalc.deploy.spec.Problem` values.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvcalc.deploy.cheaper import FAIL_ON_CHEAPER, cheaper_deployment, cheaper_failure
from kvcalc.deploy.judge import Failure, judge
from kvcalc.deploy.spec import Deployment, Problem, parse_document
from kvcalc.errors import ExitCode, KvcalcError
from kvcalc.frozen import frozen

if TYPE_CHECKING:
    from kvcalc.deploy.cheaper import CheaperCheck
    from kvcalc.planning.inputs import PlanInputs
    from kvcalc.planning.result import CapacityPlan, Suggestion

    #: a deployment planned once per check: (model, revision, inputs)
    PlanKey = tuple[str, str | None, PlanInputs]

#: a deployment file larger than this is refused unread
MAX_FILE_BYTES = 8 * 1024 * 1024
YAML_SUFFIXES = (".yaml", ".yml")
#: error-code prefixes → the key whose line a planning error points at
_CODE_KEYS = (
    (
        ("model", "config", "hub", "path", "repo", "gated", "revision", "entry", "safetensors"),
        ("model", "command"),
    ),
    (("unknown-gpu",), ("gpu",)),
    (("unknown-quantization", "unsupported-quantization"), ("quantization", "model", "command")),
    (("unknown-engine-option",), ("engine_options",)),
    (("unknown-engine",), ("engine_version", "engine")),
    (("unknown-dtype", "unsupported-dtype"), ("kv_cache_dtype", "dtype", "command", "model")),
)


@frozen
class DeploymentResult:
    deployment: Deployment
    plan: CapacityPlan
    failures: tuple[Failure, ...]
    #: what ``recommend: true`` found (None: not asked)
    recommend: CheaperCheck | None = None

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        """The ``--format json`` object: name, file, line, passed, failures, then the plan's keys."""
        dep = self.deployment
        head = {
            "name": dep.name,
            "file": dep.file,
            "line": dep.line,
            "passed": self.passed,
            "failures": [f.to_dict() for f in self.failures],
            "requirements": dep.requirements.to_dict(),
            "recommend": None if self.recommend is None else self.recommend.to_dict(),
        }
        body = {k: v for k, v in self.plan.to_dict().items() if k not in head}
        body["notes"] = [*dep.notes, *body.get("notes", ())]
        return {**head, **body}


@frozen
class CheckReport:
    files: tuple[str, ...]
    results: tuple[DeploymentResult, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.problems and all(r.passed for r in self.results)

    def exit_code(self, *, exit_zero: bool = False) -> ExitCode:
        """2 when the check could not run; else 1 if any deployment fails (0 with ``exit_zero``)."""
        if self.problems:
            return ExitCode.ERROR
        if not exit_zero and not all(r.passed for r in self.results):
            return ExitCode.FAILED
        return ExitCode.OK


def expand_paths(patterns: Sequence[str]) -> tuple[list[str], list[Problem]]:
    """Files named by ``patterns``: files as given, folders' ``*.yaml``/``*.yml`` (recursively),
    and globs (``**`` included), in order, each once."""
    files: list[str] = []
    problems: list[Problem] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
            if not found:
                problems.append(Problem(pattern, None, None, "no files match this pattern"))
        elif os.path.isdir(pattern):
            found = sorted(
                os.path.join(root, name)
                for root, _, names in os.walk(pattern)
                for name in names
                if name.endswith(YAML_SUFFIXES)
            )
            if not found:
                problems.append(
                    Problem(pattern, None, None, "no .yaml or .yml files in this folder")
                )
        elif os.path.isfile(pattern):
            found = [pattern]
        else:
            problems.append(Problem(pattern, None, None, "no such file"))
            found = []
        files.extend(f for f in found if f not in files)
    return files, problems


def read_file(path: str) -> tuple[list[Deployment], list[Problem]]:
    """Read, parse and validate one deployment file."""
    from kvcalc.deploy.yamlread import read_yaml

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return [], [Problem(path, None, None, f"cannot read it: {exc.strerror or exc}")]
    if len(data) > MAX_FILE_BYTES:
        return [], [
            Problem(
                path,
                None,
                None,
                f"larger than {MAX_FILE_BYTES // (1 << 20)} MiB: not a deployment file",
            )
        ]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return [], [Problem(path, line, 1, "not UTF-8 text: deployment files are UTF-8 YAML")]
    root, yaml_problems = read_yaml(text)
    problems = [Problem(path, p.line, p.column, p.message) for p in yaml_problems]
    if root is None and problems:
        return [], problems
    deployments, more = parse_document(root, file=path, base_dir=os.path.dirname(path) or ".")
    return deployments, sorted([*problems, *more], key=lambda p: (p.line or 0, p.column or 0))


def _problem_for(dep: Deployment, exc: KvcalcError) -> Problem:
    from kvcalc.deploy.spec import _mentioned_key, own_hint

    keys: tuple[str, ...] = ()
    for prefixes, candidates in _CODE_KEYS:
        if exc.code.startswith(prefixes):
            keys = candidates
            break
    mentioned = _mentioned_key(exc.message, dep.positions)
    line, column = dep.position_of(*((mentioned,) if mentioned else ()), *keys)
    extra = own_hint(exc)
    if exc.code == "model-not-found":
        from kvcalc.deploy.keys import suggest
        from kvcalc.sources.bundled import bundled_models

        names = [m.alias for m in bundled_models()] + [m.hf_id for m in bundled_models()]
        extra = suggest(dep.model, names) or extra
    return Problem(dep.file, line, column, f"{dep.name}: {exc.message}{extra}")


def plan_deployment(
    dep: Deployment,
    *,
    token: str | None = None,
    offline: bool | None = None,
    with_suggestions: bool = True,
) -> CapacityPlan:
    """The deployment's :class:`~kvcalc.planning.result.CapacityPlan`, as ``plan_reference`` makes it.

    Each model is loaded once per process (``resolve_model_cached``). ``with_suggestions=False``
    skips the computed suggestions (several more plans each); the check asks for them only for
    deployments that fail.
    """
    from kvcalc.planning.api import plan_reference

    return plan_reference(
        dep.model,
        dep.inputs,
        revision=dep.revision,
        token=token,
        offline=offline,
        with_suggestions=with_suggestions,
    )


def _judged(
    dep: Deployment,
    fail_on: tuple[str, ...],
    token: str | None,
    offline: bool | None,
    plans: dict[PlanKey, CapacityPlan],
    prices: str | None = None,
) -> DeploymentResult:
    """Plan and judge ``dep``; identical inputs are planned once (suggestions only on failure);
    with ``recommend: true``, search for a cheaper deployment too (:mod:`kvcalc.deploy.cheaper`)."""
    key = (dep.model, dep.revision, dep.inputs)
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = plan_deployment(
            dep, token=token, offline=offline, with_suggestions=False
        )
    failures = judge(dep, plan, fail_on=[v for v in fail_on if v != FAIL_ON_CHEAPER])
    found = None
    if dep.recommend:
        found = cheaper_deployment(dep, plan, prices=prices, token=token, offline=offline)
        failure = cheaper_failure(dep, found) if FAIL_ON_CHEAPER in fail_on else None
        failures = (*failures, failure) if failure else failures
    if failures and plan.verdict != "ok" and not plan.suggestions:
        plan = plans[key] = plan_deployment(dep, token=token, offline=offline)
    kept = _within_requirements(dep, plan.suggestions, fail_on)
    if kept != plan.suggestions:
        plan = replace(plan, suggestions=kept)
    return DeploymentResult(deployment=dep, plan=plan, failures=failures, recommend=found)


def _within_requirements(
    dep: Deployment, suggestions: tuple[Suggestion, ...], fail_on: tuple[str, ...]
) -> tuple[Suggestion, ...]:
    """The suggestions that keep the file's own requirements: none shortens ``max_model_len``
    below ``min_max_model_len``, and none whose planned verdict the file refuses is offered."""
    req = dep.requirements
    allowed = [v for v in req.allow_verdicts if v not in fail_on]
    floor = req.min_max_model_len or 0
    return tuple(
        s for s in suggestions
        if s.verdict in allowed and int(s.change.get("max_model_len", floor)) >= floor
    )  # fmt: skip


def check_paths(
    patterns: Sequence[str],
    *,
    fail_on: Iterable[str] = (),
    token: str | None = None,
    offline: bool | None = None,
    prices: str | None = None,
) -> CheckReport:
    """Check every deployment in ``patterns``; see :class:`CheckReport` for the outcome.
    ``prices``: the price table for ``recommend: true`` (as ``kvcalc recommend --prices``)."""
    files, problems = expand_paths(patterns)
    deployments: list[Deployment] = []
    for path in files:
        found, more = read_file(path)
        deployments.extend(found)
        problems.extend(more)
    results: list[DeploymentResult] = []
    fail_on = tuple(fail_on)
    cache: dict[PlanKey, CapacityPlan] = {}
    for dep in deployments:
        try:
            results.append(
                _judged(dep, fail_on, token, offline, cache if _hashable(dep) else {}, prices)
            )
        except KvcalcError as exc:
            problems.append(_problem_for(dep, exc))
    if not files and not problems:
        problems.append(Problem("kvcalc check", None, None, "no deployment files given"))
    order = {path: i for i, path in enumerate(files)}
    problems.sort(key=lambda p: (order.get(p.file, -1), p.line or 0, p.column or 0))
    return CheckReport(files=tuple(files), results=tuple(results), problems=tuple(problems))


def _hashable(dep: Deployment) -> bool:
    try:
        hash(dep.inputs)
    except TypeError:  # an unhashable engine option value
        return False
    return True
