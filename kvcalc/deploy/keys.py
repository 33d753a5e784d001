"""Every key a deployment file may hold, in one table: the validator and the JSON Schema both read it.

A :class:`Key` names its kind (how a value is read), its range, the
:class:`~kvcalc.planning.inputs.PlanInputs` field it fills, and a help line. :func:`convert` turns a
YAML value into that field's value or raises :class:`BadValue` with a one-line reason;
:mod:`kvcalc.deploy.schema` turns the same table into the published JSON Schema, so the two cannot
drift apart.

Kinds: ``text`` (non-empty string), ``count`` (integer ≥ ``minimum``), ``tokens`` (a count, or
vLLM's ``32k``/``32K`` spelling), ``fraction`` (number in (0, 1]), ``threshold`` (fraction in
[0, 1) or ``"10%"``), ``bool``, ``size`` (``"80GB"``, ``"20GiB"``; a bare number is GiB),
``headroom`` (a size, or a percentage of the KV pool), ``verdicts`` (list of verdict names),
``choice`` (one of ``choices``), ``cache_dtype``, ``gpu``, ``options`` (a mapping of engine knobs)
and ``section`` (a nested mapping: ``workload``, ``requirements``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kvcalc.engines.names import ALIAS_SPELLINGS, EngineName
from kvcalc.planning.inputs import MAX_COUNT, VERDICTS
from kvcalc.units import short_int

#: the verdicts a deployment may be allowed to have; the others mean it would not start
ALLOWABLE_VERDICTS = ("ok", "tight", "below-target")
DEFAULT_ALLOWED = ("ok", "tight")
ENGINES = tuple(name.value for name in EngineName)
ENGINE_ALIASES = ALIAS_SPELLINGS
WEIGHT_DTYPES = ("auto", "bfloat16", "float16", "half", "float32", "float", "bf16", "fp16", "fp32")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
HUMAN_INT_PATTERN = r"^\s*\d+(\.\d+)?[kmgt]\s*$|^\s*\d+[KMGT]\s*$|^\s*\d+\s*$"
SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*([kKmMgGtT][iI]?[bB]|[bB])?\s*$"
PERCENT_PATTERN = r"^\s*\d+(\.\d+)?\s*%\s*$"


class BadValue(Exception):
    """A value that does not fit its key; ``str()`` is the reason."""


@dataclass(frozen=True, kw_only=True)
class Key:
    name: str
    kind: str
    help: str
    #: the PlanInputs field it fills (None: used by kvcalc check itself)
    field: str | None = None
    minimum: int | float | None = None
    choices: tuple[str, ...] = ()
    examples: tuple[Any, ...] = ()


def _k(name: str, kind: str, help: str, **kw: Any) -> Key:
    return Key(name=name, kind=kind, help=help, **kw)


DEPLOYMENT_KEYS: tuple[Key, ...] = (
    _k("name", "text", "Name shown in reports (default: the file name, with the entry's index)."),
    _k(
        "model",
        "text",
        "Bundled model (`kvcalc models`), config path (relative to this file) or "
        "Hub id `org/name[@revision]`.",
        examples=("llama-3.1-8b", "Qwen/Qwen3-8B"),
    ),
    _k("revision", "text", "Hub revision (branch, tag or commit) of a Hub model."),
    _k(
        "command",
        "text",
        "The serving command, e.g. `vllm serve MODEL --max-model-len 32k -tp 2`;"
        " its flags fill the keys not given here (and must agree with those given).",
    ),
    _k("engine", "choice", "Serving engine.", field="engine", choices=ENGINES + ENGINE_ALIASES),
    _k(
        "engine_version",
        "text",
        "Engine version whose defaults apply (vLLM 0.33, 0.21, ...).",
        field="engine_version",
        examples=("0.33",),
    ),
    _k("gpu", "gpu", "GPU from the catalog (`kvcalc gpus`).", field="gpu", examples=("H100-80GB",)),
    _k(
        "gpu_memory",
        "size",
        "Memory per GPU instead of `gpu`: `80GB`, `79.2GiB`; a bare number is GiB.",
        field="gpu_memory_bytes",
        minimum=1,
    ),
    _k(
        "num_gpus",
        "count",
        "GPUs in all (default tensor_parallel_size × pipeline_parallel_size).",
        field="num_gpus",
        minimum=1,
    ),
    _k(
        "tensor_parallel_size",
        "count",
        "Tensor-parallel ranks (vLLM -tp).",
        field="tensor_parallel_size",
        minimum=1,
    ),
    _k(
        "pipeline_parallel_size",
        "count",
        "Pipeline stages (vLLM -pp).",
        field="pipeline_parallel_size",
        minimum=1,
    ),
    _k(
        "max_model_len",
        "tokens",
        "Tokens per request (default: the model's); `32k` = 32000, "
        "`32K` = 32768, as vLLM reads them.",
        field="max_model_len",
        minimum=1,
    ),
    _k(
        "max_num_seqs",
        "count",
        "Concurrent requests wanted (the engine's cap).",
        field="max_num_seqs",
        minimum=1,
    ),
    _k(
        "batch",
        "count",
        "Concurrent requests wanted (overrides max_num_seqs as the target).",
        field="batch",
        minimum=1,
    ),
    _k(
        "max_num_batched_tokens",
        "tokens",
        "Tokens per scheduler step (default: the engine's).",
        field="max_num_batched_tokens",
        minimum=1,
    ),
    _k(
        "kv_cache_dtype",
        "cache_dtype",
        "KV-cache dtype: auto, fp8, fp16, bf16, int8, ...",
        field="kv_cache_dtype",
    ),
    _k("dtype", "choice", "Weight dtype.", field="dtype", choices=WEIGHT_DTYPES),
    _k(
        "quantization",
        "text",
        "Weight quantization: fp8, awq, gptq, mxfp4, bitsandbytes, none.",
        field="quantization",
    ),
    _k(
        "gpu_memory_utilization",
        "fraction",
        "Fraction of GPU memory the engine may use.",
        field="gpu_memory_utilization",
    ),
    _k(
        "block_size",
        "count",
        "Tokens per KV block (default: the engine's).",
        field="block_size",
        minimum=1,
    ),
    _k("enforce_eager", "bool", "No CUDA graphs.", field="enforce_eager"),
    _k(
        "kv_cache_memory",
        "size",
        "KV-cache bytes per GPU, skipping the memory estimate (vLLM "
        "kv_cache_memory_bytes); a bare number is GiB.",
        field="kv_cache_memory_bytes",
        minimum=0,
    ),
    _k(
        "weights_memory",
        "size",
        "Weight bytes per GPU you already know; a bare number is GiB.",
        field="weights_memory_bytes",
        minimum=0,
    ),
    _k(
        "tight_threshold",
        "threshold",
        "Headroom under this share of the KV cache is `tight` (0.1 or `10%`).",
        field="tight_fraction",
    ),
    _k(
        "engine_options",
        "options",
        "Engine-specific knobs (kvcalc plan -E KEY=VALUE).",
        field="engine_options",
    ),
    _k("workload", "section", "Expected request lengths."),
    _k("requirements", "section", "What this deployment must achieve."),
)

WORKLOAD_KEYS: tuple[Key, ...] = (
    _k("prompt_len", "count", "Expected prompt tokens per request.", field="prompt_len", minimum=1),
    _k("output_len", "count", "Expected output tokens per request.", field="output_len", minimum=0),
    _k(
        "shared_prefix",
        "count",
        "Prompt tokens all requests share (prefix caching).",
        field="shared_prefix",
        minimum=0,
    ),
)

REQUIREMENT_KEYS: tuple[Key, ...] = (
    _k(
        "min_concurrency",
        "number",
        "Concurrent requests that must fit (at the workload's lengths "
        "if a workload is given, else at max_model_len).",
        minimum=0,
    ),
    _k("min_max_model_len", "tokens", "The context length that must be served.", minimum=1),
    _k(
        "min_headroom",
        "headroom",
        "KV memory that must stay free beyond the target concurrency: "
        "a size (`2GiB`; a bare number of 1 or more is GiB) or a share of the KV pool (`10%`); "
        "a bare number below 1 is refused as ambiguous.",
        examples=("2GiB", "10%"),
    ),
    _k(
        "allow_verdicts",
        "verdicts",
        "Verdicts that pass (default [ok, tight]); a deployment that would not start never passes.",
        choices=ALLOWABLE_VERDICTS,
    ),
)

SECTIONS: dict[str, tuple[Key, ...]] = {"workload": WORKLOAD_KEYS, "requirements": REQUIREMENT_KEYS}
BY_NAME: dict[str, Key] = {key.name: key for key in DEPLOYMENT_KEYS}


# -- reading values ------------------------------------------------------------------------------
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


_CONVERTERS = {
    "text": _text, "count": _int, "number": _number, "tokens": _tokens, "fraction": _fraction,
    "threshold": _threshold, "size": _size, "headroom": _headroom, "choice": _choice,
    "bool": _bool, "cache_dtype": _cache_dtype, "gpu": _gpu, "verdicts": _verdicts,
    "options": _options,
}  # fmt: skip


def convert(key: Key, value: Any) -> Any:
    """``value`` (as ``safe_load`` read it) read for ``key``; :class:`BadValue` if it does not fit."""
    return _CONVERTERS[key.kind](value, key)


def suggest(word: str, candidates: Any) -> str:
    """``"; did you mean 'max_model_len'?"`` when one candidate is close, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
