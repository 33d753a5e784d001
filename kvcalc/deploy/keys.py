"""Every key a deployment file may hold, in one table: the validator and the JSON Schema both read it.

The keys that are settings (``gpu``, ``max_model_len``, ``command``, ``workload.prompt_len``...)
come from the one table of settings, :mod:`kvcalc.planning.settings` — the same name, help and
parser as the command line's flag; the keys only a file has (``name``, ``recommend``,
``workload``, ``requirements`` and the requirements) are written here. How a value is read for its key is
:mod:`kvcalc.deploy.values`; :mod:`kvcalc.deploy.schema` turns the same tables into the published
JSON Schema, so the validator, the schema and the flags cannot drift apart.

Kinds: ``text`` (non-empty string), ``count`` (integer ≥ ``minimum``), ``tokens`` (a count, or
vLLM's ``32k``/``32K`` spelling), ``fraction`` (number in (0, 1]), ``threshold`` (fraction in
[0, 1) or ``"10%"``), ``bool``, ``size`` (``"80GB"``, ``"20GiB"``; a bare number is GiB),
``headroom`` (a size, or a percentage of the KV pool), ``verdicts`` (list of verdict names),
``choice`` (one of ``choices``), ``cache_dtype``, ``gpu``, ``counts`` (a list of whole numbers
≥ ``minimum``, or a string ``"1,2,4"``), ``options`` (a mapping of engine knobs)
and ``section`` (a nested mapping: ``workload``, ``requirements``).
"""

from __future__ import annotations

from kvcalc.deploy.values import (  # re-exported: the key vocabulary in one import
    ALLOWABLE_VERDICTS,
    COUNTS_PATTERN,
    DEFAULT_ALLOWED,
    BadValue,
    Key,
    convert,
    describe,
    suggest,
)
from kvcalc.engines.names import ALIAS_SPELLINGS, EngineName
from kvcalc.engines.vllm.cudagraphs import MODES as GRAPH_MODES
from kvcalc.planning.settings import SETTINGS, WEIGHT_DTYPES, Kind, Setting

__all__ = ["ALLOWABLE_VERDICTS", "BY_NAME", "COUNTS_PATTERN", "DEFAULT_ALLOWED", "DEPLOYMENT_KEYS", "SECTIONS",
           "BadValue", "Key", "convert", "describe", "suggest"]  # fmt: skip

ENGINES = tuple(name.value for name in EngineName)
ENGINE_ALIASES = ALIAS_SPELLINGS
HUMAN_INT_PATTERN = r"^\s*\d+(\.\d+)?[kmgt]\s*$|^\s*\d+[KMGT]\s*$|^\s*\d+\s*$"
SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*([kKmMgGtT][iI]?[bB]|[bB])?\s*$"
PERCENT_PATTERN = r"^\s*\d+(\.\d+)?\s*%\s*$"

_CHOICES = {Kind.ENGINE: ENGINES + ENGINE_ALIASES, Kind.WEIGHT_DTYPE: WEIGHT_DTYPES,
            Kind.GRAPH_MODE: tuple(m.lower() for m in GRAPH_MODES) + GRAPH_MODES}  # fmt: skip


def key_of(s: Setting) -> Key:
    """The deployment-file key of a setting (its name without the section)."""
    assert s.yaml is not None
    kind = "choice" if s.kind in _CHOICES else s.kind.value
    return Key(name=s.yaml.rpartition(".")[2], kind=kind, help=s.help_for("yaml"), field=s.field,
               minimum=s.minimum, choices=_CHOICES.get(s.kind, ()), examples=s.examples)  # fmt: skip


def _keys_in(section: str) -> tuple[Key, ...]:
    return tuple(key_of(s) for s in SETTINGS if s.yaml and s.yaml.rpartition(".")[0] == section)


DEPLOYMENT_KEYS: tuple[Key, ...] = (
    Key(name="name", kind="text",
        help="Name shown in reports (default: the file name, with the entry's index)."),
    *_keys_in(""),
    Key(name="recommend", kind="bool",
        help="Also report whether a cheaper deployment (any catalog GPU, count and parallel "
        "split of the same engine, the other settings kept) meets the same requirements: a "
        "note, a failure with `kvcalc check --fail-on cheaper`."),
    Key(name="workload", kind="section", help="Expected request lengths."),
    Key(name="requirements", kind="section", help="What this deployment must achieve."),
)  # fmt: skip

WORKLOAD_KEYS: tuple[Key, ...] = _keys_in("workload")

REQUIREMENT_KEYS: tuple[Key, ...] = (
    Key(
        name="min_concurrency",
        kind="number",
        help="Concurrent requests that must fit (at the workload's lengths if a workload is "
        "given, else at max_model_len).",
        minimum=0,
    ),
    Key(
        name="min_max_model_len",
        kind="tokens",
        help="The context length that must be served.",
        minimum=1,
    ),
    Key(
        name="min_headroom",
        kind="headroom",
        help="KV memory that must stay free beyond the target concurrency: a size (`2GiB`; a "
        "bare number of 1 or more is GiB) or a share of the KV pool (`10%`); a bare number "
        "below 1 is refused as ambiguous.",
        examples=("2GiB", "10%"),
    ),
    Key(
        name="max_host_memory",
        kind="size",
        help="Host memory the deployment may use for its host tiers (vLLM KV offloading, a NIXL "
        "host buffer, offloaded weights), all its GPUs together: `256GiB`; a bare number is GiB. "
        "A tier whose size is not known (LMCache) fails it.",
        examples=("256GiB",),
    ),
    Key(
        name="allow_verdicts",
        kind="verdicts",
        help="Verdicts that pass (default [ok, tight]); a deployment that would not start never "
        "passes.",
        choices=ALLOWABLE_VERDICTS,
    ),
)

SECTIONS: dict[str, tuple[Key, ...]] = {"workload": WORKLOAD_KEYS, "requirements": REQUIREMENT_KEYS}
BY_NAME: dict[str, Key] = {key.name: key for key in DEPLOYMENT_KEYS}
