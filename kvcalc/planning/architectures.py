"""``kvcalc models --architectures``: every architecture of vLLM 0.33's registry with kvcalc's status.

Pure: the recorded registry (:mod:`kvcalc.engines.vllm.registry`), the families
(:func:`kvcalc.hfconfig.families.all_families`) and the refusals by name
(:mod:`kvcalc.planning.architectures_refused`) in, rows out. An architecture a family declares is
``exact`` — its configs are read by that family and its fixtures recorded with vLLM's own code —
unless vLLM 0.33 no longer builds it (then ``refused`` with vLLM's reason, as ``plan`` refuses it).
Every other architecture is ``refused`` with the reason named in the table; one in neither is
``unreviewed`` (the tests fail on it). Engine support, per engine, is what planning the family's
bundled example on that engine gives (:func:`kvcalc.planning.api.architectures_reference`).
"""

from __future__ import annotations

from dataclasses import asdict
from enum import Enum
from typing import Any

from kvcalc.engines.vllm.registry import CATEGORIES, Registry
from kvcalc.frozen import frozen
from kvcalc.hfconfig.family import Family
from kvcalc.planning.architectures_refused import REFUSED_BY_NAME, config_source_text


class Status(str, Enum):
    EXACT = "exact"
    REFUSED = "refused"
    UNREVIEWED = "unreviewed"


@frozen
class EngineSupport:
    """What planning the family's bundled example on one engine gives."""

    engine: str
    #: ``planned``, or the error code the engine refuses it with (``unsupported-model``...)
    status: str
    #: the refusal's message (empty when planned)
    reason: str = ""


@frozen
class ArchitectureRow:
    """One architecture of vLLM's registry, in one of its categories."""

    architecture: str
    #: vLLM's registry table: ``text-generation``, ``multimodal``, ``speculative``, ``pooling``,
    #: ``transformers-backend`` or ``removed``
    category: str
    #: ``exact``, ``refused`` or ``unreviewed``
    status: str
    #: the kvcalc family that reads its configs (null: none)
    family: str | None
    #: why it is refused (empty when exact)
    reason: str
    #: a bundled model whose config names this architecture (null: none ships)
    example: str | None
    #: per engine, planning ``example`` (empty without an example, or when not asked)
    engines: tuple[EngineSupport, ...] = ()
    #: for a refused text-generation or multimodal architecture: where a public configuration of
    #: it is (``transformers LlavaConfig, model_type llava``, a published ``config.json``, or
    #: ``config.json not located; ...``); empty when none was found (the reason says so) or when exact
    config_source: str = ""


@frozen
class CategoryCount:
    category: str
    exact: int
    total: int


@frozen
class ArchitectureList:
    """The answer of ``kvcalc models --architectures``. Field names are the ``--json`` keys."""

    #: the vLLM release whose registry was recorded
    engine_version: str
    counts: tuple[CategoryCount, ...]
    rows: tuple[ArchitectureRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def architecture_rows(registry: Registry, families: tuple[Family, ...],
                      examples: dict[str, str]) -> ArchitectureList:  # fmt: skip
    """Each registry entry with its status (see the module); ``examples``: architecture → the
    alias of a bundled model whose config names it."""
    family_of = {arch: f.name for f in families for arch in f.architectures}
    rows = []
    for entry in registry.entries:
        family = family_of.get(entry.architecture)
        refused = REFUSED_BY_NAME.get(entry.category, {}).get(entry.architecture)
        if family is not None and entry.category == "removed":
            status, reason = (
                Status.REFUSED,
                (
                    f"vLLM {registry.engine_version} no longer builds it (last in "
                    f"v{entry.last_release}): refused under vLLM, planned for the other engines"
                ),
            )
        elif family is not None:
            status, reason = Status.EXACT, ""
        elif refused is not None:
            status, reason = Status.REFUSED, refused
            if entry.category == "removed":
                reason = f"{reason}: last in v{entry.last_release}"
        else:
            status, reason = Status.UNREVIEWED, "in vLLM's registry, not yet reviewed by kvcalc"
        rows.append(ArchitectureRow(
            architecture=entry.architecture, category=entry.category, status=status.value,
            family=family, reason=reason, example=examples.get(entry.architecture) if family else None,
            config_source=config_source_text(entry.architecture) if status == Status.REFUSED else "",
        ))  # fmt: skip
    counts = tuple(
        CategoryCount(category=c, exact=sum(r.status == Status.EXACT for r in rows if r.category == c),
                      total=sum(r.category == c for r in rows))
        for c in CATEGORIES
    )  # fmt: skip
    return ArchitectureList(engine_version=registry.engine_version, counts=counts, rows=tuple(rows))
