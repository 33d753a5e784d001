"""Reading one value of a deployment file for its key: :func:`convert` → the field's value, or
:class:`BadValue` with a one-line reason.

A :class:`Key` names its kind (how a value is read), its range, the
:class:`~kvcalc.planning.inputs.PlanInputs` field it fills and a help line; the tables of keys are
in :mod:`kvcalc.deploy.keys`. Strings are read by the same parsers as the command line's
(:func:`kvcalc.units.parse_token_count`, :func:`kvcalc.units.parse_size`); YAML's own types
(numbers, booleans, lists) are checked here.
"""

from __future__ import annotations

import math
import re
from typing import Any

from kvcalc.frozen import frozen
from kvcalc.planning.inputs import MAX_COUNT, VERDICTS
from kvcalc.units import short_int

#: the verdicts a deployment may be allowed to have; the others mean it would not start
ALLOWABLE_VERDICTS = ("ok", "tight", "below-target")
DEFAULT_ALLOWED = ("ok", "tight")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
#: a list of sizes written as text: ``"1,2,4"``, ``"1 2 4"``, ``"[1, 2, 4]"``
COUNTS_PATTERN = r"^\s*\[?\s*\d+(\s*[,\s]\s*\d+)*\s*\]?\s*$"


class BadValue(Exception):
    """A value that does not fit its key; ``str()`` is the reason."""


@frozen
class Key:
    name: str
    kind: str
    help: str
    #: the PlanInputs field it fills (None: used by kvcalc check itself)
    field: str | None = None
    minimum: int | float | None = None
    choices: tuple[str, ...] = ()
    examples: tuple[Any, ...] = ()


