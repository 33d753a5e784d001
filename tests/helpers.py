"""Helpers for tests: bundled configs as fixtures."""

from __future__ import annotations

from kvcalc.hfconfig import parse_config
from kvcalc.registry import find_bundled


def bundled_shape(reference: str):
    """A bundled model's ModelShape, parsed from its real config.json."""
    bundled = find_bundled(reference)
    assert bundled is not None, reference
    return parse_config(bundled.load(), name=bundled.hf_id)


def bundled_config(reference: str) -> dict:
    bundled = find_bundled(reference)
    assert bundled is not None, reference
    return bundled.load()
