"""vLLM's compilation flags in a serving command: the CUDA-graph settings they carry.

vLLM 0.33 (``engine/arg_utils.py``, ``utils/argparse_utils.py`` ``FlexibleArgumentParser``) reads
the compilation config as JSON (``-cc '{"cudagraph_mode": "FULL"}'``, ``--compilation-config``),
key by key in dotted form (``-cc.cudagraph_mode=FULL``, ``--compilation-config.max_cudagraph_capture_size 64``;
the value is JSON where it parses, else text; ``-cc.cudagraph_capture_sizes+ 1,2,4`` is a list),
and as optimisation levels (``-O0`` no CUDA graphs, ``-O1`` PIECEWISE, ``-O2``/``-O3`` the default
FULL_AND_PIECEWISE; a level only fills a mode not given). Of the compilation config kvcalc reads
``cudagraph_mode``, ``cudagraph_capture_sizes`` and ``max_cudagraph_capture_size``; other keys are
named in a note. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from kvcalc.errors import InputError
from kvcalc.planning.settings import BY_NAME

CODE = "invalid-serve-command"
#: how vLLM spells the compilation config's flag
FLAGS = ("-cc", "--compilation-config")
#: the keys kvcalc reads, each a setting (and PlanInputs field) of the same name
KEYS = ("cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size")
#: ``-O<level>`` → the CUDA graph mode its defaults set (``OPTIMIZATION_LEVEL_0x``)
LEVEL_MODES = {"0": "NONE", "1": "PIECEWISE", "2": "FULL_AND_PIECEWISE", "3": "FULL_AND_PIECEWISE"}


def is_compilation_flag(raw: str) -> bool:
    """``-cc``, ``--compilation-config`` (``_`` for ``-`` too), with or without ``.KEY``."""
    head = raw.partition(".")[0]
    return head == "-cc" or head.replace("_", "-") == "--compilation-config"


def is_level_flag(raw: str) -> bool:
    return raw.startswith("-O") or raw.replace("_", "-") == "--optimization-level"


def level_mode(raw: str, value: str | None) -> tuple[str, str | None]:
    """The mode of ``-O3``/``-O 3``/``-O=3``/``--optimization-level 3``: (mode, value consumed)."""
    attached = raw[2:].lstrip("=") if raw.startswith("-O") else ""
    level = attached or (value or "")
    if level not in LEVEL_MODES:
        raise InputError(f"{raw}: vLLM's optimisation level is 0, 1, 2 or 3, got {level!r}",
                         hint="e.g. -O3", code=CODE)  # fmt: skip
    return LEVEL_MODES[level], None if attached else value


def compilation_values(raw: str, text: str) -> tuple[dict[str, Any], list[str]]:
    """The CUDA-graph settings one compilation flag gives (field → value), and the keys ignored."""
    head, _, key = raw.partition(".")
    if not key:
        try:
            config = json.loads(text)
        except ValueError:
            raise InputError(f"{head} needs a JSON object, got {text[:40]!r}",
                             hint="""e.g. -cc '{"cudagraph_mode": "PIECEWISE"}'""", code=CODE) from None  # fmt: skip
        if not isinstance(config, dict):
            raise InputError(f"{head} needs a JSON object, got {text[:40]!r}", code=CODE)
        items = list(config.items())
    else:
        plus = key.endswith("+")
        key = key.removesuffix("+")
        if plus:
            value: Any = text.split(",")
        else:
            try:
                value = json.loads(text)
            except ValueError:
                value = text
        items = [(key, value)]
    out: dict[str, Any] = {}
    ignored = []
    for name, value in items:
        if name not in KEYS:
            ignored.append(f"{head}.{name}")
            continue
        out[name] = _read(name, value, raw)
    return out, ignored


def _read(name: str, value: Any, raw: str) -> Any:
    setting = BY_NAME[name]
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    try:
        return setting.parse(str(value))
    except InputError as exc:
        raise InputError(f"{raw}: {exc.message}", hint=exc.hint, code=CODE) from None


def eplb_items(head: str, key: str, text: str) -> dict[str, Any]:
    """``--eplb-config`` as key → value: its JSON object, or the one key of the dotted form
    (``--eplb-config.num_redundant_experts 32``)."""
    if key:
        return {key.replace("-", "_"): text}
    try:
        items = json.loads(text)
    except ValueError:
        raise InputError(f"{head}: not JSON: {text[:60]!r}", code=CODE) from None
    if not isinstance(items, dict):
        raise InputError(f"{head} must be a JSON object", code=CODE)
    return items
