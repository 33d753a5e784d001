"""Golden CLI output: exit code, stdout and stderr recorded together (ruff-style snapshots).

Regenerate with ``KVCALC_UPDATE_GOLDEN=1 python -m pytest tests/...`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def render(result) -> str:
    return (
        f"exit_code: {result.exit_code}\n"
        f"----- stdout -----\n{result.stdout}"
        f"----- stderr -----\n{result.stderr}"
    )


def assert_golden(name: str, result) -> None:
    path = GOLDEN / f"{name}.txt"
    text = render(result)
    if os.environ.get("KVCALC_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"golden {path.name} differs; rerun with KVCALC_UPDATE_GOLDEN=1 and review"
    )
