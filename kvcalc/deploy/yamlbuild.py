"""PyYAML's parser events → :class:`~kvcalc.deploy.yamlnodes.Node` trees, iteratively, under kvcalc's
limits: scalars typed as ``safe_load`` types them, unsafe tags, duplicate and non-string keys,
aliases and ``<<`` merges, and the value count and depth caps (a :class:`Fatal` ends the document).
"""

from __future__ import annotations

from typing import Any

from kvcalc.deploy.yamlnodes import MAX_DEPTH, MAX_VALUES, Node, YamlCode, YamlProblem

_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"


class Fatal(Exception):
    def __init__(self, problem: YamlProblem) -> None:
        self.problem = problem


def mark_at(mark: Any) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _tag_name(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:") :] if tag.startswith("tag:yaml.org,2002:") else tag


class Builder:
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
            raise Fatal(
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
        line, column = mark_at(event.start_mark)
        if len(self.stack) >= MAX_DEPTH:
            raise Fatal(
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
        line, column = mark_at(event.start_mark)
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
