"""``kvcalc.deploy.yamlread``: safe_load semantics, line numbers, and the limits safe_load lacks.

The limits are kvcalc's whatever the PyYAML release (6.0.4's libyaml stops flow nesting at 1000
levels itself); problems are asserted by kvcalc's code, line, column and kvcalc's own wording,
never by PyYAML's.
"""

from __future__ import annotations

import pytest
import yaml

from kvcalc.deploy.yamlread import MAX_CHARS, MAX_DEPTH, MAX_VALUES, YamlCode, read_yaml


def _problems(text: str) -> list[tuple[int, int, str]]:
    return [(p.line, p.column, p.message) for p in read_yaml(text)[1]]


def _codes(text: str) -> list[tuple[int, int, YamlCode]]:
    return [(p.line, p.column, p.code) for p in read_yaml(text)[1]]


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: [1, 2.5, true, null, ~, 'x', \"y\"]\nc: {d: e}\n",
        "a: 0x10\nb: 010\nc: 1_000\nd: .inf\ne: yes\nf: 2024-01-02\ng: '123'\n",
        "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",
        "s: &s hello\nt: *s\nl: &l [1, 2]\nm: *l\n",
        "k: |\n  line one\n  line two\nf: >-\n  folded\n  text\n",
        "- 1\n- [2, 3]\n- {a: b}\n",
        "just a string",
    ],
)
def test_values_equal_safe_load(text):
    root, problems = read_yaml(text)
    assert problems == []
    assert root.plain() == yaml.safe_load(text)


def test_every_value_knows_its_line_and_column():
    root, _ = read_yaml("name: x\nrequirements:\n  min_concurrency: 8\nlist:\n  - 1\n  - two\n")
    key, value = root.value["requirements"]
    assert (key.line, key.column) == (2, 1)
    inner_key, inner_value = value.value["min_concurrency"]
    assert (inner_key.line, inner_key.column, inner_value.line, inner_value.column) == (3, 3, 3, 20)
    second = root.value["list"][1].value[1]
    assert (second.line, second.column, second.value) == (6, 5, "two")


def test_empty_document_is_none():
    assert read_yaml("") == (None, [])
    assert read_yaml("# only a comment\n") == (None, [])


def test_duplicate_keys_each_reported():
    assert _codes("a: 1\nb: 2\na: 3\nb: 4\n") == [
        (3, 1, YamlCode.DUPLICATE_KEY),
        (4, 1, YamlCode.DUPLICATE_KEY),
    ]
    assert _problems("a: 1\nb: 2\na: 3\nb: 4\n") == [
        (3, 1, "duplicate key 'a' (first at line 1)"),
        (4, 1, "duplicate key 'b' (first at line 2)"),
    ]


def test_merge_keys_are_not_duplicates_but_explicit_ones_win():
    root, problems = read_yaml("d: &d {x: 1}\ne:\n  <<: *d\n  x: 2\n")
    assert problems == [] and root.plain()["e"] == {"x": 2}


def test_object_constructing_tags_are_refused():
    problems = _problems(
        "a: !!python/object/apply:os.system ['echo hi']\n"
        "b: !!python/name:os.system\n"
        "c: !custom 1\n"
        "d: !!set {x}\n"
    )
    assert {p.code for p in read_yaml("c: !custom 1\nd: !!set {x}\n")[1]} == {YamlCode.TAG}
    assert [(line, msg.split(" is not allowed")[0]) for line, _, msg in problems] == [
        (1, "tag !!python/object/apply:os.system"),
        (2, "tag !!python/name:os.system"),
        (3, "tag !custom"),
        (4, "tag !!set"),
    ]


def test_bad_explicit_scalar():
    ((problem),) = read_yaml("n: !!int x\n")[1]
    assert (problem.line, problem.column, problem.code) == (1, 4, YamlCode.BAD_VALUE)
    assert problem.message.startswith("cannot read 'x' as !!int: ")


def test_keys_must_be_strings():
    assert {code for _, _, code in _codes("yes: 1\n1: 2\n")} == {YamlCode.KEY_TYPE}
    assert _problems("yes: 1\n1: 2\n? [1]\n: 3\n") == [
        (
            1,
            1,
            "keys must be strings, not True (YAML reads yes/no/on/off as booleans: quote the key)",
        ),
        (2, 1, "keys must be strings, not 1"),
        (3, 3, "keys must be strings, not a list"),
    ]


def test_billion_laughs_stops_early():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=False):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    root, problems = read_yaml("\n".join(lines))
    assert root is None
    # a: 9 values + 1 list; b: 9 × 10 + 1 = 91; c: 9 × 91 + 1 = 820; ... g: 9 × 66,430 + 1 =
    # 597,871 > 100,000: the fifth level (e, 9 × 7,381 + 1 = 66,430, running total 74,621)
    # fits, f's ninth alias of e passes the limit on line 6
    assert [(p.line, p.code) for p in problems] == [(6, YamlCode.TOO_MANY_VALUES)]
    assert problems[0].message == (
        f"the document expands to more than {MAX_VALUES:,} values (through aliases?); refusing it"
    )


