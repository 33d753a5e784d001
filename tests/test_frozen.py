"""``kvcalc.frozen.frozen`` behaves as ``dataclass(frozen=True, kw_only=True)`` does.

Each test builds the same class twice, once with the standard library's decorator and once with
kvcalc's, and compares what users of the class can see: equality, hashes, repr, frozenness,
``replace``, ``fields`` and ``asdict``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcalc.frozen import frozen

values = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.tuples(st.integers()))


def _pair(decorate_body):
    """The same class under ``dataclass(frozen=True, kw_only=True)`` and under ``frozen``."""
    return (
        dataclass(frozen=True, kw_only=True)(decorate_body()),
        frozen(decorate_body()),
    )


def _point():
    class Point:
        x: object
        y: object = 0
        note: object = field(default="", compare=False, repr=False)
        tags: tuple[str, ...] = field(default_factory=tuple)

    return Point


#: built once: defining a class per example would spend the examples' time in ``dataclass``
STD_POINT, OUR_POINT = _pair(_point)


@settings(deadline=None)  # what is compared is behaviour, not time (a loaded CI machine)
@given(x=values, y=values, note=values, x2=values, y2=values)
def test_equality_hash_and_repr_are_dataclass_s(x, y, note, x2, y2):
    std, ours = STD_POINT, OUR_POINT
    a, b = std(x=x, y=y, note=note), std(x=x2, y=y2, note="other")
    c, d = ours(x=x, y=y, note=note), ours(x=x2, y=y2, note="other")
    assert (a == b) is (c == d)
    assert hash(a) == hash(c)  # both hash the tuple (x, y, tags): note is not compared
    assert repr(a) == repr(c)  # note has repr=False
    assert dataclasses.asdict(a) == dataclasses.asdict(c)
    assert [f.name for f in dataclasses.fields(std)] == [f.name for f in dataclasses.fields(ours)]


def test_one_field_and_no_field_hash_as_dataclass_does():
    def one():
        class One:
            n: int

        return One

    def none():
        class Empty:
            pass

        return Empty

    std, ours = _pair(one)
    assert hash(std(n=5)) == hash(ours(n=5)) == hash((5,))
    std, ours = _pair(none)
    assert std() == std() and ours() == ours()
    assert hash(ours()) == hash(std()) == hash(())
    assert repr(ours()) == repr(std()) and repr(ours()).endswith(".<locals>.Empty()")


def test_frozen_keyword_only_and_replace():
    _, ours = _pair(_point)
    p = ours(x=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        ours(1)  # type: ignore[misc]  # keyword-only, as kw_only=True makes it
    q = dataclasses.replace(p, y=3)
    assert (q.x, q.y, p.y) == (1, 3, 0)
    assert q != p and q == ours(x=1, y=3)


def test_other_classes_are_not_equal():
    std, ours = _pair(_point)
    assert ours(x=1) != std(x=1)
    assert ours(x=1).__eq__(std(x=1)) is NotImplemented

    @frozen
    class Child(ours):  # type: ignore[valid-type,misc]
        z: int = 0

    assert Child(x=1) != ours(x=1)  # another class, as a dataclass subclass is
    assert repr(Child(x=1, z=2)) == (
        "test_other_classes_are_not_equal.<locals>.Child(x=1, y=0, tags=(), z=2)"
    )


def test_methods_the_class_writes_are_kept():
    @frozen
    class Own:
        n: int

        def __eq__(self, other: object) -> bool:
            return True

        def __repr__(self) -> str:
            return "own"

    assert Own(n=1) == Own(n=2) and repr(Own(n=1)) == "own"
    assert hash(Own(n=1)) == hash((1,))  # as dataclass: a body __eq__ alone gets the field hash

    @frozen
    class OwnHash:
        n: int

        def __hash__(self) -> int:
            return 7

    assert hash(OwnHash(n=1)) == 7


def test_recursive_repr_does_not_loop():
    @frozen
    class Box:
        items: list[object]

    box = Box(items=[])
    box.items.append(box)
    assert repr(box) == "test_recursive_repr_does_not_loop.<locals>.Box(items=[...])"


def test_kvcalc_defines_its_frozen_records_with_frozen():
    """Start-up depends on it (docs/performance.md): a keyword-only frozen record spelled with the
    standard library's decorator costs three compiled methods more to define."""
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "kvcalc"
    spelled = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name != "frozen.py"
        and "@dataclass(frozen=True, kw_only=True)" in path.read_text(encoding="utf-8")
    ]
    assert spelled == []