def describe(value: Any) -> str:
    """A value as a message shows it: ``'abc'``, ``true``, ``null``, ``a list``, ``1.5``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**20 else short_int(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    return f"{type(value).__name__} {str(value)[:60]}"


def _int(value: Any, key: Key) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and math.isfinite(value):
            value = int(value)
        else:
            raise BadValue(f"expected a whole number, got {describe(value)}")
    if key.minimum is not None and value < key.minimum:
        raise BadValue(f"must be at least {key.minimum}, got {short_int(value)}")
    if value > MAX_COUNT:
        raise BadValue(f"must be at most {MAX_COUNT:,}, got {short_int(value)}")
    return value


def _number(value: Any, key: Key) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(f"expected a number, got {describe(value)}")
    if isinstance(value, int) and abs(value) > MAX_COUNT:
        raise BadValue(f"must be at most {MAX_COUNT:,}, got {short_int(value)}")
    if not math.isfinite(value):
        raise BadValue(f"expected a number, got {describe(value)}")
    if key.minimum is not None and value < key.minimum:
        raise BadValue(f"must be at least {key.minimum}, got {describe(value)}")
    if value > MAX_COUNT:
        raise BadValue(f"must be at most {MAX_COUNT:,}, got {describe(value)}")
    return value


def _tokens(value: Any, key: Key) -> int:
    if isinstance(value, str):
        from kvcalc.errors import InputError
        from kvcalc.units import parse_token_count

        try:
            value = parse_token_count(value, what=key.name)
        except InputError:
            raise BadValue(
                f"expected a token count like 32768, 32k or 32K, got {describe(value)}"
            ) from None
    return _int(value, key)


def _fraction(value: Any, key: Key) -> float:
    number = _number(value, key)
    if not 0 < number <= 1:
        raise BadValue(f"must be in (0, 1], got {describe(value)} (a fraction: 0.9 is 90%)")
    return float(number)


def _percent(value: Any) -> float | None:
    if isinstance(value, str) and (match := _PERCENT.match(value)):
        return float(match.group(1)) / 100
    return None


def _threshold(value: Any, key: Key) -> float:
    share = _percent(value)
    if share is None:
        share = _number(value, key)
    if not 0 <= share < 1:
        raise BadValue(f"must be in [0, 1) or a percentage under 100%, got {describe(value)}")
    return float(share)


def _size(value: Any, key: Key) -> int:
    from kvcalc.errors import InputError
    from kvcalc.units import parse_size

    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadValue(f"expected a size like 80GB or 20GiB, got {describe(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise BadValue(f"expected a size like 80GB or 20GiB, got {describe(value)}")
    if isinstance(value, (int, float)) and value < 0:
        raise BadValue(f"must not be negative, got {describe(value)}")
    try:
        size = parse_size(value, bare_unit="gib", what=key.name)
    except InputError as exc:
        if "too large" in exc.message:
            raise BadValue(f"{describe(value)} is too large") from None
        raise BadValue(
            f"cannot read {describe(value)} as a size: write 80GB (10^9 bytes), "
            "79.2GiB (2^30 bytes) or a bare number of GiB"
        ) from None
    if key.minimum is not None and size < key.minimum:
        raise BadValue(f"must be more than 0, got {describe(value)}")
    return size


def _headroom(value: Any, key: Key) -> tuple[str, float]:
    share = _percent(value)
    if share is not None:
        if share >= 1:
            raise BadValue(f"a share of the KV pool must be under 100%, got {describe(value)}")
        return ("fraction", share)
    bare = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]*\.?[0-9]+\s*", value):
        bare = float(value)
    if bare is not None and 0 < bare < 1:
        # 0.1 reads as 10% next to tight_threshold: 0.1, but a bare size is GiB: refuse to guess
        raise BadValue(
            f"{describe(value)} is ambiguous: write a share of the KV pool "
            f"({bare:.0%}) or a size ({bare:g}GiB)"
        )
    return ("bytes", _size(value, key))


def _text(value: Any, key: Key) -> str:
    if not isinstance(value, str):
        raise BadValue(f"expected a string, got {describe(value)}")
    if not value.strip():
        raise BadValue("must not be empty")
    return value.strip()


def _choice(value: Any, key: Key) -> str:
    text = _text(value, key)
    if text.lower() not in key.choices:
        raise BadValue(
            f"unknown {key.name} {text!r}"
            + suggest(text.lower(), key.choices)
            + f" (choose from: {', '.join(key.choices)})"
        )
    return text.lower()


def _bool(value: Any, key: Key) -> bool:
    if not isinstance(value, bool):
        raise BadValue(f"expected true or false, got {describe(value)}")
    return value


def _cache_dtype(value: Any, key: Key) -> str:
    from kvcalc.engines.dtype_names import known_names

    text = _text(value, key)
    names = known_names()  # the engine, once known, refuses what it does not take
    if text.strip().lower() not in names:
        close = suggest(text.lower(), names)
        raise BadValue(
            f"unknown kv_cache_dtype {text!r}" + (close or f" (choose from: {', '.join(names)})")
        )
    return text


def _gpu(value: Any, key: Key) -> str:
    from kvcalc.errors import KvcalcError
    from kvcalc.model.gpus import get_gpu

    text = _text(value, key)
    try:
        get_gpu(text)
    except KvcalcError as exc:
        hint = exc.hint or ""
        close = re.match(r"(did you mean [^?]*\?)", hint)
        raise BadValue(
            exc.message + (f"; {close.group(1)}" if close else "") + " (see `kvcalc gpus`)"
        ) from None
    return text


def _verdicts(value: Any, key: Key) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise BadValue(f"expected a list of verdicts like [ok, tight], got {describe(value)}")
    out = []
    for item in value:
        if not isinstance(item, str) or item not in VERDICTS:
            raise BadValue(
                f"unknown verdict {describe(item)}"
                + (suggest(item, VERDICTS) if isinstance(item, str) else "")
                + f" (verdicts: {', '.join(VERDICTS)})"
            )
        if item not in ALLOWABLE_VERDICTS:
            raise BadValue(
                f"{item!r} cannot be allowed: a deployment that would not start always "
                "fails (use --exit-zero for a report-only run)"
            )
        out.append(item)
    return tuple(dict.fromkeys(out))


def _options(value: Any, key: Key) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, dict):
        raise BadValue(f"expected a mapping of engine options, got {describe(value)}")
    for name, item in value.items():
        if isinstance(item, (list, dict)) or item is None:
            raise BadValue(f"option {name!r} must be a plain value, got {describe(item)}")
    return tuple(value.items())


def _counts(value: Any, key: Key) -> tuple[int, ...]:
    if isinstance(value, str):
        if not re.fullmatch(COUNTS_PATTERN, value):
            raise BadValue(f"expected whole numbers like 1,2,4,8, got {describe(value)}")
        value = [int(v) for v in re.split(r"[\s,]+", value.strip("[] \t")) if v]
    if not isinstance(value, list) or not value:
        raise BadValue(f"expected a list of whole numbers like [1, 2, 4, 8], got {describe(value)}")
    return tuple(_int(item, key) for item in value)


def _json(value: Any, key: Key) -> Any:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        import json

        try:
            data = json.loads(value)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return value
    raise BadValue(f"expected a mapping (or a JSON object as text), got {describe(value)}")


_CONVERTERS = {
    "text": _text, "count": _int, "number": _number, "tokens": _tokens, "fraction": _fraction,
    "threshold": _threshold, "size": _size, "headroom": _headroom, "choice": _choice,
    "bool": _bool, "cache_dtype": _cache_dtype, "gpu": _gpu, "verdicts": _verdicts,
    "options": _options, "counts": _counts, "json": _json,
}  # fmt: skip


def convert(key: Key, value: Any) -> Any:
    """``value`` (as ``safe_load`` read it) read for ``key``; :class:`BadValue` if it does not fit."""
    return _CONVERTERS[key.kind](value, key)


def suggest(word: str, candidates: Any) -> str:
    """``"; did you mean 'max_model_len'?"`` when one candidate is close, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
