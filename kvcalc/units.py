"""Integer helpers and human sizes. Binary and decimal units are kept apart."""

from __future__ import annotations

import math
import re

from kvcalc.errors import InputError

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": KIB,
    "mib": MIB,
    "gib": GIB,
    "tib": 1 << 40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
#: Sizes above this are refused: no device has a petabyte of memory.
MAX_SIZE_BYTES = 1 << 50


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers, as vLLM's ``cdiv``."""
    return -(a // -b)


def round_up(a: int, multiple: int) -> int:
    """``a`` rounded up to a multiple of ``multiple`` (llama.cpp's ``GGML_PAD``)."""
    return cdiv(a, multiple) * multiple


def parse_size(text: str | int | float, *, bare_unit: str = "b", what: str = "size") -> int:
    """Parse ``20GiB``, ``512MiB``, ``80GB`` or a plain number into bytes.

    A number without a unit is taken in ``bare_unit`` (``"b"`` or ``"gib"``).
    >>> parse_size("20GiB")
    21474836480
    >>> parse_size("80GB")
    80000000000
    >>> parse_size("1.5", bare_unit="gib")
    1610612736
    """
    if isinstance(text, bool):
        raise InputError(f"{what} must be a size, not {text!r}", code="invalid-size")
    if isinstance(text, (int, float)):
        text = repr(text)
    match = _SIZE_RE.match(str(text))
    if not match:
        raise InputError(
            f"{what}: cannot read {text!r} as a size",
            hint="write a number with a unit: 20GiB, 512MiB, 80GB (GB = 10^9, GiB = 2^30)",
            code="invalid-size",
        )
    number, unit = match.groups()
    unit = (unit or bare_unit).lower()
    if unit not in _UNITS:
        raise InputError(
            f"{what}: unknown unit {match.group(2)!r}",
            hint="units: B, KB, MB, GB, TB (powers of 10) and KiB, MiB, GiB, TiB (powers of 2)",
            code="invalid-size",
        )
    value = float(number) * _UNITS[unit]
    if not math.isfinite(value) or value > MAX_SIZE_BYTES:
        raise InputError(f"{what}: {text!r} is too large", code="invalid-size")
    return int(round(value))


def short_int(value: int) -> str:
    """An int for messages: ``1,048,576``, or ``1.00e40`` past 20 digits (never a page of digits)."""
    digits = str(abs(value))
    if len(digits) <= 20:
        return f"{value:,}"
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:3]}e{len(digits) - 1}"


def gib(num_bytes: int | float) -> float:
    """Bytes as GiB (a float, for display only)."""
    return num_bytes / GIB


def format_gib(num_bytes: int | float) -> str:
    """vLLM's ``format_gib``: ``str(round(b / 2**30, 2))`` (so ``10.0``, not ``10.00``)."""
    return f"{round(num_bytes / GIB, 2)}"
