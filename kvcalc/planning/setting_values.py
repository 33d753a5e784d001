"""How each kind of setting value is read: :class:`Kind` and its parsers.

:mod:`kvcalc.planning.settings` gives every setting a kind; the command line, deployment files and
``vllm serve`` commands all read its values through :func:`read_value`, so one kind has one
reading and one error text (``--block-size: must be at least 1, got 0``). Pure: imports only
:mod:`kvcalc.errors` and :mod:`kvcalc.units` (and vLLM's graph modes when one is read).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Any

from kvcalc.errors import InputError
from kvcalc.units import parse_size, parse_token_count

__all__ = ["TOKENS_HELP", "WEIGHT_DTYPES", "Kind", "parse_weight_dtype", "read_value"]


class Kind(str, Enum):
    """How a value is read (the deployment-file kinds of :mod:`kvcalc.deploy.keys` too)."""

    TEXT = "text"
    COUNT = "count"  # a whole number ≥ minimum
    TOKENS = "tokens"  # a count in vLLM's spelling: 32k = 32,000, 32K = 32,768
    FRACTION = "fraction"  # a number in (0, 1]
    THRESHOLD = "threshold"  # a share in [0, 1), or "10%"
    BOOL = "bool"
    SIZE = "size"  # bytes: 80GB, 79.2GiB, 80G; a bare number below 1,048,576 is GiB
    ENGINE = "engine"
    WEIGHT_DTYPE = "weight_dtype"
    CACHE_DTYPE = "cache_dtype"
    GPU = "gpu"
    OPTIONS = "options"  # engine knobs: KEY=VALUE on the command line, a mapping in a file
    COUNTS = "counts"  # whole numbers ≥ minimum: "1,2,4,8" or "1 2 4 8" (a list in a file)
    GRAPH_MODE = "graph_mode"  # vLLM's CUDA graph mode, any case: full_and_piecewise
    JSON = "json"  # a JSON object: text on the command line, a mapping in a file


#: the weight dtypes vLLM's ``--dtype`` takes, and what each spelling means
WEIGHT_DTYPE_NAMES = {
    "auto": None, "bfloat16": "bfloat16", "float16": "float16", "half": "float16",
    "float32": "float32", "float": "float32", "bf16": "bfloat16", "fp16": "float16",
    "fp32": "float32",
}  # fmt: skip
WEIGHT_DTYPES = tuple(WEIGHT_DTYPE_NAMES)
TOKENS_HELP = "32k = 32,000, 32K = 32,768, as vLLM reads them"
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_PLAIN_INT = re.compile(r"\s*[+-]?\d+\s*")


def _text(text: Any, what: str, minimum: int | None) -> str:
    value = str(text)
    if not value.strip():
        raise InputError(f"{what}: empty value", code="invalid-input")
    return value


def _count(text: Any, what: str, minimum: int | None) -> int:
    if isinstance(text, bool) or not _PLAIN_INT.fullmatch(str(text)):
        raise InputError(f"{what}: expected an integer, got {str(text)[:40]!r}", code="invalid-input")  # fmt: skip
    value = int(str(text))
    if minimum is not None and value < minimum:
        raise InputError(f"{what}: must be at least {minimum:,}, got {value}", code="invalid-input")  # fmt: skip
    return value


def _tokens(text: Any, what: str, minimum: int | None) -> int:
    return parse_token_count(text, what=what, minimum=minimum)


def _number(text: Any, what: str, minimum: int | None) -> float:
    try:
        return float(str(text))
    except ValueError:
        raise InputError(f"{what}: expected a number, got {str(text)[:40]!r}", code="invalid-input") from None  # fmt: skip


def _threshold(text: Any, what: str, minimum: int | None) -> float:
    match = _PERCENT.match(str(text))
    value = float(match.group(1)) / 100 if match else _number(text, what, minimum)
    if not 0 <= value < 1:
        raise InputError(f"{what}: must be in [0, 1) or a percentage under 100%, got {text!r}",
                         hint="e.g. 0.1 or 10%", code="invalid-input")  # fmt: skip
    return value


def _bool(text: Any, what: str, minimum: int | None) -> bool:
    if isinstance(text, bool):
        return text
    low = str(text).strip().lower()
    if low not in ("true", "false"):
        raise InputError(f"{what}: expected true or false, got {text!r}", code="invalid-input")
    return low == "true"


def _size(text: Any, what: str, minimum: int | None) -> int:
    return parse_size(text, bare_unit="gib", what=what)


def parse_weight_dtype(text: Any, *, what: str = "--dtype") -> str | None:
    """vLLM's ``--dtype``: ``None`` for ``auto``, else the canonical name (``half`` → ``float16``)."""
    low = str(text).strip().lower()
    if low not in WEIGHT_DTYPE_NAMES:
        raise InputError(f"{what}: unknown weight dtype {str(text)[:40]!r}",
                         hint="choose from: " + ", ".join(WEIGHT_DTYPES), code="invalid-input")  # fmt: skip
    return WEIGHT_DTYPE_NAMES[low]


