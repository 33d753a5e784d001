"""The README stays true: its Python example runs, every command is documented and has help."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_python_example_runs():
    block = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    lines = [line.split("#")[0] for line in block.splitlines()]
    namespace: dict = {}
    exec("\n".join(lines), namespace)  # noqa: S102 - our own README
    assert namespace["model"].bytes_per_token == 131_072


def test_readme_opens_with_the_two_commands():
    first = [line.strip() for line in README.splitlines() if line.startswith("    ")][:2]
    assert first[0] == "pip install . && kvcalc plan llama-3.1-8b --gpu H100-80GB"
    assert first[1].startswith('pip install ".[test') and first[1].endswith("python -m pytest -q")


@pytest.mark.parametrize("command", ["inspect", "models", "gpus", "plan", "check", "schema", "verify",
                                     "curve", "compare", "throughput", "recommend"])  # fmt: skip
def test_every_command_is_documented_and_has_help(cli, command):
    assert f"kvcalc {command}" in README
    result = cli(command, "-h")
    assert result.exit_code == 0, result.stderr
    # the command's own summary (its docstring's first line), however typer lays the page out
    from kvcalc.cli.app import app

    (info,) = [c for c in app.registered_commands if (c.name or c.callback.__name__) == command]
    summary = " ".join((info.help or info.callback.__doc__).split("\n\n")[0].split())
    assert summary in " ".join(result.stdout.split())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_ci_floors_are_the_floors_of_pyproject():
    """.ci/floors.txt pins each direct dependency at the lowest version pyproject.toml allows."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]", 1)[1].split("\n[project.scripts]", 1)[0]
    floors: dict[str, str] = {}
    for requirement in re.findall(r'^\s*"([^"]+)",?$|= \["([^"]+)"\]', project, re.M):
        requirement = next(r for r in requirement if r)
        if ">=" in requirement:
            floors[_name(requirement)] = requirement.split(">=", 1)[1]
    pinned = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pinned[_name(name)] = version
    floors.pop("torch")  # both passes install the README's torch==2.13.0
    floors.pop("llama-cpp-python", None)  # compiled: the floors pass reuses the newest pass's build
    assert {"typer", "pyyaml", "huggingface-hub", "transformers", "jsonschema"} <= set(floors)
    from packaging.version import Version  # pytest's own dependency

    assert {n: Version(v) for n, v in pinned.items()} == {n: Version(v) for n, v in floors.items()}


def _common_tasks() -> list[str]:
    section = README.split("\n## Common tasks\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.startswith("kvcalc ")]


def test_readme_common_tasks_cover_the_four_jobs():
    commands = _common_tasks()
    assert len(commands) == 8
    assert any(c.startswith("kvcalc check ") for c in commands)
    assert any("--from-command 'vllm serve" in c for c in commands)
    assert (
        len(
            {c.split("--gpu ")[1].split()[0] for c in commands if c.startswith("kvcalc plan llama")}
        )
        == 3
    )


@pytest.mark.parametrize("command", _common_tasks())
def test_readme_common_tasks_run(cli, command, monkeypatch):
    import shlex

    monkeypatch.chdir(ROOT)  # the example deployment files are named from the checkout's root
    result = cli(*shlex.split(command)[1:])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.strip()
