"""``kvcalc check`` and ``kvcalc schema`` end to end: golden output per format and exit code, the
CI workflow of docs/ci.md and the pre-commit hook run on examples/, and the JSON contract."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from golden import assert_golden

from kvcalc.errors import REPOSITORY_URL

DEPLOY = "tests/fixtures/deployments"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    """Paths in the output are as given: run from the repository root, offline, outside Actions."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _run(args, cwd, env, *, shell: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, env=env, shell=shell, capture_output=True, text=True, check=False
    )


GOLDEN = {
    # name: (exit code, arguments)
    "check/multi_table": (1, [f"{DEPLOY}/good/multi.yaml"]),
    "check/multi_markdown": (1, [f"{DEPLOY}/good/multi.yaml", "--format", "markdown"]),
    "check/multi_github": (1, [f"{DEPLOY}/good/multi.yaml", "--format", "github"]),
    "check/multi_exit_zero": (0, [f"{DEPLOY}/good/multi.yaml", "--exit-zero", "-f", "github"]),
    "check/multi_fail_on_tight": (1, [f"{DEPLOY}/good/multi.yaml", "--fail-on", "tight", "-f", "github"]),
    "check/kv_memory_json": (1, [f"{DEPLOY}/good/kv_memory.yaml", "--format", "json"]),
    "check/single_table": (0, [f"{DEPLOY}/good/single.yaml"]),
    "check/single_markdown": (0, [f"{DEPLOY}/good/single.yaml", "-f", "markdown"]),
    "check/command_table": (0, [f"{DEPLOY}/good/command.yaml"]),
    "check/every_problem": (2, [f"{DEPLOY}/bad/every_problem.yaml"]),
    "check/every_problem_github": (2, [f"{DEPLOY}/bad/every_problem.yaml", "-f", "github"]),
    "check/unknown_model_json": (2, [f"{DEPLOY}/bad/unknown_model.yaml", "-f", "json"]),
    "check/several_bad_files": (2, [f"{DEPLOY}/bad/too_deep.yaml", f"{DEPLOY}/bad/tags.yaml",
                                    f"{DEPLOY}/bad/duplicate_key.yaml", "no/such/file.yaml",
                                    "no/*.yaml"]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_check_golden(cli, name):
    code, args = GOLDEN[name]
    result = cli("check", *args)
    assert result.exit_code == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "error[internal]" not in result.stderr
    assert_golden(name, result)


def test_json_contract(cli):
    result = cli("check", f"{DEPLOY}/good/multi.yaml", "--format", "json")
    assert result.exit_code == 1, result.stderr
    data = result.json
    assert [d["name"] for d in data] == [
        "chat-8b",
        "chat-8b-tight",
        "rag-70b",
        "long-context-70b",
        "qwen-fp8",
    ]
    assert [d["passed"] for d in data] == [True, True, False, False, False]
    first = data[0]
    assert list(first)[:6] == ["name", "file", "line", "passed", "failures", "requirements"]
    for key in ("model", "engine", "engine_version", "gpu", "kv_cache_dtype", "block_size", "num_blocks",
                "kv_cache_bytes", "kv_cache_tokens", "max_concurrency", "available_kv_bytes",
                "weights_bytes", "num_parameters", "kv_bytes_per_token", "max_model_len",
                "estimated_max_model_len", "verdict", "headroom_bytes", "headroom_fraction",
                "workload_concurrency", "suggestions", "notes"):  # fmt: skip
        assert key in first, key
    assert (first["file"], first["line"]) == (f"{DEPLOY}/good/multi.yaml", 3)
    rag = data[2]
    assert [f["requirement"] for f in rag["failures"]] == ["allow_verdicts", "min_concurrency"]
    assert set(rag["failures"][0]) == {"requirement", "expected", "actual", "message", "line"}
    assert (
        rag["failures"][0]["expected"] == ["ok", "tight"]
        and rag["failures"][0]["actual"] == "below-target"
    )
    assert rag["suggestions"], "failing deployments carry computed suggestions"


def test_github_format_appends_the_job_summary(cli, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = cli("check", f"{DEPLOY}/good/single.yaml", "-f", "github")
    assert result.exit_code == 0
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### ✅ kvcalc check: the deployment passes")
    assert "| ✅ | **chat-8b**" in text


def test_paths_folders_and_globs(cli):
    by_folder = cli("check", "examples/deployments", "-f", "json").json
    by_glob = cli("check", "examples/**/*.yaml", "-f", "json").json
    assert [d["name"] for d in by_folder] == [d["name"] for d in by_glob]
    assert [d["file"] for d in by_glob] == ["examples/deployments/chat.yaml"] + [
        "examples/deployments/fleet.yaml"
    ] * 4 + ["examples/deployments/vllm-command.yaml"]
    twice = cli(
        "check", "examples/deployments/chat.yaml", "examples/deployments/chat.yaml", "-f", "json"
    ).json
    assert len(twice) == 1


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        # click's own account of its usage errors follows the code; kvcalc's hint is asserted
        (["check"], None, "see 'kvcalc check -h'"),
        (["check", "x.yaml", "--format", "xml"], "--format 'xml' is not a report format",
         "choose one of: table, json, markdown, github"),
        (["check", f"{DEPLOY}/good/single.yaml", "--fail-on", "wont-start"], "--fail-on: unknown verdict 'wont-start'",
         "choose from: ok, tight, below-target, cheaper"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2(cli, args, message, hint):
    result = cli(*args)
    assert result.exit_code == 2 and result.stdout == ""
    error, hint_line = result.stderr.splitlines()
    assert error.startswith("error[usage]: ") and hint_line == f"hint: {hint}"
    if message is not None:
        assert error == f"error[usage]: {message}"


def test_help_documents_exit_codes(cli):
    result = cli("check", "-h")
    assert result.exit_code == 0
    flat = " ".join(result.stdout.split())
    assert "Exit status: 0 every deployment passes; 1 at least one fails" in flat
    assert "2 the check could not run" in flat


def test_schema_command_prints_the_published_schema(cli):
    result = cli("schema")
    assert result.exit_code == 0
    published = (ROOT / "kvcalc" / "data" / "deployment.schema.json").read_text(encoding="utf-8")
    assert json.loads(result.stdout) == json.loads(published)


def test_plan_and_inspect_do_not_import_yaml():
    code = (
        "import sys\nfrom kvcalc.cli.app import main\n"
        "for args in (['plan', 'llama-3.1-8b', '--gpu', 'H100-80GB', '--no-throughput'], "
        "['inspect', 'llama-3.1-8b']):\n"
        "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
        "print('yaml' in sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = _run([sys.executable, "-c", code], ROOT, env)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr


# -- docs/ci.md and the pre-commit hook, run on the example layout ---------------------------------
def _shim(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``kvcalc`` is this checkout's (a stale installed copy must not answer)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "kvcalc"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kvcalc "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "KVCALC_DEBUG")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=str(ROOT),
        HF_HUB_OFFLINE="1",
        COLUMNS="120",
        NO_COLOR="1",
    )
    return env


def _example_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", repo)
    return repo


def _ci_workflow() -> tuple[dict, list[str]]:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    workflow = yaml.safe_load(next(b for b in blocks if "jobs:" in b))
    # the block scripts/docs.py writes: "$ COMMAND", then what it printed
    sample = re.search(
        r"fails \(exit 1\) with:\n\n<!-- docs.py: [^\n]*-->\n```text\n\$ [^\n]*\n(.*?)```",
        text,
        flags=re.DOTALL,
    ).group(1)
    return workflow, sample.strip().splitlines()


def test_ci_workflow_runs_as_written_on_the_examples(tmp_path):
    workflow, sample = _ci_workflow()
    steps = workflow["jobs"]["check"]["steps"]
    runs = [s["run"] for s in steps if "run" in s]
    # kvcalc is not on the package index: the workflow installs it from the repository (the
    # install step is not run here: this checkout is used)
    assert runs[0] == f'pip install "kvcalc @ git+{REPOSITORY_URL}"'
    checks = [r for r in runs if r.startswith("kvcalc ")]
    assert checks == ["kvcalc check deployments/*.yaml --format github"]
    repo = _example_repo(tmp_path)
    env = _shim(tmp_path)
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    done = _run(checks[0], repo, env, shell=True)
    # two deployments of examples/deployments/fleet.yaml fail on purpose: the step fails
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    errors = [line for line in out if line.startswith("::error ")]
    assert [re.search(r"line=(\d+)", e).group(1) for e in errors] == ["27", "29", "35"]
    assert all("file=deployments/fleet.yaml," in e for e in errors)
    assert sum(line.startswith("::notice ") for line in out) == 4
    for line in sample:  # the output docs/ci.md shows is the output
        prefix = line.removesuffix("...").rstrip()
        assert any(o.startswith(prefix) for o in out), line
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("### ❌ kvcalc check: 4 of 6 deployments pass")
    # the same repository after fixing the failing deployments: the step passes
    fleet = repo / "deployments" / "fleet.yaml"
    text = fleet.read_text(encoding="utf-8")
    text = text.replace(
        "    max_num_seqs: 16\n    requirements:\n      min_concurrency: 16\n",
        "    max_num_seqs: 8\n    requirements:\n      min_concurrency: 8\n",
    )
    fleet.write_text(
        text.replace("max_model_len: 131072", "max_model_len: 16384"), encoding="utf-8"
    )
    done = _run(checks[0], repo, env, shell=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pre_commit_hook_runs_on_the_examples(tmp_path):
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "kvcalc-check" and hook["entry"] == "kvcalc check"
    assert hook["language"] == "python" and hook.get("pass_filenames", True)
    repo = _example_repo(tmp_path)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "kvcalc.yml").write_text("on: push\n", encoding="utf-8")
    (repo / "serving.kvcalc.yaml").write_text("model: qwen3-8b\ngpu: L40S\nmax_model_len: 8192\n")
    files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())
    # what pre-commit does: filter by `files` (re.search) and `types: [yaml]`, then run entry + files
    pattern = re.compile(hook["files"])
    staged = [f for f in files if pattern.search(f) and f.endswith((".yaml", ".yml"))]
    assert staged == [
        "deployments/chat.yaml",
        "deployments/fleet.yaml",
        "deployments/vllm-command.yaml",
        "serving.kvcalc.yaml",
    ]
    env = _shim(tmp_path)
    done = _run(hook["entry"].split() + staged, repo, env)
    assert done.returncode == 1, done.stderr
    assert "FAIL rag-70b (deployments/fleet.yaml:27)" in done.stdout
    assert done.stdout.rstrip().endswith("5 of 7 deployments pass")
    only_good = _run(hook["entry"].split() + ["deployments/chat.yaml"], repo, env)
    assert only_good.returncode == 0, only_good.stdout


def test_an_unknown_format_is_refused_in_kvcalcs_words(cli):
    """typer's enum conversion answered "Invalid value for '--format' / '-f': Value error, 'html'
    is not one of ..." — a dependency's wording."""
    result = cli("check", "tests/fixtures/deployments/good", "--format", "html")
    assert result.exit_code == 2
    assert "error[usage]: --format 'html' is not a report format" in result.stderr
    assert "Value error" not in result.stderr and "is not one of" not in result.stderr


@pytest.mark.parametrize(("flag", "words"), [("--num-blocks", "expected a whole number"),
                                             ("--tolerance", "expected a number")])  # fmt: skip
def test_typed_options_are_refused_in_kvcalcs_words(cli, flag, words):
    """typer converts these through pydantic, whose "Input should be a valid integer, unable to
    parse string as an integer" reached the user."""
    result = cli("verify", "qwen3-1.7b", "--gpu", "H100", flag, "abc")
    assert result.exit_code == 2 and f"Invalid value for '{flag}': {words}" in result.stderr
    assert "Input should be" not in result.stderr


def test_one_failing_deployment_is_summed_up_in_words(cli, tmp_path):
    # Llama-3.1-70B's bf16 weights (~131 GiB) cannot load on one 24 GB L4: the check runs and fails
    path = tmp_path / "big.yaml"
    path.write_text("name: big\nmodel: llama-3.1-70b\ngpu: L4\nmax_model_len: 4096\n", "utf-8")
    result = cli("check", str(path), "--offline")
    assert result.exit_code == 1
    assert result.stdout.endswith("the deployment fails\n"), result.stdout
