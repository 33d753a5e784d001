"""The registry of architecture families kvcalc sizes exactly: one module per family.

Each module in this package defines ``FAMILIES``, a tuple of :class:`~kvcalc.hfconfig.family.Family`
entries. Adding a family is adding one module and its model types to the index
(:mod:`~kvcalc.hfconfig.families._index`, which lets a config import only its own family's module;
a test checks the index against the modules). A model type may belong to one family only (checked
when the registry loads).

:func:`verify` decides whether a config is verified (see :mod:`kvcalc.hfconfig.family`).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from kvcalc.hfconfig.families._index import MODULE_OF_MODEL_TYPE
from kvcalc.hfconfig.family import (
    BASE_KEYS,
    TRUST_HINT,
    Family,
    UnverifiedConfigError,
    cache_relevant_keys,
)
from kvcalc.hfconfig.reader import ConfigReader

__all__ = ["all_families", "find_family", "verify", "Verification"]


@cache
def all_families() -> tuple[Family, ...]:
    """Every registered family, in module-name order (imports every family module)."""
    found: list[Family] = []
    owner: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        for family in _module_families(info.name):
            for model_type in family.model_types:
                if model_type in owner:
                    raise RuntimeError(
                        f"model_type {model_type!r} is registered by {owner[model_type]} "
                        f"and {info.name}"
                    )
                owner[model_type] = info.name
            found.append(family)
    return tuple(found)


@cache
def _module_families(name: str) -> tuple[Family, ...]:
    """The families one module registers, each told its module's name."""
    module = importlib.import_module(f"{__name__}.{name}")
    for family in module.FAMILIES:
        object.__setattr__(family, "module", name)
    return tuple(module.FAMILIES)


def find_family(model_type: str) -> Family | None:
    """The family registering ``model_type``: through the index, importing that module only; a type
    the index lacks is looked for in every module."""
    name = MODULE_OF_MODEL_TYPE.get(model_type)
    candidates = _module_families(name) if name is not None else all_families()
    for family in candidates:
        if model_type in family.model_types:
            return family
    return None


class Verification:
    """The outcome of :func:`verify`: the family (if any) and the problems that refuse it."""

    def __init__(self, family: Family | None, problems: list[str], keys: list[str]) -> None:
        self.family = family
        self.problems = tuple(problems)
        self.keys = tuple(keys)

    @property
    def validated(self) -> bool:
        return self.family is not None and not self.problems


def verify(r: ConfigReader) -> Verification:
    """Check ``r``'s config against the registry (reads nothing into ``r.used``)."""
    model_type = _model_type(r)
    architectures = _architectures(r)
    family = find_family(model_type) if model_type else None
    if family is None:
        what = f"model_type {model_type!r}" if model_type else "no model_type"
        return Verification(None, [f"{what} is not a registered architecture family"], [])
    problems: list[str] = []
    keys: list[str] = []
    if architectures and not set(architectures) & set(family.architectures):
        problems.append(
            f"architectures {', '.join(architectures)} not among the {family.name} family's "
            f"({', '.join(sorted(family.architectures))})"
        )
        keys.append("architectures")
    accounted = frozenset(family.keys) | BASE_KEYS
    for key, what in cache_relevant_keys(r.text).items():
        if key not in accounted:
            problems.append(f"{r.prefix}{key} ({what})")
            keys.append(r.prefix + key)
    types = r.text.get("layer_types")
    if isinstance(types, list) and "layer_types" in accounted:
        unknown = sorted({str(t) for t in types} - set(family.layer_types))
        if unknown:
            problems.append(f"{r.prefix}layer_types values {', '.join(unknown)}")
            keys.append(r.prefix + "layer_types")
    return Verification(family, problems, keys)


def refusal(r: ConfigReader, check: Verification) -> UnverifiedConfigError:
    model_type = _model_type(r)
    architectures = _architectures(r)
    arch = f" ({', '.join(architectures)})" if architectures else ""
    if not model_type:
        message = f"{r.source}: no model_type{arch}: not an architecture kvcalc has verified"
    elif check.family is None:
        message = f"{r.source}: model_type {model_type!r}{arch} is not an architecture kvcalc has verified"
    else:
        message = (
            f"{r.source}: model_type {model_type!r}{arch} carries cache keys the "
            f"{check.family.name} reader does not read: {'; '.join(check.problems)}"
        )
    return UnverifiedConfigError(
        message, model_type=model_type, architectures=architectures, keys=check.keys,
        hint=TRUST_HINT,
    )  # fmt: skip


def _model_type(r: ConfigReader) -> str:
    value = r.raw.get("model_type")
    return value if isinstance(value, str) else ""


def _architectures(r: ConfigReader) -> tuple[str, ...]:
    value = r.raw.get("architectures")
    if isinstance(value, list):
        return tuple(str(a) for a in value)
    return ()
