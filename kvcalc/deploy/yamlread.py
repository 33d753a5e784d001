"""YAML with line numbers: ``yaml.safe_load`` semantics, every value keeping where it was written.

:func:`read_yaml` builds a small tree of :class:`Node` straight from the parser's events (libyaml's
when installed), so that it controls what ``safe_load`` leaves open:

- scalars are typed exactly as ``safe_load`` types them (the resolver and ``SafeConstructor``);
- a tag that would construct an object (``!!python/object:...``, ``!custom``) is a problem, as are
  ``!!set``/``!!omap`` and keys that are not strings;
- duplicate keys are a problem (``safe_load`` silently keeps the last);
- anchors and aliases work (and ``<<`` merge keys), but the document may hold at most
  :data:`MAX_CHARS` characters, expand to at most :data:`MAX_VALUES` values and nest
  :data:`MAX_DEPTH` deep, so "billion laughs" files and pathological nesting stop at once instead
  of eating memory or the C stack.

These limits are kvcalc's own, whatever the PyYAML version: libyaml (the fast path) has limits of
its own in some releases (PyYAML 6.0.4 refuses flow nesting past 1000 levels while scanning ahead,
before the events reach kvcalc). So when libyaml refuses a document, the pure-Python parser, which
has none, reads it again: kvcalc's limits apply as they would without libyaml, and only a document
both parsers refuse is a :attr:`YamlCode.SYNTAX` problem, at the line and column the parser gives.

Problems are returned, not raised, so a file reports all of them at once; a syntax error (after
which nothing can be trusted) is the one exception and ends the file. ``yaml`` is imported inside
the functions: commands that never read YAML never load it.
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

_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"


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


class _Fatal(Exception):
    def __init__(self, problem: YamlProblem) -> None:
        self.problem = problem


def _at(mark: Any) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _tag_name(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:") :] if tag.startswith("tag:yaml.org,2002:") else tag


class _Builder:
    """Turns the parser's event stream into :class:`Node` trees, iteratively."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.problems: list[YamlProblem] = []
        self.anchors: dict[str, Node] = {}
        self.total = 0
        # each open collection: [node, anchor, pending key node (maps), explicit keys seen]
        self.stack: list[list[Any]] = []

    def problem(self, code: YamlCode, line: int, column: int, message: str) -> None:
        self.problems.append(YamlProblem(line, column, message, code))

    def count(self, size: int, line: int, column: int) -> None:
        self.total += size
        if self.total > MAX_VALUES:
            raise _Fatal(
                YamlProblem(
                    line,
                    column,
                    f"the document expands to more than "
                    f"{MAX_VALUES:,} values (through aliases?); refusing it",
                    YamlCode.TOO_MANY_VALUES,
                )
            )

    def scalar(self, event: Any) -> Node:
        import yaml

        mark = event.start_mark
        line, column = mark.line + 1, mark.column + 1
        self.count(1, line, column)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == _STR:  # the common case, as SafeConstructor reads it
            result = Node("scalar", event.value, line, column)
            if event.anchor is not None:
                self.anchors[event.anchor] = result
            return result
        if tag == _MERGE:
            return Node("merge", "<<", line, column)
        constructor = self.loader.yaml_constructors.get(tag)
        if constructor is None:
            self.problem(
                YamlCode.TAG,
                line,
                column,
                f"tag {_tag_name(tag)} is not allowed: deployment files hold plain values only",
            )
            return Node("bad", None, line, column)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = constructor(self.loader, node)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            self.problem(
                YamlCode.BAD_VALUE,
                line,
                column,
                f"cannot read {event.value!r} as {_tag_name(tag)}: "
                f"{getattr(exc, 'problem', None) or exc}",
            )
            return Node("bad", None, line, column)
        result = Node("scalar", value, line, column)
        if event.anchor is not None:
            self.anchors[event.anchor] = result
        return result

    def start(self, event: Any, kind: str) -> None:
        line, column = _at(event.start_mark)
        if len(self.stack) >= MAX_DEPTH:
            raise _Fatal(
                YamlProblem(
                    line, column, f"nested more than {MAX_DEPTH} levels deep", YamlCode.TOO_DEEP
                )
            )
        self.count(1, line, column)
        expected = _MAP if kind == "map" else _SEQ
        if event.tag not in (None, "!", expected):
            self.problem(
                YamlCode.TAG,
                line,
                column,
                f"tag {_tag_name(event.tag)} is not allowed: deployment "
                "files hold plain mappings and lists only",
            )
            kind = "bad"
        node = Node(kind, {} if kind == "map" else [], line, column)
        self.stack.append([node, event.anchor, None, {}])

    def end(self) -> Node:
        node, anchor, _, _ = self.stack.pop()
        if node.kind == "map":
            node.size = 1 + sum(k.size + v.size for k, v in node.value.values())
        elif node.kind == "seq":
            node.size = 1 + sum(v.size for v in node.value)
        if node.kind == "bad":
            node.value = None
        if anchor is not None:
            self.anchors[anchor] = node
        return node

    def alias(self, event: Any) -> Node:
        line, column = _at(event.start_mark)
        node = self.anchors.get(event.anchor)
        if node is None:
            open_anchors = {frame[1] for frame in self.stack}
            why = (
                "refers to a value that contains it"
                if event.anchor in open_anchors
                else "is not defined above"
            )
            self.problem(YamlCode.ALIAS, line, column, f"alias *{event.anchor} {why}")
            return Node("bad", None, line, column)
        self.count(node.size, line, column)
        return node

    def add(self, node: Node) -> Node | None:
        """Attach ``node`` to the open collection; return it if it is the document's root."""
        if not self.stack:
            return node
        frame = self.stack[-1]
        parent = frame[0]
        if parent.kind == "seq":
            parent.value.append(node)
        elif parent.kind == "map":
            if frame[2] is None:
                frame[2] = node
            else:
                key, frame[2] = frame[2], None
                self.entry(parent, frame[3], key, node)
        return None

    def entry(self, parent: Node, explicit: dict[str, Node], key: Node, value: Node) -> None:
        if key.kind == "merge":
            self.merge(parent, explicit, value)
            return
        if key.kind == "bad":
            return
        if key.kind != "scalar" or not isinstance(key.value, str):
            shown = (
                "a mapping"
                if key.kind == "map"
                else "a list"
                if key.kind == "seq"
                else repr(key.value)
            )
            self.problem(
                YamlCode.KEY_TYPE,
                key.line,
                key.column,
                f"keys must be strings, not {shown}"
                + (
                    " (YAML reads yes/no/on/off as booleans: quote the key)"
                    if isinstance(key.value, bool)
                    else ""
                ),
            )
            return
        if key.value in explicit:
            first = explicit[key.value]
            self.problem(
                YamlCode.DUPLICATE_KEY,
                key.line,
                key.column,
                f"duplicate key {key.value!r} (first at line {first.line})",
            )
            return
        explicit[key.value] = key
        parent.value[key.value] = (key, value)

    def merge(self, parent: Node, explicit: dict[str, Node], value: Node) -> None:
        sources = value.value if value.kind == "seq" else [value]
        for source in sources:
            if source.kind == "bad":
                continue
            if source.kind != "map":
                self.problem(YamlCode.MERGE, value.line, value.column, "<< merges mappings only")
                return
            for name, entry in source.value.items():
                if name not in explicit:
                    parent.value.setdefault(name, entry)


