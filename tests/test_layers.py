"""The package's layers: imports go down only, and no module imports itself back through others.

Every ``import`` counts, at module level, inside functions and under ``TYPE_CHECKING`` alike: a
lazy import still ties the two modules together. The order is written here, once; the picture is in
docs/architecture.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kvcalc"

#: bottom first; a module may import its own layer and the layers before it, nothing after
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("kvcalc.errors", "kvcalc.frozen", "kvcalc.units", "kvcalc.version")),
    ("model", ("kvcalc.model",)),
    ("hfconfig", ("kvcalc.hfconfig",)),
    ("estimate", ("kvcalc.estimate",)),
    ("sources", ("kvcalc.sources",)),
    ("engines", ("kvcalc.engines",)),
    ("planning", ("kvcalc.planning",)),
    ("deploy", ("kvcalc.deploy",)),
    ("verify", ("kvcalc.verify",)),
    ("render", ("kvcalc.render",)),
    ("cli", ("kvcalc.cli",)),
    ("api", ("kvcalc", "kvcalc.__main__")),
)
#: layers that sit side by side: neither may import the other
PEERS = {frozenset({"deploy", "verify"})}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str], *, typing_only: bool = True) -> set[str]:
    """The kvcalc modules ``name`` imports, wherever in the file the import statement sits
    (``typing_only=False``: leaving out ``if TYPE_CHECKING:`` blocks)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if not typing_only:
        _drop_type_checking(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` imports mod
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:  # ``import kvcalc.a.b`` names a known module
                target = target.rpartition(".")[0]
            if target.startswith("kvcalc") and target != name:
                found.add(target)
    return found


def _drop_type_checking(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []


def graph(*, typing_only: bool = True) -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {
        name: imports_of(name, path, known, typing_only=typing_only)
        for name, path in modules.items()
    }


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or (prefix != "kvcalc" and module.startswith(prefix + ".")):
                if len(prefix) > best:
                    best, rank = len(prefix), i
    return rank


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_module_belongs_to_a_layer():
    assert [m for m in all_modules() if layer_of(m) < 0] == []


def test_imports_go_down_the_layers_only():
    wrong = []
    for module, targets in sorted(graph().items()):
        here = layer_of(module)
        for target in sorted(targets):
            there = layer_of(target)
            peers = frozenset({LAYERS[here][0], LAYERS[there][0]}) in PEERS
            if there > here or peers:
                wrong.append(f"{module} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    assert wrong == []


def test_no_import_cycles():
    """Every import that runs counts, lazy ones too; imports for annotations only
    (``if TYPE_CHECKING:``) do not make a cycle, though they must respect the layer order."""
    assert find_cycle(graph(typing_only=False)) is None


def test_no_import_cycles_inside_a_folder():
    """Inside one folder even an import for annotations only closes a cycle: the modules of a
    folder form a tree, so each can be read (and moved) after the ones it names."""
    modules = all_modules()
    edges = {
        name: {t for t in targets if modules[t].parent == modules[name].parent}
        for name, targets in graph(typing_only=True).items()
    }
    assert find_cycle(edges) is None


def test_a_cycle_through_an_annotation_import_inside_a_folder_is_found(tmp_path):
    (tmp_path / "model.py").write_text("from kvcalc.sources.gguf.recurrent import hybrid")
    (tmp_path / "recurrent.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kvcalc.sources.gguf.model import Keys"
    )
    known = {"kvcalc.sources.gguf.model", "kvcalc.sources.gguf.recurrent"}
    edges = {
        name: imports_of(name, tmp_path / f"{name.rpartition('.')[2]}.py", known) for name in known
    }
    assert find_cycle(edges) == [
        "kvcalc.sources.gguf.model", "kvcalc.sources.gguf.recurrent", "kvcalc.sources.gguf.model"
    ]  # fmt: skip
    runtime = {
        name: imports_of(name, tmp_path / f"{name.rpartition('.')[2]}.py", known, typing_only=False)
        for name in known
    }
    assert find_cycle(runtime) is None  # the runtime check alone would miss it


def runtime_imports(path: Path) -> set[str]:
    """Modules a file imports when it runs (``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    _drop_type_checking(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_planning_does_io_in_its_api_module_only():
    """The planning core is pure: files, the Hub and calibration records are reached only from
    ``kvcalc.planning.api``."""
    io = ("kvcalc.sources", "pathlib", "io", "json", "huggingface_hub", "shutil", "tempfile")
    # decodes the JSON text of a serving command's -cc flag, no file
    json_text = {"kvcalc.planning.servecmd_compile"}
    wrong = {
        name: sorted(m for m in runtime_imports(path) if any(m == i or m.startswith(i + ".") for i in io)
                     and not (m == "json" and name in json_text))
        for name, path in all_modules().items()
        if name.startswith("kvcalc.planning.") and name != "kvcalc.planning.api"
    }  # fmt: skip
    assert {k: v for k, v in wrong.items() if v} == {}


# -- the checker itself, on small made-up graphs and files ------------------------------------


def test_a_cycle_is_found_and_named():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(edges) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from kvcalc.units import cdiv", {"kvcalc.units"}),
        ("def f():\n    from kvcalc.model import shape", {"kvcalc.model.shape"}),
        ("import kvcalc.model.shape as s", {"kvcalc.model.shape"}),
        ("from . import shape", {"kvcalc.model.shape"}),
        ("from .shape import ModelShape", {"kvcalc.model.shape"}),
        ("if TYPE_CHECKING:\n    from kvcalc.errors import KvcalcError", {"kvcalc.errors"}),
    ],
)
def test_every_kind_of_import_is_seen(tmp_path, source, expected):
    path = tmp_path / "dtypes.py"
    path.write_text(source)
    known = {"kvcalc", "kvcalc.units", "kvcalc.errors", "kvcalc.model", "kvcalc.model.shape"}
    assert imports_of("kvcalc.model.dtypes", path, known) == expected


def test_layer_ranks():
    assert layer_of("kvcalc.errors") < layer_of("kvcalc.model.shape") < layer_of("kvcalc.cli.app")
    assert layer_of("kvcalc") == len(LAYERS) - 1
    assert layer_of("kvcalc.engines.vllm.groups") == layer_of("kvcalc.engines")


def test_no_engine_borrows_from_another_engine():
    """Shared helpers live in ``kvcalc.engines.common`` (or ``base``, ``extra``, ``names``...),
    not in one engine's modules that another engine imports."""
    shared = {
        "kvcalc.engines",
        "kvcalc.engines.base",
        "kvcalc.engines.common",
        "kvcalc.engines.extra",
        "kvcalc.engines.names",
        "kvcalc.engines.unmodelled",
        "kvcalc.engines.formats",
        "kvcalc.engines.dtype_names",
        "kvcalc.engines.catalogue",
        "kvcalc.engines.speculative",
        "kvcalc.engines.flag_table",
        "kvcalc.engines.lora_options",
        "kvcalc.engines.host_options",
    }

    def engine_of(module: str) -> str | None:  # engines/llamacpp/log.py belongs to llamacpp
        parts = module.split(".")
        return parts[2].split("_")[0] if len(parts) > 2 and module not in shared else None

    wrong = [
        f"{m} imports {t}"
        for m, targets in sorted(graph().items())
        if engine_of(m) and m.startswith("kvcalc.engines.")
        for t in sorted(targets)
        if t.startswith("kvcalc.engines.") and engine_of(t) and engine_of(t) != engine_of(m)
    ]
    assert wrong == []


def test_engines_holds_the_shared_modules_and_one_room_per_engine():
    """``engines/`` has the protocol, the names and the shared helpers, and one package (or, for a
    small engine, one module) per engine; an engine's modules live in its package."""
    from kvcalc.engines.names import EngineName

    shared = {
        "__init__",
        "base",
        "common",
        "dtype_names",
        "extra",
        "catalogue",
        "flag_table",
        "formats",
        "host_options",
        "lora_options",
        "names",
        "speculative",
        "unmodelled",
    }
    folder = PACKAGE / "engines"
    flat = {p.stem for p in folder.glob("*.py")} - shared
    packages = {p.parent.name for p in folder.glob("*/__init__.py")}
    engines = {name.value for name in EngineName}
    assert flat <= engines and packages <= engines, (flat - engines, packages - engines)
    assert flat | packages == engines and not flat & packages


def test_verify_keeps_each_engine_run_in_its_room():
    """The llama.cpp GGUF writers and runner are one package, ``verify/llamacpp/``."""
    assert [p.name for p in (PACKAGE / "verify").glob("*llamacpp*.py")] == []
