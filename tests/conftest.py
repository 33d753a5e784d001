"""Shared fixtures: run the CLI in-process with its real error boundary.

With ``KVCALC_NO_SKIPS=1`` (as CI sets it) a skipped test that does not carry the ``gpu`` marker
fails the run: a missing test dependency must not pass as a green suite.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: "nodeid: reason" of each skipped test that is not marked ``gpu``
_SKIPPED_OUTSIDE_GPU: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("gpu") is None
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED_OUTSIDE_GPU.append(f"{item.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("KVCALC_NO_SKIPS") == "1" and _SKIPPED_OUTSIDE_GPU and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if os.environ.get("KVCALC_NO_SKIPS") == "1" and _SKIPPED_OUTSIDE_GPU:
        terminalreporter.write_sep("=", "skipped without the gpu marker (KVCALC_NO_SKIPS=1 fails)")
        for line in _SKIPPED_OUTSIDE_GPU:
            terminalreporter.write_line(line)


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture(autouse=True)
def _stable_terminal(monkeypatch):
    """Fixed width, no colour, no Hub tokens from the environment."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.delenv("KVCALC_DEBUG", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


@pytest.fixture
def cli(capsys):
    """``cli("inspect", "llama-3.1-8b")`` runs ``kvcalc`` through ``main()`` and captures it."""
    from kvcalc.cli.app import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
