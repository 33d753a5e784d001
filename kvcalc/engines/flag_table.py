"""A serving engine's own flags, as its argument parser matches them (recorded, not typed).

``kvcalc/data/serve_flags.json`` is compiled by ``scripts/serve_flags.py`` from the recordings of
each engine's parser (``tests/fixtures/vllm_0_33/serve_flags.json``: vLLM 0.33.0's ``vllm
serve``; ``tests/fixtures/sglang_0_5_23/launch_server_flags.json``: SGLang 0.5.23's
``launch_server``). Each flag keeps every option string the parser matches (hidden ones such as
``--no-enable-prefix-caching`` too), the ones that switch it off, whether it takes a value, its
``nargs`` and its ``choices``. :meth:`FlagTable.resolve` finds a flag as ``argparse`` does, a
unique prefix included (both parsers keep ``allow_abbrev``).
"""

from __future__ import annotations

import json
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kvcalc.errors import InputError

__all__ = ["EngineFlag", "FlagTable", "flag_table"]


@dataclass(frozen=True)
class EngineFlag:
    """One flag of the engine's parser (an ``argparse`` action)."""

    options: tuple[str, ...]
    #: where argparse stores it (``kv_cache_dtype``)
    dest: str = ""
    #: option strings that set an on/off flag off (``--no-enforce-eager``, ``--disable-...``)
    negative: frozenset[str] = frozenset()
    takes_value: bool = True
    #: argparse's nargs: ``None`` one value, ``"?"``, ``"+"``, ``"*"``, or a count
    nargs: int | str | None = None
    #: argparse's choices (``None`` in the list: the text ``None`` is accepted)
    choices: tuple[Any, ...] | None = None
    #: the name of the parser's type function (``int``, ``human_readable_int``, ...)
    type: str | None = None

    @property
    def name(self) -> str:
        """The flag as the engine's help names it (its first option string)."""
        return self.options[0]

    def shown_choices(self) -> tuple[str, ...]:
        return tuple(str(c) for c in self.choices or () if c is not None)

    def accepts(self, text: str) -> bool:
        """Whether argparse's choices check passes ``text`` (after the type's conversion)."""
        if self.choices is None:
            return True
        if text in ("", "None") and None in self.choices:  # optional_type: "" / "None" → None
            return True
        if self.type == "int":
            try:
                return int(text) in self.choices
            except ValueError:
                return False
        return text in self.shown_choices()


@dataclass(frozen=True)
class FlagTable:
    engine: str  # "vLLM 0.33.0"
    program: str  # "vllm serve"
    flags: tuple[EngineFlag, ...]
    allow_abbrev: bool = True
    #: values the parser takes as text but the engine's config refuses by its own list:
    #: flag dest → {"choices", "where", "message", "lowercased"}
    validated: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: keys of a config flag whose keys the engine lists (vLLM's ``-cc``: CompilationConfig)
    config_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    by_option: dict[str, EngineFlag] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {option: f for f in self.flags for option in f.options}
        object.__setattr__(self, "by_option", index)

    def find(self, option: str) -> EngineFlag | None:
        """The flag ``option`` names exactly."""
        return self.by_option.get(option)

    def resolve(self, option: str) -> EngineFlag | None:
        """The flag ``option`` names, as argparse matches it: exactly, else (``--`` options) by a
        unique prefix; ``None`` for no flag; an ambiguous prefix is refused as argparse does."""
        exact = self.find(option)
        if exact is not None or not (self.allow_abbrev and option.startswith("--")):
            return exact
        matches = {o: f for o, f in self.by_option.items() if o.startswith(option)}
        flags = list(dict.fromkeys(matches.values()))
        if len(flags) == 1:
            return flags[0]
        if len(flags) > 1:
            names = ", ".join(sorted(matches)[:6])
            raise InputError(
                f"{self.program}: ambiguous option {option} could match {names}",
                hint="write the flag in full",
                code="invalid-serve-command",
            )
        return None


def _flag(row: dict[str, Any]) -> EngineFlag:
    choices = row.get("choices")
    return EngineFlag(
        options=tuple(row["options"]),
        dest=row["dest"],
        negative=frozenset(row.get("negative", ())),
        takes_value=bool(row["takes_value"]),
        nargs=row.get("nargs"),
        choices=None if choices is None else tuple(choices),
        type=row.get("type"),
    )


def listed_reason(groups: Mapping[str, tuple[str, ...]], name: str) -> str | None:
    """The heading a reviewed ``{what it changes: flags}`` table lists ``name`` under, or None."""
    return next((why for why, names in groups.items() if name in names), None)


@cache
def flag_table(engine: str) -> FlagTable:
    """The recorded flags of ``engine`` (``"vllm"``, ``"sglang"``)."""
    data = pkgutil.get_data("kvcalc", "data/serve_flags.json")
    assert data is not None  # the package's own loader reads files
    rec = json.loads(data.decode("utf-8"))[engine]
    return FlagTable(
        engine=rec["engine"],
        program=rec["program"],
        flags=tuple(_flag(row) for row in rec["flags"]),
        allow_abbrev=rec["allow_abbrev"],
        validated=rec.get("validated") or {},
        config_keys={k: tuple(v) for k, v in (rec.get("config_keys") or {}).items()},
    )
