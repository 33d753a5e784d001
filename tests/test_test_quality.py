"""The tests themselves: every test function asserts something (``docs/testing.md``).

An AST scan of ``tests/test_*.py``: a test function passes when its body holds an ``assert``, a
``pytest.raises``/``pytest.warns``/``pytest.fail`` call, or a call to a function that does —
defined in the same module or in the shared helpers (``helpers.py``, ``golden.py``,
``verify_helpers.py``, ``gguf_helpers.py``, ``conftest.py``), followed through calls. A test that
only runs code (``LLAMACPP.compute_buffer(request)`` with the result dropped) passes whatever the
code computes.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
HELPERS = ("helpers.py", "golden.py", "verify_helpers.py", "gguf_helpers.py", "conftest.py")
CHECKS = {"raises", "warns", "fail", "deprecated_call"}


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _calls(node: ast.AST) -> set[str]:
    return {n for c in ast.walk(node) if isinstance(c, ast.Call) and (n := _name(c.func))}


def _asserts_itself(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node)) or bool(_calls(node) & CHECKS)


def _functions(tree: ast.AST) -> dict[str, ast.AST]:
    return {
        n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }  # fmt: skip


def _asserting(functions: dict[str, ast.AST]) -> set[str]:
    """Names of the functions that assert, directly or through the functions they call."""
    found = {name for name, node in functions.items() if _asserts_itself(node)}
    grew = True
    while grew:
        grew = False
        for name, node in functions.items():
            if name not in found and _calls(node) & found:
                found.add(name)
                grew = True
    return found


def assertion_free(source: str, helpers: dict[str, ast.AST]) -> list[str]:
    """The test functions in ``source`` that assert nothing."""
    local = _functions(ast.parse(source))
    helpers_here = {**helpers, **{k: v for k, v in local.items() if not k.startswith("test")}}
    asserting = _asserting(helpers_here)
    return sorted(
        name
        for name, node in local.items()
        if name.startswith("test") and not _asserts_itself(node) and not _calls(node) & asserting
    )


def _helpers() -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for name in HELPERS:
        if (TESTS / name).exists():
            found.update(_functions(ast.parse((TESTS / name).read_text())))
    return found


def test_every_test_asserts_something():
    helpers = _helpers()
    found = {
        p.name: bad
        for p in sorted(TESTS.glob("test_*.py"))
        if (bad := assertion_free(p.read_text(), helpers))
    }
    assert found == {}


def test_the_scan_finds_a_test_that_only_runs_code():
    source = (
        "def check(x):\n    assert x\n\n"
        "def test_runs_only():\n    compute(1)\n\n"
        "def test_asserts():\n    assert compute(1) == 2\n\n"
        "def test_through_a_helper():\n    check(compute(1))\n\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        compute(0)\n"
    )
    assert assertion_free(source, {}) == ["test_runs_only"]
