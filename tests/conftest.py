"""Shared fixtures: run the CLI in-process with its real error boundary."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


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
    monkeypatch.setenv("COLUMNS", "120")
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
