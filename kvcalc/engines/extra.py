"""The engine-specific ``extra`` options (``-E key=value``) and ``--engine-version`` strings: the
checks every engine module shares. Bad values raise :class:`~kvcalc.errors.InputError` with
``invalid-input``, unknown keys ``unknown-engine-option``, unknown versions
``unknown-engine-version``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, overload

from kvcalc.errors import InputError
from kvcalc.units import MAX_SIZE_BYTES, short_int

#: the largest integer an engine option takes (a petabyte, for the options in bytes)
MAX_OPTION_INT = MAX_SIZE_BYTES


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive(name: str, value: Any) -> None:
    if not is_int(value) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}", code="invalid-input")


def check_extra(engine: str, extra: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    """Refuse ``extra`` keys this engine does not read (a typo would otherwise be ignored)."""
    unknown = sorted(set(extra) - set(allowed))
    if unknown:
        raise InputError(
            f"{engine} does not take option(s) {', '.join(unknown)}",
            hint="known: " + (", ".join(allowed) or "none"),
            code="unknown-engine-option",
        )


@overload
def extra_int(extra: Mapping[str, Any], key: str, default: int, *, minimum: int = 1) -> int: ...
@overload
def extra_int(
    extra: Mapping[str, Any], key: str, default: int | None, *, minimum: int = 1
) -> int | None: ...
def extra_int(
    extra: Mapping[str, Any], key: str, default: int | None, *, minimum: int = 1
) -> int | None:
    """An integer option; None only where the default is None (an explicit null is refused)."""
    value = extra.get(key, default)
    if value is None and default is None:
        return None
    if not is_int(value) or not minimum <= value <= MAX_OPTION_INT:
        shown = short_int(value) if is_int(value) else repr(value)
        raise InputError(
            f"{key} must be an integer from {minimum} to {MAX_OPTION_INT:,}, got {shown}",
            code="invalid-input",
        )
    return value


@overload
def extra_fraction(extra: Mapping[str, Any], key: str, default: float) -> float: ...
@overload
def extra_fraction(extra: Mapping[str, Any], key: str, default: float | None) -> float | None: ...
def extra_fraction(extra: Mapping[str, Any], key: str, default: float | None) -> float | None:
    """A number in (0, 1] (sglang ``swa_full_tokens_ratio``, ``mem_fraction_static``)."""
    value = extra.get(key, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InputError(f"{key} must be a number in (0, 1], got {value!r}", code="invalid-input")
    return float(value)


@overload
def extra_bool(extra: Mapping[str, Any], key: str, default: bool) -> bool: ...
@overload
def extra_bool(extra: Mapping[str, Any], key: str, default: bool | None) -> bool | None: ...
def extra_bool(extra: Mapping[str, Any], key: str, default: bool | None) -> bool | None:
    value = extra.get(key, default)
    if (value is not None or default is not None) and not isinstance(value, bool):
        raise InputError(f"{key} must be true or false, got {value!r}", code="invalid-input")
    return value


@overload
def extra_choice(
    extra: Mapping[str, Any], key: str, default: str, choices: tuple[str, ...]
) -> str: ...
@overload
def extra_choice(
    extra: Mapping[str, Any], key: str, default: str | None, choices: tuple[str, ...]
) -> str | None: ...
def extra_choice(
    extra: Mapping[str, Any], key: str, default: str | None, choices: tuple[str, ...]
) -> str | None:
    value = extra.get(key, default)
    if (value is not None or default is not None) and value not in choices:
        raise InputError(
            f"{key} must be one of {', '.join(choices)}, got {value!r}", code="invalid-input"
        )
    return value


@functools.lru_cache(maxsize=256)
def version_tuple(text: str) -> tuple[int, ...] | None:
    """``"0.31.0"`` → ``(0, 31, 0)``; None when it is not dotted numbers (``"v0.8.5"`` is fine).
    Kept: a plan asks it of the same few release names many times."""
    parts = text.strip().lstrip("vV").split(".")
    try:
        return tuple(int(p) for p in parts if p != "")
    except ValueError:
        return None


def unknown_version(engine: str, version: str, versions: tuple[str, ...]) -> InputError:
    return InputError(
        f"{engine} has no modelled version {version!r}",
        hint="choose one of: " + ", ".join(versions),
        code="unknown-engine-version",
    )