def read_yaml(text: str) -> tuple[Node | None, list[YamlProblem]]:
    """The single document in ``text`` (``None`` when empty) and every problem found."""
    import yaml

    if len(text) > MAX_CHARS:
        return None, [
            YamlProblem(
                1,
                1,
                f"longer than {MAX_CHARS // (1 << 20)} MiB of text: not a deployment file",
                YamlCode.TOO_LARGE,
            )
        ]
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is None:
        return _read_with(yaml.SafeLoader, text)[:2]
    root, problems, refused = _read_with(fast, text)
    if not refused:
        return root, problems
    # libyaml refused the text: the pure-Python parser, which has no limits of its own, reads it
    # again; kvcalc's limits or its acceptance decide, and where it too finds a syntax error,
    # libyaml's report (usually the clearer one) stands.
    again, again_problems, refused_again = _read_with(yaml.SafeLoader, text)
    return (root, problems) if refused_again else (again, again_problems)


def _read_with(loader_class: Any, text: str) -> tuple[Node | None, list[YamlProblem], bool]:
    """Read ``text`` with ``loader_class``; the last item says whether PyYAML itself refused it."""
    import yaml

    try:
        loader = loader_class(text)
    except yaml.YAMLError as exc:  # the pure-Python reader checks the characters up front
        return None, [_syntax_problem(exc, text)], True
    builder = _Builder(loader)
    root: Node | None = None
    documents = 0
    try:
        while True:
            event = loader.get_event()
            kind = type(event)
            if kind is yaml.ScalarEvent:
                root = builder.add(builder.scalar(event)) or root
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                root = builder.add(builder.end()) or root
            elif kind is yaml.MappingStartEvent:
                builder.start(event, "map")
            elif kind is yaml.SequenceStartEvent:
                builder.start(event, "seq")
            elif kind is yaml.AliasEvent:
                root = builder.add(builder.alias(event)) or root
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    line, column = _at(event.start_mark)
                    builder.problem(
                        YamlCode.SECOND_DOCUMENT,
                        line,
                        column,
                        "a second YAML document (---): put several "
                        "deployments in one `deployments:` list instead",
                    )
                    break
            elif event is None or kind is yaml.StreamEndEvent:
                break
    except _Fatal as fatal:
        return None, [*builder.problems, fatal.problem], False
    except yaml.YAMLError as exc:
        return None, [*builder.problems, _syntax_problem(exc, text)], True
    finally:
        loader.dispose()
    return root, builder.problems, False


def _syntax_problem(exc: Any, text: str) -> YamlProblem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        line, column = _at(mark)
    elif isinstance(getattr(exc, "position", None), int):  # ReaderError: a character offset
        before = text[: exc.position]
        line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    else:
        line, column = 1, 1
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None and context_mark is not mark:
        context += f" that starts at line {context_mark.line + 1}"
    message = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
    return YamlProblem(line, column, message, YamlCode.SYNTAX)
