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
#: vLLM's one-letter suffixes (``human_readable_int``): lower case powers of 10, upper case of 2
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_PLAIN_INT = re.compile(r"[+-]?\d+")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
#: a bare number of at least this many is bytes; below it, GiB (where GiB is the bare unit)
BARE_BYTES_FROM = 1 << 20
TOKENS_HINT = "write 32768, 32k (= 32,000) or 32K (= 32,768), as vLLM reads them"
#: Sizes above this are refused: no device has a petabyte of memory.
MAX_SIZE_BYTES = 1 << 50


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers, as vLLM's ``cdiv``."""
    return -(a // -b)


def round_up(a: int, multiple: int) -> int:
    """``a`` rounded up to a multiple of ``multiple`` (llama.cpp's ``GGML_PAD``)."""
    return cdiv(a, multiple) * multiple


def parse_token_count(text: str | int, *, what: str = "value", minimum: int | None = None) -> int:
    """vLLM's ``human_readable_int``: ``25.6k`` → 25,600; ``1K`` → 1,024; ``4096`` → 4,096.

    Lower-case suffixes are powers of 10 and may carry decimals; upper-case ones are powers of 2
    and may not (``1.5K`` is refused, as vLLM refuses it).

    >>> parse_token_count("32k"), parse_token_count("32K"), parse_token_count("1M")
    (32000, 32768, 1048576)
    """
    if isinstance(text, bool):
        raise InputError(f"{what}: expected a token count, got {text!r}", code="invalid-input")
    value = str(text).strip()
    match = _HUMAN_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            result = int(float(number) * _DECIMAL[suffix])
        elif "." in number:
            raise InputError(
                f"{what}: decimals are not allowed with binary suffix {suffix!r} "
                f"in {value!r}; did you mean {number}{suffix.lower()}?",
                code="invalid-input",
            )
        else:
            result = int(number) * _BINARY[suffix]
    elif _PLAIN_INT.fullmatch(value):
        result = int(value)
    else:
        raise InputError(
            f"{what}: expected a token count like 4096, 32k or 32K, got {value[:40]!r}",
            hint=TOKENS_HINT,
            code="invalid-input",
        )
    if minimum is not None and result < minimum:
        raise InputError(
            f"{what}: must be at least {minimum:,}, got {value[:40]!r}", code="invalid-input"
        )
    return result


def parse_size(text: str | int | float, *, bare_unit: str = "b", what: str = "size") -> int:
    """Parse ``20GiB``, ``512MiB``, ``80GB``, vLLM's ``80G``/``80g`` or a plain number into bytes.

    A number without a unit is taken in ``bare_unit`` (``"b"`` or ``"gib"``); with ``"gib"``, a
    bare number of at least :data:`BARE_BYTES_FROM` is bytes (``80000000000``), since no GPU has
    a mebi-GiB. One-letter suffixes are vLLM's: ``80G`` = 80 × 2^30, ``80g`` = 80 × 10^9.

    >>> parse_size("20GiB")
    21474836480
    >>> parse_size("80GB"), parse_size("80g"), parse_size("80G")
    (80000000000, 80000000000, 85899345920)
    >>> parse_size("1.5", bare_unit="gib"), parse_size("80000000000", bare_unit="gib")
    (1610612736, 80000000000)
    """
    if isinstance(text, bool):
        raise InputError(f"{what} must be a size, not {text!r}", code="invalid-size")
    if isinstance(text, (int, float)):
        text = repr(text)
    match = _SIZE_RE.match(str(text))
    if not match:
        raise InputError(
            f"{what}: cannot read {text!r} as a size",
            hint="write a number with a unit: 20GiB, 512MiB, 80GB (GB = 10^9, GiB = 2^30); "
            "a bare number below 1,048,576 is GiB, a larger one bytes",
            code="invalid-size",
        )
    number, unit = match.groups()
    if unit in _DECIMAL or unit in _BINARY:
        return _checked(float(number) * (_DECIMAL.get(unit) or _BINARY[unit]), text, what)
    if not unit and bare_unit == "gib" and float(number) >= BARE_BYTES_FROM:
        unit = "b"
    unit = (unit or bare_unit).lower()
    if unit not in _UNITS:
        raise InputError(
            f"{what}: unknown unit {match.group(2)!r}",
            hint="units: B, KB, MB, GB, TB, k/m/g/t (powers of 10) and KiB, MiB, GiB, TiB, "
            "K/M/G/T (powers of 2); a bare number below 1,048,576 is GiB, a larger one bytes",
            code="invalid-size",
        )
    return _checked(float(number) * _UNITS[unit], text, what)


def _checked(value: float, text: object, what: str) -> int:
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
