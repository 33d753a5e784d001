"""``scripts/record_registry_families.py`` turns the vLLM reference harness's output into exactly the
rows ``registry_families.json`` holds.

``fixtures/vllm_0_33/harness_output_sample.json`` is the harness's own output (``--batch ...
--out``) for two configs recorded in ``registry_families.json``: sized scenarios, length refusals,
and the scenarios at the length vLLM derives when every requested one was refused
(``extra_entries``), sized or refused (Falcon's 71 heads at TP 8).
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests/fixtures/vllm_0_33/harness_output_sample.json"
FIXTURE = ROOT / "tests/fixtures/vllm_0_33/registry_families.json"
SCRIPT = runpy.run_path(str(ROOT / "scripts/record_registry_families.py"))


@pytest.fixture(scope="module")
def harness() -> dict:
    return json.loads(SAMPLE.read_text())


def test_the_sample_reproduces_the_recorded_rows(harness):
    fixture = json.loads(FIXTURE.read_text())
    assert SCRIPT["check"](harness, fixture) == []
    assert SCRIPT["main"]([str(SAMPLE), "--check"]) == 0


def test_the_sample_covers_every_kind_of_row(harness):
    rows = [r for rs in SCRIPT["rows_by_model"](harness).values() for r in rs]
    assert any("groups" in r for r in rows)
    assert any(r.get("error", "").startswith("ValidationError: ") for r in rows)
    derived = [r for r in rows if r["max_model_len"] is None]
    # at the derived length: sized, and refused (TP 8 over 71 heads) with the length resolved
    assert {"groups" in r for r in derived} == {True, False}
    assert all(r["derived_max_model_len"] == 2048 for r in derived)


def test_a_changed_row_is_caught(harness):
    fixture = json.loads(FIXTURE.read_text())
    name = harness["entries"][0]["model"]
    fixture["models"][name]["scenarios"][0]["num_blocks"] += 1
    assert SCRIPT["check"](harness, fixture) == [
        f"{name}: recorded rows differ from the harness output"
    ]


def test_a_bare_assert_is_named_by_its_source_line():
    entry = {
        "error_type": "AssertionError",
        "error": "",
        "traceback_tail": ['  File "<site-packages>/vllm/x.py", line 1, in f',
                           "    assert self.total_num_heads % tp_size == 0",
                           "AssertionError"],
    }  # fmt: skip
    assert (
        SCRIPT["error_text"](entry) == "AssertionError: assert self.total_num_heads % tp_size == 0"
    )


def test_write_puts_config_source_and_rows(harness, tmp_path):
    name = harness["entries"][0]["model"]
    fixture = json.loads(FIXTURE.read_text())
    config = fixture["models"][name]["config"]
    (tmp_path / name).write_text(json.dumps(config))
    out = tmp_path / "fixture.json"
    out.write_text(json.dumps({"provenance": {}, "models": {}}))
    sources = tmp_path / "sources.json"
    sources.write_text(json.dumps({m: "a source" for m in SCRIPT["rows_by_model"](harness)}))
    for m in SCRIPT["rows_by_model"](harness):
        (tmp_path / m).write_text(json.dumps(fixture["models"][m]["config"]))
    args = [str(SAMPLE), "--write", "--fixture", str(out), "--configs", str(tmp_path)]
    assert SCRIPT["main"]([*args, "--sources", str(sources)]) == 0
    written = json.loads(out.read_text())["models"][name]
    assert written == {"source": "a source", "config": config,
                       "scenarios": fixture["models"][name]["scenarios"]}  # fmt: skip


def test_the_docs_quote_the_fixture_counts():
    """docs/engines.md says how many configs, scenarios and refusals the fixture holds."""
    models = json.loads(FIXTURE.read_text())["models"].values()
    rows = [r for m in models for r in m["scenarios"]]
    refused = sum("error" in r for r in rows)
    text = " ".join((ROOT / "docs/engines.md").read_text("utf-8").split())
    assert f"{len(models)} configs, {len(rows)} scenarios, {refused} of them vLLM's" in text
