"""YAML with line numbers: ``yaml.safe_load`` semantics, every value keeping where it was written.

:func:`read_yaml` builds a small tree of :class:`Node` straight from the parser's events (libyaml's
when installed; the walk is :class:`~kvcalc.deploy.yamlbuild.Builder`'s), so that it controls what
``safe_load`` leaves open:

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

from typing import Any

from kvcalc.deploy.yamlbuild import Builder, Fatal, mark_at
from kvcalc.deploy.yamlnodes import (  # noqa: F401  (Node, YamlCode, the limits: read from here too)
    MAX_CHARS,
    MAX_DEPTH,
    MAX_VALUES,
    Node,
    YamlCode,
    YamlProblem,
)


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
    builder = Builder(loader)
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
                    line, column = mark_at(event.start_mark)
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
    except Fatal as fatal:
        return None, [*builder.problems, fatal.problem], False
    except yaml.YAMLError as exc:
        return None, [*builder.problems, _syntax_problem(exc, text)], True
    finally:
        loader.dispose()
    return root, builder.problems, False


def _syntax_problem(exc: Any, text: str) -> YamlProblem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        line, column = mark_at(mark)
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
