"""The counts the docs state are written by ``scripts/docs.py`` from the tests themselves (each
test's ``@settings(max_examples=...)`` times its ``parametrize`` cases) and from the source (the
error codes); ``tests/test_docs_generated.py`` fails when a page is stale. These tests hold the
script's lists to the pages and the catalogue."""

from __future__ import annotations

import re

from conftest import ROOT
from test_docs_generated import docs_script

RELIABILITY = ROOT / "docs" / "reliability.md"


def _fuzz_table_tests() -> set[str]:
    text = RELIABILITY.read_text(encoding="utf-8")
    start = text.index("## Fuzz cases per CI run")
    section = text[start : text.index("\n## ", start + 1)]
    return {f"{m}::{t}" for m, t in re.findall(r"`(test_\w+)\.py::(test_\w+)`", section)}


def test_the_fuzz_figures_count_every_test_of_the_fuzz_table():
    docs = docs_script()
    counted = set(docs.FUZZ_CLI) | set(docs.FUZZ_LIBRARY)
    assert counted == _fuzz_table_tests()
    assert len(counted) >= 12


def test_the_catalogue_reproduces_every_code_kvcalc_can_print():
    # docs/reliability.md's "every error code produced (N)" is the source's count, and it is the
    # number of codes test_each_code_is_produced produces
    docs = docs_script()
    documented = re.findall(r"^### `[a-z0-9-]+`$", (ROOT / "docs" / "errors.md").read_text(), re.M)
    cases = docs.figures()["cases"]["test_errors_catalogue::test_each_code_is_produced"]
    assert docs.error_codes() == len(documented) == cases
