"""The tree :func:`kvcalc.deploy.yamlread.read_yaml` builds: :class:`Node` values that keep where
they were written, the :class:`YamlProblem` list, and the limits every document is held to.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

#: characters a document may hold (``kvcalc check`` refuses files over 8 MiB before decoding them)
MAX_CHARS = 8 * 1024 * 1024
#: values a document may expand to, aliases counted each time they are used
MAX_VALUES = 100_000
#: nesting depth of mappings and sequences
MAX_DEPTH = 32


class YamlCode(str, Enum):
    """What kind of problem a :class:`YamlProblem` is: kvcalc's classification, not PyYAML's."""

    SYNTAX = "syntax"  # PyYAML's parser refused the text; nothing after it can be trusted
    TOO_LARGE = "too-large"  # more than MAX_CHARS characters
    TOO_MANY_VALUES = "too-many-values"  # expands past MAX_VALUES (aliases counted each use)
    TOO_DEEP = "too-deep"  # nested past MAX_DEPTH
    DUPLICATE_KEY = "duplicate-key"
    TAG = "tag"  # an explicit tag other than the plain types
    BAD_VALUE = "bad-value"  # an explicitly tagged scalar that does not read as its tag
    KEY_TYPE = "key-type"  # a key that is not a string
    ALIAS = "alias"  # undefined or self-containing alias
    MERGE = "merge"  # ``<<`` of something that is not a mapping
    SECOND_DOCUMENT = "second-document"


@dataclass(frozen=True)
class YamlProblem:
    """A problem of kind ``code`` at a 1-based ``line`` and ``column``."""

    line: int
    column: int
    message: str
    code: YamlCode


class Node:
    """A value and where it starts. ``kind`` is ``map``, ``seq``, ``scalar`` or ``bad``.

    A ``map``'s value is ``{key: (key_node, value_node)}``; a ``seq``'s a list of nodes; a
    ``bad`` node stands for a value already reported (an unsafe tag), so it is not reported twice.
    """

    __slots__ = ("column", "kind", "line", "size", "value")

    def __init__(self, kind: str, value: Any, line: int, column: int, size: int = 1) -> None:
        self.kind, self.value, self.line, self.column, self.size = kind, value, line, column, size

    def plain(self) -> Any:
        """The value as ``safe_load`` returns it (for tests and ``--format json`` echoes)."""
        if self.kind == "map":
            return {k: v.plain() for k, (_, v) in self.value.items()}
        if self.kind == "seq":
            return [v.plain() for v in self.value]
        return self.value

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Node({self.kind}, {self.value!r}, {self.line}:{self.column})"