def _option(text: Any, what: str, minimum: int | None) -> tuple[str, Any]:
    """``n_seq_max=4`` → ``("n_seq_max", 4)``: numbers and true/false read as such."""
    key, sep, raw = str(text).partition("=")
    if not sep or not key.strip():
        raise InputError(f"{what} needs KEY=VALUE, got {text!r}", code="invalid-input")
    low = raw.strip().lower()
    value: Any = raw.strip()
    if low in ("true", "false"):
        value = low == "true"
    else:
        for number in (int, float):
            try:
                value = number(raw)
                break
            except ValueError:
                pass
    return key.strip(), value


def _counts(text: Any, what: str, minimum: int | None) -> tuple[int, ...]:
    """``"1,2,4,8"``, ``"1 2 4 8"``, ``"[1, 2, 4]"`` or a list → ``(1, 2, 4, 8)``."""
    items = (
        text if isinstance(text, (list, tuple)) else re.split(r"[\s,]+", str(text).strip("[] \t"))
    )
    items = [i for i in items if not (isinstance(i, str) and not i.strip())]
    if not items:
        raise InputError(f"{what}: expected one or more numbers, got {str(text)[:40]!r}",
                         hint="e.g. 1,2,4,8", code="invalid-input")  # fmt: skip
    return tuple(_count(i, what, minimum) for i in items)


def _graph_mode(text: Any, what: str, minimum: int | None) -> str:
    from kvcalc.engines.vllm.cudagraphs import parse_graph_mode

    return parse_graph_mode(_text(text, what, minimum), what=what).value


def _json(text: Any, what: str, minimum: int | None) -> Any:
    """A JSON object, kept as given: a mapping from a file, the text from the command line (the
    engine's reader parses it and checks its keys: vLLM's ``--speculative-config``)."""
    if isinstance(text, dict):
        return text
    return _text(text, what, minimum)


_PARSERS: dict[Kind, Callable[[Any, str, int | None], Any]] = {
    Kind.TEXT: _text, Kind.COUNT: _count, Kind.TOKENS: _tokens, Kind.FRACTION: _number,
    Kind.THRESHOLD: _threshold, Kind.BOOL: _bool, Kind.SIZE: _size, Kind.ENGINE: _text,
    Kind.WEIGHT_DTYPE: lambda t, what, _: parse_weight_dtype(t, what=what), Kind.CACHE_DTYPE: _text,
    Kind.GPU: _text, Kind.OPTIONS: _option, Kind.COUNTS: _counts, Kind.GRAPH_MODE: _graph_mode,
    Kind.JSON: _json,
}  # fmt: skip


def read_value(kind: Kind, text: Any, *, what: str, minimum: int | None = None) -> Any:
    """``text`` (a command-line argument, a file's value, a serving command's value) read as
    ``kind``; ``what`` names the setting in the error (``--max-model-len``)."""
    return _PARSERS[kind](text, what, minimum)
