"""Rewrite docs/json.md from the result classes (kvcalc/render/json_shapes.py).

    python scripts/json_reference.py

tests/test_json_shapes.py fails while the page differs from what this writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcalc.render.json_shapes import markdown  # noqa: E402

if __name__ == "__main__":
    (ROOT / "docs" / "json.md").write_text(markdown(), encoding="utf-8")