def test_recursive_and_undefined_aliases():
    assert [code for _, _, code in _codes("a: &a [*a]\nb: *nope\n")] == [YamlCode.ALIAS] * 2
    assert _problems("a: &a [*a]\nb: *nope\n") == [
        (1, 8, "alias *a refers to a value that contains it"),
        (2, 4, "alias *nope is not defined above"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000 + "]" * 200_000,  # past libyaml's own limit (6.0.4: 1000 levels)
        "[" * 1001 + "]" * 1001,
        "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
        "{a: " * 5000 + "1" + "}" * 5000,
        "- " * 2000 + "x\n",  # block sequences, one line
        "".join(" " * i + "k:\n" for i in range(MAX_DEPTH + 1)) + " " * (MAX_DEPTH + 1) + "v\n",
    ],
    ids=[
        "flow-200000",
        "flow-1001",
        "flow-33",
        "flow-maps-5000",
        "block-seq-2000",
        "block-maps-33",
    ],
)
def test_deep_nesting_is_refused_without_recursion(text):
    root, problems = read_yaml(text)
    assert root is None
    ((problem),) = problems
    assert (problem.line, problem.code) == (
        1 if text[0] in "[{-" else MAX_DEPTH + 1,
        YamlCode.TOO_DEEP,
    )
    assert problem.message == f"nested more than {MAX_DEPTH} levels deep"


def test_nesting_up_to_the_limit_is_read():
    root, problems = read_yaml("[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH)
    assert problems == []
    value = root.plain()
    for _ in range(MAX_DEPTH):
        (value,) = value
    assert value == 1


def test_a_document_over_the_size_limit_is_refused_before_parsing():
    root, problems = read_yaml("a: b\n" + "#" * MAX_CHARS)
    assert root is None
    assert [(p.line, p.column, p.code) for p in problems] == [(1, 1, YamlCode.TOO_LARGE)]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a: [1, 2\nb: 3\n", (2, 2)),  # an unclosed flow sequence
        ("a: b\nc: \x07\n", (2, 4)),  # a control character
        ("a: b\n  c: d\n", (2, 4)),  # a mapping value where none may start
        ("a: 'unterminated\n", (2, 1)),
        ("- a\nb: c\n", (2, 1)),
    ],
)
def test_syntax_errors_give_the_line_and_column(text, where):
    root, problems = read_yaml(text)
    assert root is None
    ((problem),) = problems
    assert ((problem.line, problem.column), problem.code) == (where, YamlCode.SYNTAX)
    assert problem.message.startswith("YAML syntax error: ")


def test_syntax_error_names_where_the_open_collection_starts():
    ((problem),) = read_yaml("a:\n  - 1\nb: [1,\n  2\nc: 3\n")[1]
    assert (problem.line, problem.code) == (5, YamlCode.SYNTAX)
    assert problem.message.endswith(" that starts at line 3)")


@pytest.mark.parametrize(
    "text",
    [
        "a: [1, 2\nb: 3\n",
        "a: 1\na: 2\nb: [\n",
        "[" * 200_000,
        "x: " + "[" * 2000 + "]" * 1999,
        "a: !!python/name:os.system\nb: *c\n",
    ],
)
def test_same_lines_and_codes_with_or_without_libyaml(text, monkeypatch):
    fast = _codes(text)
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    assert _codes(text) == fast


def test_libyaml_refusing_what_the_python_parser_reads_does_not_decide(monkeypatch):
    """A libyaml with limits of its own (as 6.0.4's nesting depth) cannot refuse a good file."""

    class Refusing(yaml.SafeLoader):  # stands in for libyaml's loader, installed or not
        def get_event(self):
            raise yaml.scanner.ScannerError(problem="some limit of libyaml's own")

    monkeypatch.setattr(yaml, "CSafeLoader", Refusing, raising=False)
    root, problems = read_yaml("a: [1, {b: c}]\n")
    assert problems == [] and root.plain() == {"a": [1, {"b": "c"}]}
    root, problems = read_yaml("[" * 100 + "]" * 100)
    assert root is None and [(p.line, p.code) for p in problems] == [(1, YamlCode.TOO_DEEP)]


def test_second_document():
    assert _codes("a: 1\n---\nb: 2\n") == [(2, 1, YamlCode.SECOND_DOCUMENT)]
    assert _problems("a: 1\n---\nb: 2\n") == [
        (
            2,
            1,
            "a second YAML document (---): put several deployments in one `deployments:` list instead",
        )
    ]


def test_pure_python_loader_gives_the_same_tree(monkeypatch):
    text = "a: &x {b: [1, 'two', 3.5]}\nc:\n  <<: *x\n  d: null\n"
    fast, _ = read_yaml(text)
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    slow, problems = read_yaml(text)
    assert problems == [] and slow.plain() == fast.plain()
    assert (slow.value["c"][1].line, slow.value["c"][1].column) == (3, 3)
