"""Stable JSON output: the result object's ``to_dict()``, keys in declaration order, 2-space indent."""

from __future__ import annotations

import json
import math
from typing import Any

from kvcalc.render import console


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return round(value, 6)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(data: Any) -> str:
    return json.dumps(_clean(data), indent=2, ensure_ascii=False)


def print_json(data: Any) -> None:
    console.out(dumps(data))
