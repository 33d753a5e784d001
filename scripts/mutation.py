"""Run mutmut over one module (or a few) with a targeted test selection, without editing
``pyproject.toml``: the checkout's files are copied into a work folder whose ``[tool.mutmut]``
names only those modules and tests, and ``mutmut run`` runs there (docs/testing.md, "Mutation
testing")::

    nice -n 19 python scripts/mutation.py kvcalc/engines/vllm/startup.py \\
        --tests tests/test_vllm_startup.py tests/test_mutants_vllm_startup.py

It prints the survivors (``mutmut results``) at the end; ``--workdir`` keeps the folder (and
mutmut's results in it, so ``mutmut show NAME`` can be run there) between runs — by default a
temporary folder that is removed. mutmut (the ``dev`` extra) must be on ``PATH`` or beside this
Python. Copying the files again starts the run afresh: a result belongs to the selection it was
run with.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: mutmut brings tomli's predecessor, toml
    import toml as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
#: never copied: the repository itself, mutmut's own folder, caches
SKIP = {".git", "mutants", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _config(modules: list[str], tests: list[str]) -> str:
    """``[tool.mutmut]`` narrowed to ``modules`` and ``tests``; the rest as the project sets it."""
    base = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]
    settings = {
        **base,
        "only_mutate": modules,
        "pytest_add_cli_args_test_selection": tests,
    }
    lines = ["[tool.mutmut]"]
    for key, value in settings.items():
        rendered = "[" + ", ".join(f'"{v}"' for v in value) + "]" if isinstance(value, list) else (
            f'"{value}"' if isinstance(value, str) else str(value).lower())  # fmt: skip
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"


def _copy(work: Path) -> None:
    for item in ROOT.iterdir():
        if item.name in SKIP:
            continue
        target = work / item.name
        if item.is_dir():
            shutil.copytree(item, target, ignore=shutil.ignore_patterns(*SKIP))
        else:
            shutil.copy2(item, target)


def _pyproject(text: str, config: str) -> str:
    """The project's ``pyproject.toml`` with its ``[tool.mutmut]`` table replaced by ``config``."""
    start = text.index("[tool.mutmut]")
    rest = text.find("\n[", start + 1)
    return text[:start] + config + (text[rest + 1 :] if rest != -1 else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="the files to mutate (kvcalc/...py)")
    parser.add_argument("--tests", nargs="+", required=True, help="the test files to run")
    parser.add_argument("--workdir", type=Path, help="keep the copy (and the results) here")
    parser.add_argument("--max-children", type=int, default=2)
    args = parser.parse_args(argv)
    for path in (*args.modules, *args.tests):
        if not (ROOT / path).is_file():
            parser.error(f"{path}: no such file in the checkout")
    mutmut = shutil.which("mutmut") or str(Path(sys.executable).with_name("mutmut"))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kvcalc-mutation-"))
    try:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        _copy(work)
        pyproject = work / "pyproject.toml"
        pyproject.write_text(
            _pyproject(pyproject.read_text(encoding="utf-8"), _config(args.modules, args.tests)),
            encoding="utf-8",
        )
        run = subprocess.run([mutmut, "run", "--max-children", str(args.max_children)], cwd=work)
        subprocess.run([mutmut, "results"], cwd=work)
        return run.returncode
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
