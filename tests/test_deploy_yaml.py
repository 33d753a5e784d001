"""``kvcalc.deploy.yamlread``: safe_load semantics, line numbers, and the limits safe_load lacks."""

from __future__ import annotations

import pytest
import yaml

from kvcalc.deploy.yamlread import MAX_DEPTH, read_yaml


def _problems(text: str) -> list[tuple[int, int, str]]:
    return [(p.line, p.column, p.message) for p in read_yaml(text)[1]]


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
    assert [(line, msg.split(" is not allowed")[0]) for line, _, msg in problems] == [
        (1, "tag !!python/object/apply:os.system"),
        (2, "tag !!python/name:os.system"),
        (3, "tag !custom"),
        (4, "tag !!set"),
    ]


def test_bad_explicit_scalar():
    assert _problems("n: !!int x\n") == [
        (1, 4, "cannot read 'x' as !!int: invalid literal for int() with base 10: 'x'")
    ]


def test_keys_must_be_strings():
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
    assert len(problems) == 1 and "expands to more than 100,000 values" in problems[0].message


def test_recursive_and_undefined_aliases():
    assert _problems("a: &a [*a]\nb: *nope\n") == [
        (1, 8, "alias *a refers to a value that contains it"),
        (2, 4, "alias *nope is not defined above"),
    ]


def test_deep_nesting_is_refused_without_recursion():
    root, problems = read_yaml("[" * 200_000 + "]" * 200_000)
    assert root is None
    assert problems[0].message == f"nested more than {MAX_DEPTH} levels deep"


def test_syntax_error_points_at_the_problem_and_its_context():
    assert _problems("a: [1, 2\nb: 3\n") == [
        (
            2,
            2,
            (
                "YAML syntax error: did not find expected ',' or ']' "
                "(while parsing a flow sequence that starts at line 1)"
            ),
        )
    ]


def test_control_characters():
    ((line, column, message),) = _problems("a: b\nc: \x07\n")
    assert (line, column) == (2, 4) and "control characters are not allowed" in message


def test_second_document():
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
