"""Counts the docs state are the tests' own: the error codes, the fuzz and property cases per run.

Each figure is computed from the code (the catalogue in ``docs/errors.md``, each test's
``@settings(max_examples=...)`` times its ``parametrize`` cases) and compared with the sentence that
states it. ``KVCALC_UPDATE_GOLDEN=1`` writes the computed figures into the docs (review the diff).
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RELIABILITY = ROOT / "docs" / "reliability.md"
UPDATE = os.environ.get("KVCALC_UPDATE_GOLDEN") == "1"


def cases_per_run(module: str, test: str) -> int:
    """Examples one run draws: hypothesis's ``max_examples`` (1 without ``@given``) × every
    ``parametrize`` list."""
    function = getattr(importlib.import_module(module), test)
    count = 1
    for mark in getattr(function, "pytestmark", []):
        if mark.name == "parametrize":
            count *= len(mark.args[1])
    settings = getattr(function, "_hypothesis_internal_use_settings", None)
    return count * (settings.max_examples if settings is not None else 1)


def error_codes() -> int:
    return len(re.findall(r"^### `[a-z0-9-]+`$", (ROOT / "docs" / "errors.md").read_text(), re.M))


#: the fuzz table of docs/reliability.md: ``| input | `file::test` (notes) | cases | ... |``
ROW = re.compile(r"^\|[^|]*\| `(test_\w+)\.py::(test_\w+)`([^|]*)\| ([\d,]+) \|", re.M)


def fuzz_section() -> str:
    text = RELIABILITY.read_text()
    start = text.index("## Fuzz cases per CI run")
    return text[start : text.index("\n## ", start + 1)]


def fuzz_rows() -> list[tuple[str, str, bool, bool, int]]:
    """(module, test, library, before, documented cases) for each row of the fuzz table."""
    return [
        (m, t, "library" in notes, "before" in notes, int(n.replace(",", "")))
        for m, t, notes, n in ROW.findall(fuzz_section())
    ]


def _fmt(n: int) -> str:
    return f"{n:,}"


def claims() -> list[tuple[Path, str, str]]:
    """(file, pattern with one group, the figure it must hold) for every stated count."""
    rows = fuzz_rows()
    cli = [cases_per_run(m, t) for m, t, library, _, _ in rows if not library]
    before = [cases_per_run(m, t) for m, t, library, old, _ in rows if old and not library]
    # the library-level property cases: the two library rows and the safetensors header property
    library = sum(cases_per_run(m, t) for m, t, lib, _, _ in rows if lib) + cases_per_run(
        "test_safetensors_meta", "test_totals_add_up_for_any_header"
    )
    total, codes = sum(cli), error_codes()
    return [
        (README, r"checks this with ([\d,]+) fuzzed runs", _fmt(total)),
        (README, r"plus ([\d,]+) library-level property cases", _fmt(library)),
        (README, r"every one of the ([\d,]+) documented error codes", _fmt(codes)),
        (RELIABILITY, r"\| \*\*total\*\* \| \*\*([\d,]+)\*\* \|", _fmt(total)),
        (RELIABILITY, r"\n([\d,]+) of them come from the tests added", _fmt(total - sum(before))),
        (RELIABILITY, r"; ([\d,]+) from the tests that existed before", _fmt(sum(before))),
        (RELIABILITY, r"Library-level property tests add ([\d,]+) cases", _fmt(library)),
        (RELIABILITY, r"every error code produced \(([\d,]+)\)", _fmt(codes)),
        (RELIABILITY, r"`test_errors_catalogue.py::test_each_code_is_produced` \| ([\d,]+) \|",
         _fmt(cases_per_run("test_errors_catalogue", "test_each_code_is_produced"))),
    ]  # fmt: skip


def test_each_fuzz_row_states_the_cases_its_test_draws():
    rows = fuzz_rows()
    assert len(rows) >= 12, "the fuzz table of docs/reliability.md was not found"
    text = RELIABILITY.read_text()
    for module, test, *_, documented in rows:
        got = cases_per_run(module, test)
        if UPDATE and got != documented:
            text = re.sub(
                rf"(`{module}\.py::{test}`[^|]*\| ){documented:,} \|", rf"\g<1>{got:,} |", text
            )
        else:
            assert (module, test, got) == (module, test, documented)
    if UPDATE:
        RELIABILITY.write_text(text)


@pytest.mark.parametrize(("path", "pattern", "figure"), claims(),
                         ids=lambda x: x.name if isinstance(x, Path) else None)  # fmt: skip
def test_the_docs_state_the_counts_the_tests_have(path, pattern, figure):
    text = path.read_text()
    found = re.findall(pattern, text)
    assert len(found) == 1, f"{path.name}: {pattern!r} found {len(found)} times"
    if UPDATE and found[0] != figure:
        path.write_text(re.sub(pattern, lambda m: m.group(0).replace(m.group(1), figure), text))
        return
    assert found[0] == figure


def test_the_catalogue_reproduces_every_documented_code():
    # the figure the docs state is the number of codes test_each_code_is_produced produces
    assert cases_per_run("test_errors_catalogue", "test_each_code_is_produced") == error_codes()
