"""The commands that reproduce a planned deployment: ``kvcalc plan ...`` and the engine's own
``vllm serve ...`` / ``python -m sglang.launch_server ...``, written from its :class:`PlanInputs`
through the settings table (each setting's flag as that surface spells it). Pure.

Only values each surface reads back as they were are written: counts, fractions, names and
switches. :func:`check_writable` refuses, by name, a fixed setting of another kind (a size, a
JSON object, engine options), so that no printed command silently drops it.
"""

from __future__ import annotations

import shlex
from dataclasses import fields
from typing import Any

from kvcalc.engines.names import EngineName, traits
from kvcalc.errors import InputError
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.settings import SETTINGS, Kind, Setting

_DEFAULTS = {f.name: f.default for f in fields(PlanInputs)}
_WRITABLE = (Kind.COUNT, Kind.TOKENS, Kind.FRACTION, Kind.THRESHOLD, Kind.BOOL, Kind.TEXT,
             Kind.ENGINE, Kind.CACHE_DTYPE, Kind.WEIGHT_DTYPE, Kind.GPU)  # fmt: skip
#: fields kvcalc reads that no serving command holds (given to ``kvcalc plan`` beside one)
KVCALC_ONLY = ("gpu", "num_gpus", "batch", "prompt_len", "output_len", "shared_prefix",
               "tight_fraction", "engine")  # fmt: skip
_BY_FIELD = {s.field: s for s in SETTINGS if s.field}


def _given(inputs: PlanInputs) -> list[tuple[Setting, Any]]:
    """The settings whose values differ from the defaults, in the table's order."""
    out = []
    for name, setting in _BY_FIELD.items():
        value = getattr(inputs, name)
        if value != _DEFAULTS.get(name) and value not in (None, ()):
            out.append((setting, value))
    return out


def check_writable(inputs: PlanInputs) -> None:
    """Refuse a fixed setting the printed commands could not carry."""
    for setting, _ in _given(inputs):
        if setting.kind not in _WRITABLE:
            raise InputError(
                f"recommend cannot write {setting.what} into the commands it prints",
                hint="plan that setting with kvcalc plan; recommend fixes counts, fractions, "
                "names and switches",
                code="invalid-input",
            )


def _text(value: Any) -> str:
    if isinstance(value, EngineName):
        return value.value
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _short(spellings: tuple[str, ...]) -> str:
    """The shortest spelling (``-tp`` for ``--tensor-parallel-size``): the lines stay short."""
    return min(spellings, key=len)


def _words(setting: Setting, value: Any, flag: str) -> list[str]:
    if setting.kind is Kind.BOOL:
        if value is True:
            return [flag]
        return ["--no-" + flag.removeprefix("--")]  # a tri-state switch turned off
    return [flag, _text(value)]


def kvcalc_command(reference: str, inputs: PlanInputs) -> str:
    """``kvcalc plan REF ...`` with every setting that differs from the defaults."""
    words = ["kvcalc", "plan", reference]
    for setting, value in _given(inputs):
        words += _words(setting, value, _short(setting.cli_flags))
    return shlex.join(words)


def serve_command(model: str, inputs: PlanInputs) -> str | None:
    """The engine's serving command (None for engines kvcalc writes none for): the settings the
    engine reads; the GPU and the workload are given to ``kvcalc plan`` beside it."""
    can = traits(inputs.engine)
    if can.serve_program is None:
        return None
    words = shlex.split(can.serve_program.format(model=shlex.quote(model)))
    for setting, value in _given(inputs):
        if setting.field in KVCALC_ONLY:
            continue
        spellings = setting.serve if can.serve_flags == "serve" else setting.sglang
        if not spellings:
            return None  # a setting this engine's command has no flag for
        words += _words(setting, value, _short(spellings))
    return shlex.join(words)


def serve_check_command(serve: str, inputs: PlanInputs) -> str:
    """``kvcalc plan --from-command SERVE`` with what the serving command does not hold."""
    words = ["kvcalc", "plan", "--from-command", serve]
    for setting, value in _given(inputs):
        if setting.field in KVCALC_ONLY and setting.field != "engine":
            words += _words(setting, value, _short(setting.cli_flags))
    return shlex.join(words)
