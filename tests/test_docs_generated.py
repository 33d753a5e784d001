"""Every command output and figure shown in README.md and docs/*.md is the real command's, as
``scripts/docs.py`` writes it; every relative link of those pages resolves.

A failure names the stale block; ``python scripts/docs.py --write`` regenerates it (review the diff).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ROOT


@cache
def docs_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kvcalc_docs_script", ROOT / "scripts" / "docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@cache
def _regenerated() -> dict[Path, tuple[str, list, list]]:
    docs = docs_script()
    return {page: docs.regenerate(page.read_text(encoding="utf-8"), page) for page in docs.pages()}


def _names(items) -> list[str]:
    return [f"{i.page.relative_to(ROOT)}:{i.line}: {i.what}" for i in items]


def test_every_shown_output_and_figure_is_current():
    stale = [s for _, found, _ in _regenerated().values() for s in found]
    assert _names(stale) == [], "stale; run `python scripts/docs.py --write` and review the diff"


def test_the_pages_show_generated_outputs():
    docs = docs_script()
    texts = [p.read_text(encoding="utf-8") for p in docs.pages()]
    blocks = sum(len(docs.BLOCK.findall(t)) for t in texts)
    figures = sum(len(docs.FIGURE.findall(t)) for t in texts)
    assert blocks >= 10 and figures >= 10
    assert [n for t in texts for n in docs.unclosed_markers(t)] == []
    # a line that starts with a figure would be an HTML block, cutting its paragraph in two
    assert [n for t in texts for n in docs.figures_starting_a_line(t)] == []


def test_blocks_that_need_an_extra_are_current_where_it_is_installed():
    unchecked = [s for _, _, skipped in _regenerated().values() for s in skipped]
    if unchecked:
        pytest.skip("not checked: " + "; ".join(_names(unchecked)))
    assert unchecked == []


def test_the_script_runs_the_filters_a_shell_would():
    docs = docs_script()
    command = docs.parse("exit=1 kvcalc plan x | grep -E 'a|b' | grep -v c | head -n 2")
    assert command.argv == ["plan", "x"] and command.exit_code == 1
    lines = ["a1", "c a", "b2", "x", "a3"]
    for keep in command.filters:
        lines = keep(lines)
    assert lines == ["a1", "b2"]
    with pytest.raises(ValueError, match="unknown filter"):
        docs.parse("kvcalc plan x | sort")


#: [text](target) outside code; the target without its #anchor
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", docs_script().pages(), ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(link)
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(link)
    assert broken == []


def test_a_figure_reads_the_json_of_a_command_the_page_names(tmp_path):
    docs = docs_script()
    text = (
        "<!-- docs.py: let l8 = kvcalc inspect llama-3.1-8b --json -->\n"
        "Llama-3.1-8B holds <!-- docs.py: {kv_bytes_per_token:,} from l8 -->1<!-- /docs.py --> B"
        " a token.\n"
    )
    new, stale, _ = docs.regenerate(text, tmp_path / "page.md")
    # 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B (bf16) = 131,072
    assert "-->131,072<!--" in new and len(stale) == 1
    assert docs.unclosed_markers(new) == []
    with pytest.raises(ValueError, match="let line"):
        docs.regenerate(
            "<!-- docs.py: {x} from kvcalc inspect m --json -->1<!-- /docs.py -->", tmp_path
        )
