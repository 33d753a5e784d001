"""Shared by the verify tests: is torch here, and must it be (CI)?"""

from __future__ import annotations

import importlib.util
import os

import pytest


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


HAS_TORCH = _importable("torch")
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
IN_CI = os.environ.get("CI") == "true"

#: torch tests run everywhere torch is installed; in CI they never skip (a missing torch fails them)
needs_torch = pytest.mark.skipif(
    not HAS_TORCH and not IN_CI, reason="torch not installed (the verify extra)"
)
needs_transformers = pytest.mark.skipif(
    not (HAS_TORCH and HAS_TRANSFORMERS) and not IN_CI,
    reason="torch and transformers needed for --run",
)


def cuda_available() -> bool:
    if not HAS_TORCH:
        return False
    import torch

    return torch.cuda.is_available()
