"""Every file under ``tests/fixtures/`` says where it came from (``docs/testing.md``, "Fixture
provenance"): the engine and its version, the torch and transformers versions, the recording tool
and its version or checksum, the date and the command.

A JSON fixture whose top level is an object carries a ``provenance`` object; any other file
(a real ``config.json`` kept as published, YAML inputs, Markdown, binaries) is named in its
folder's ``PROVENANCE.yaml`` (``files: {NAME: {...}}``) or has a ``NAME.provenance.yaml`` beside
it (or in the ``PROVENANCE.yaml`` of a folder above, keyed by the path from there: where a test
reads every ``*.yaml`` of a folder). What is not known is written ``unknown``; a field that does not apply says ``n/a`` and why.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
import yaml

FIXTURES = Path(__file__).parent / "fixtures"
#: the fields every provenance block has (docs/testing.md lists what each holds)
REQUIRED = ("kind", "engine", "torch", "transformers", "tool", "recorded", "command")
#: what produced the file
KINDS = {
    "engine-recording",  # an engine's own code run by a reference tool (vLLM/SGLang harnesses)
    "engine-log",  # lines an engine printed (a run, an issue, a public log)
    "replay",  # an engine's code path replayed by a script of the project (bench/)
    "published-config",  # a config.json as its publisher released it (the Hub)
    "hand-written",  # inputs written for the tests (deployment files, malformed files)
}
SIDECAR_SUFFIX = ".provenance.yaml"
FOLDER_SIDECAR = "PROVENANCE.yaml"
#: a local machine path: commands use placeholders ($VLLMENV, shared/model_configs/...)
LOCAL_PATH = re.compile(r"(?<![\w$.])/(?:work|tmp|home|root|Users|mnt|var)/")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def fixture_files() -> list[Path]:
    return sorted(
        p
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name != FOLDER_SIDECAR and not p.name.endswith(SIDECAR_SUFFIX)
    )


def provenance_of(path: Path) -> tuple[dict | None, str]:
    """(the block, where it was found) — embedded, a file sidecar, or the folder's sidecar."""
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = None
        if isinstance(data, dict) and "provenance" in data:
            return data["provenance"], "embedded"
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    if sidecar.exists():
        return yaml.safe_load(sidecar.read_text()), sidecar.name
    for folder in (path.parent, *path.parent.parents):  # the folder's, or a folder above it
        sidecar = folder / FOLDER_SIDECAR
        key = str(path.relative_to(folder))
        if sidecar.exists():
            files = (yaml.safe_load(sidecar.read_text()) or {}).get("files") or {}
            if key in files:
                return files[key], f"{sidecar.relative_to(FIXTURES)}[{key}]"
        if folder == FIXTURES:
            break
    return None, "none"


def problems(block: object) -> list[str]:
    """What a provenance block lacks; empty when it is complete."""
    if not isinstance(block, dict):
        return ["not a mapping"]
    found = []
    for field in REQUIRED:
        value = block.get(field)
        if not isinstance(value, str) or not value.strip():
            found.append(f"{field}: missing or empty")
        elif LOCAL_PATH.search(value):
            found.append(f"{field}: a local path ({value!r}); use a placeholder")
    if block.get("kind") not in KINDS:
        found.append(f"kind: {block.get('kind')!r} is not one of {sorted(KINDS)}")
    recorded = block.get("recorded")
    if isinstance(recorded, str) and recorded != "unknown" and not DATE.match(recorded):
        found.append(f"recorded: {recorded!r} is neither YYYY-MM-DD nor 'unknown'")
    if block.get("kind") == "engine-recording":
        engine = str(block.get("engine", ""))
        if not re.search(r"\d+\.\d+", engine):
            found.append(f"engine: {engine!r} names no version")
        tool = str(block.get("tool", ""))
        if not re.search(r"sha256:[0-9a-f]{12}|\d+\.\d+|unknown", tool):
            found.append(f"tool: {tool!r} gives no version, no sha256 and does not say unknown")
    return found


@pytest.mark.parametrize(
    "path", fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES))
)  # fmt: skip
def test_every_fixture_says_where_it_came_from(path):
    block, where = provenance_of(path)
    assert block is not None, (
        f"{path.relative_to(FIXTURES)} has no provenance: add a 'provenance' object (JSON) or an "
        f"entry in {FOLDER_SIDECAR} (docs/testing.md)"
    )
    assert problems(block) == [], where


def test_sidecars_name_only_files_that_exist():
    for folder in FIXTURES.rglob(FOLDER_SIDECAR):
        files = (yaml.safe_load(folder.read_text()) or {}).get("files") or {}
        assert sorted(n for n in files if not (folder.parent / n).is_file()) == [], folder


def test_the_checker_refuses_an_incomplete_block():
    good = {"kind": "engine-recording", "engine": "vLLM 0.33.0", "torch": "2.14.0",
            "transformers": "5.20.2", "tool": "vllm_reference.py sha256:eae79deff3ab",
            "recorded": "2026-12-02", "command": "$VLLMENV/bin/python vllm_reference.py ..."}  # fmt: skip
    assert problems(good) == []
    assert problems({k: v for k, v in good.items() if k != "torch"}) == [
        "torch: missing or empty"
    ]  # fmt: skip
    local = Path(tempfile.gettempdir()) / "x.py"  # a path of the recording machine
    assert problems(dict(good, command=f"python {local}"))[0].startswith("command: a local path")
    assert problems(dict(good, recorded="yesterday")) != []
    assert problems(dict(good, engine="vLLM")) == ["engine: 'vLLM' names no version"]
    assert problems(dict(good, kind="guess")) != []
