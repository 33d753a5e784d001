"""What a deployment file holds once read: :class:`Deployment` values, their
:class:`Requirements`, and the :class:`Problem` values of what could not be read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kvcalc.deploy.values import DEFAULT_ALLOWED
from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen
from kvcalc.planning.inputs import PlanInputs


@dataclass(frozen=True, order=True)
class Problem:
    """Something wrong in a deployment file; ``line`` is ``None`` for the file as a whole."""

    file: str
    line: int | None
    column: int | None
    message: str

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.file}: {self.message}"
        return f"{self.file}:{self.line}:{self.column}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "message": self.message,
        }


@frozen
class Requirements:
    """What a deployment must achieve. ``min_headroom`` is ``("bytes", n)`` or ``("fraction", f)``."""

    min_concurrency: float | None = None
    min_max_model_len: int | None = None
    min_headroom: tuple[str, float] | None = None
    #: bytes of host memory the host tiers may take
    max_host_memory: int | None = None
    allow_verdicts: tuple[str, ...] = DEFAULT_ALLOWED

    def to_dict(self) -> dict[str, Any]:
        headroom = self.min_headroom
        return {
            "min_concurrency": self.min_concurrency,
            "min_max_model_len": self.min_max_model_len,
            "min_headroom_bytes": int(headroom[1]) if headroom and headroom[0] == "bytes" else None,
            "min_headroom_fraction": headroom[1]
            if headroom and headroom[0] == "fraction"
            else None,
            "max_host_memory_bytes": self.max_host_memory,
            "allow_verdicts": list(self.allow_verdicts),
        }


@frozen
class Deployment:
    """One validated deployment: where it is written, what to plan, what it must achieve."""

    name: str
    file: str
    line: int
    column: int
    model: str
    revision: str | None = None
    inputs: PlanInputs
    requirements: Requirements = field(default_factory=Requirements)
    has_workload: bool = False
    #: ``recommend: true``: also search for a cheaper deployment that meets the requirements
    recommend: bool = False
    #: notes about how the file was read (ignored command flags...)
    notes: tuple[str, ...] = ()
    #: (line, column) of each key's value: ``"max_model_len"``, ``"requirements.min_concurrency"``
    positions: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def position_of(self, *keys: str) -> tuple[int, int]:
        """Where the first of ``keys`` written in the file is, else where the deployment starts."""
        return next(
            (self.positions[k] for k in keys if k in self.positions), (self.line, self.column)
        )

    def line_of(self, *keys: str) -> int:
        return self.position_of(*keys)[0]


def own_hint(exc: KvcalcError) -> str:
    """`` (hint)`` when the raise site gave one (not the class's default), else ``""``."""
    hint = exc.hint
    if not hint or hint == getattr(type(exc), "default_hint", None) or len(hint) > 160:
        return ""
    return f" ({hint})"
