"""``@frozen``: a frozen, keyword-only dataclass that is cheaper to define.

``@frozen`` is ``@dataclass(frozen=True, kw_only=True)``: the same ``__init__``, the same
``FrozenInstanceError`` on assignment, the same ``fields``/``replace``/``asdict``, and the same
equality, hash and repr. Only how the last three are made differs: the standard library compiles
each generated method from source with an ``exec`` of its own (until Python 3.13), about 0.1 ms
apiece on a slow machine, and the ~180 frozen classes kvcalc defines on the way to a ``plan``
spent about a third of the command's start-up there. Here ``__eq__``, ``__hash__`` and
``__repr__`` are closures over the class's field names, built without compiling anything; the
standard library still writes ``__init__``, ``__setattr__`` and ``__delattr__``.
``tests/test_frozen.py`` holds every behaviour to what ``dataclass`` itself does.
"""

from __future__ import annotations

import dataclasses
import reprlib
import sys
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10: the decorator only informs type checkers

    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorated: decorated


T = TypeVar("T")


def _values(names: list[str]) -> Callable[[object], tuple[object, ...]]:
    """The named attributes of an object as a tuple (``attrgetter`` unpacks a single name)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def frozen(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True, kw_only=True)`` with shared equality, hash and repr."""
    own = dict(cls.__dict__)  # what the class body writes wins, as with ``dataclass``
    made = dataclasses.dataclass(frozen=True, kw_only=True, eq=False, repr=False)(cls)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    compared = _values([f.name for f in fields if f.compare])
    hashed = _values([f.name for f in fields if f.hash or (f.hash is None and f.compare)])
    shown = [(f.name, attrgetter(f.name)) for f in fields if f.repr]

    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: object) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: object) -> str:
        inner = ", ".join(f"{name}={get(self)!r}" for name, get in shown)
        return f"{self.__class__.__qualname__}({inner})"

    if "__eq__" not in own:
        made.__eq__ = __eq__  # type: ignore[method-assign]
    # a body that writes ``__eq__`` alone gets ``__hash__ = None`` from Python: dataclass replaces it
    if "__hash__" not in own or (own["__hash__"] is None and "__eq__" in own):
        made.__hash__ = __hash__  # type: ignore[method-assign]
    if "__repr__" not in own:
        made.__repr__ = __repr__  # type: ignore[method-assign]
    for method in (__eq__, __hash__, __repr__):
        method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
    return made
