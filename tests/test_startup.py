"""The fast path stays fast: no heavy module is imported by inspect/plan on a bundled model.

This checks imports, not time (timing is `bench/startup.py`'s job)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "torch",
    "huggingface_hub",
    "yaml",
    "transformers",
    "safetensors",
    "numpy",
    "gguf",
    "llama_cpp",
    "httpx",
    "requests",
)


def imported_heavy(args: list[str]) -> list[str]:
    code = (
        "import sys, json\n"
        "from kvcalc.cli.app import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "llama-3.1-8b"],
        ["inspect", "deepseek-v3", "--json"],
        ["models"],
        ["plan", "llama-3.1-8b", "--gpu", "H100-80GB"],
    ],
)
def test_no_heavy_imports(args):
    assert imported_heavy(args) == []
