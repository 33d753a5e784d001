"""What a person types and reads (issue 15): whole names in pipes, vLLM's spellings, plain help."""

from __future__ import annotations

import re

import pytest
from golden import assert_golden

from kvcalc.errors import InputError
from kvcalc.units import GIB, parse_size, parse_token_count


# -- item 11: token counts as vLLM spells them ---------------------------------------------------
@pytest.mark.parametrize(
    ("text", "tokens"),
    [("32768", 32_768), ("32k", 32_000), ("32K", 32_768), ("1M", 1 << 20), ("1m", 1_000_000),
     ("25.6k", 25_600), (4096, 4096)],
)  # fmt: skip
def test_token_counts_in_vllm_spelling(text, tokens):
    assert parse_token_count(text) == tokens


@pytest.mark.parametrize("text", ["1.5K", "32kb", "abc", "", "1e4", True])
def test_token_counts_refused(text):
    with pytest.raises(InputError):
        parse_token_count(text)


def test_token_count_minimum():
    with pytest.raises(InputError, match="at least 1"):
        parse_token_count("0", what="--max-model-len", minimum=1)


@pytest.mark.parametrize("spelling", ["32K", "32768"])
def test_plan_reads_32K_as_32768(cli, spelling):
    result = cli("plan", "llama-3.1-8b", "--kv-cache-memory", "10GiB", "--max-model-len", spelling,
                 "--no-throughput", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.json["max_model_len"] == 32_768
    # 10 GiB / (128 KiB per token × 16 tokens per block) = 5,120 blocks; 81,920 tokens
    assert result.json["kv_cache_tokens"] == 81_920


@pytest.mark.parametrize("command", [("plan",), ("inspect",), ("compare",)])
def test_every_token_option_takes_32k(cli, command):
    result = cli(*command, "llama-3.1-8b", "--max-model-len", "32k", "--json",
                 *(("--kv-cache-memory", "10GiB", "--no-throughput") if command == ("plan",) else ()))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "32000" in result.stdout.replace(",", "").replace("_", "")


def test_prompt_and_output_len_take_suffixes(cli):
    result = cli("plan", "llama-3.1-8b", "--kv-cache-memory", "10GiB", "--max-model-len", "32K",
                 "--prompt-len", "2k", "--output-len", "1K", "--no-throughput", "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.json["workload_tokens"] == 2_000 + 1_024


def test_bad_token_count_is_an_error_with_a_hint(cli):
    result = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--max-model-len", "32kb")
    assert result.exit_code == 2
    assert result.stderr.startswith("error[invalid-input]: --max-model-len:")
    assert "hint: " in result.stderr and "32K" in result.stderr


def test_suggested_max_model_len_is_pasteable(cli):
    result = cli("plan", "llama-3.1-8b", "--kv-cache-memory", "10", "--max-model-len", "131072",
                 "--no-throughput")  # fmt: skip
    assert result.exit_code == 1
    (line,) = [x for x in result.stdout.splitlines() if "--max-model-len" in x]
    value = re.search(r"--max-model-len (\S+):", line).group(1)
    # the suggestion runs as printed: 10 GiB / 128 KiB per token = 81,920 tokens, less a block
    again = cli("plan", "llama-3.1-8b", "--kv-cache-memory", "10", "--max-model-len", value,
                "--no-throughput", "--json")  # fmt: skip
    assert again.exit_code == 0, again.stderr
    assert again.json["max_model_len"] == int(value) == 81_904


# -- item 12: sizes ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "num_bytes"),
    [("80000000000", 80_000_000_000), ("80", 80 * GIB), ("79.2", round(79.2 * GIB)),
     ("80G", 80 * GIB), ("80g", 80 * 10**9), ("80GB", 80 * 10**9), ("512M", 512 << 20),
     ("1048576", 1 << 20), ("1048575", 1_048_575 * GIB)],
)  # fmt: skip
def test_sizes_as_the_readme_and_vllm_write_them(text, num_bytes):
    assert parse_size(text, bare_unit="gib") == num_bytes


def test_unknown_size_unit_hint_says_a_bare_number_is_gib():
    with pytest.raises(InputError) as info:
        parse_size("80 GX", bare_unit="gib")
    assert "bare number" in info.value.hint and "GiB" in info.value.hint


def test_gpu_memory_in_plain_bytes(cli):
    result = cli("plan", "llama-3.1-8b", "--gpu-memory", "80000000000", "--no-throughput", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json["memory"]["total_bytes"] == 80_000_000_000


# -- items 7, 9, 10: whole names, no highlighting, bare kvcalc ---------------------------------
def test_models_piped_to_grep_finds_whole_names(cli):
    result = cli("models")
    assert result.exit_code == 0
    lines = [x for x in result.stdout.splitlines() if "nemotron" in x.lower()]
    assert lines and all("…" not in x for x in lines)
    assert any("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" in x for x in lines)
    assert "…" not in result.stdout


def test_no_automatic_highlighting_of_data(cli, monkeypatch):
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    result = cli("models")
    row = next(x for x in result.stdout.splitlines() if "gemma-2-9b-it" in x.lower())
    # the alias cell carries no colour codes: rich's number highlighter would split "9" off
    assert "gemma-2-9b-it " in row


def test_bare_kvcalc_prints_the_help_and_no_error(cli):
    result = cli()
    assert result.stderr == ""
    assert result.stdout.startswith("Usage: kvcalc")
    assert result.exit_code == 0


# -- item 8: help at 80 columns ------------------------------------------------------------------
@pytest.mark.parametrize(
    "command", ["plan", "check", "curve", "compare", "throughput", "inspect", "verify"]
)
def test_help_at_80_columns_cuts_nothing(cli, command):
    result = cli(command, "-h")
    assert result.exit_code == 0
    assert "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_plan_help_names_every_option_whole(cli):
    text = cli("plan", "-h").stdout
    for name in (
        "--pipeline-parallel-size",
        "--max-num-batched-tokens",
        "--gpu-memory-utilization",
    ):
        assert name in text
    # help text gets the width left of the option column, not ~22 characters
    assert "Tokens per request (default: the model's, as vLLM derives it);" in " ".join(
        text.split()
    )


# -- goldens at 80 columns, non-TTY --------------------------------------------------------------
def test_plan_verdict_golden_qwen3_l40s_workload(cli):
    result = cli("plan", "qwen3-32b", "--gpu", "L40S", "-tp", "2", "--max-model-len", "32K",
                 "--kv-cache-dtype", "fp8", "--prompt-len", "2000", "--output-len", "500",
                 "--batch", "32", "--no-throughput")  # fmt: skip
    assert_golden("plan_qwen3_32b_l40s_workload", result)


def test_models_golden(cli):
    assert_golden("models", cli("models"))


# -- item 1: the verdict names the length its figure is for ---------------------------------------
def test_verdict_pairs_the_workload_concurrency_with_the_workload_length(cli):
    result = cli("plan", "qwen3-32b", "--gpu", "L40S", "-tp", "2", "--max-model-len", "32K",
                 "--kv-cache-dtype", "fp8", "--prompt-len", "2000", "--output-len", "500",
                 "--batch", "32", "--no-throughput", "--json")  # fmt: skip
    data = result.json
    assert data["workload_tokens"] == 2_500
    assert data["verdict_reason"] == (
        f"{data['workload_concurrency']:.2f} requests of 2,500 tokens fit per engine"
    )


# -- item 2: the engine's max_num_seqs caps what runs -----------------------------------------------
def test_concurrency_above_max_num_seqs_is_capped(cli):
    result = cli("plan", "llama-3.2-1b-instruct", "--gpu", "H100-80GB", "--max-model-len", "1024",
                 "--no-throughput", "--json")  # fmt: skip
    data = result.json
    # the engine's own "Maximum concurrency" stays as it prints it; the scheduler runs 1,024
    assert data["max_concurrency"] > 2_000
    assert data["max_num_seqs"] == 1_024
    assert data["runnable_concurrency"] == 1_024
    assert data["verdict_reason"].endswith("; the engine runs 1,024 at once (max_num_seqs)")


def test_batch_above_max_num_seqs_is_below_target_with_the_cap_suggested(cli):
    result = cli("plan", "llama-3.2-1b-instruct", "--gpu", "H100-80GB", "--max-model-len", "1024",
                 "--batch", "2000", "--no-throughput", "--json")  # fmt: skip
    assert result.exit_code == 1
    data = result.json
    assert data["verdict"] == "below-target"
    assert data["verdict_reason"].startswith("max_num_seqs 1,024 lets the engine run 1,024")
    first = data["suggestions"][0]
    assert first["change"] == {"max_num_seqs": 2000}


def test_check_min_concurrency_is_judged_on_what_the_engine_runs(cli, tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("deployments:\n  - name: capped\n    model: qwen3-8b\n    gpu: L40S\n"
                 "    max_model_len: 16384\n    kv_cache_dtype: fp8\n    max_num_seqs: 16\n"
                 "    requirements:\n      min_concurrency: 20\n", encoding="utf-8")  # fmt: skip
    result = cli("check", str(f))
    assert result.exit_code == 1
    (line,) = [x for x in result.stdout.splitlines() if "min_concurrency is 20" in x]
    assert "16.00 concurrent requests fit" in line and "max_num_seqs 16 runs 16 at once" in line


# -- item 3: a bare number below 1 for a size ----------------------------------------------------
@pytest.mark.parametrize("value", ["0.1", "'0.5'"])
def test_min_headroom_below_one_is_ambiguous(cli, tmp_path, value):
    f = tmp_path / "d.yaml"
    f.write_text("deployments:\n  - name: a\n    model: qwen3-8b\n    gpu: L40S\n"
                 f"    requirements:\n      min_headroom: {value}\n", encoding="utf-8")  # fmt: skip
    result = cli("check", str(f))
    assert result.exit_code == 2
    assert "min_headroom" in result.stdout + result.stderr
    assert "is ambiguous: write a share of the KV pool" in result.stdout + result.stderr


# -- item 13: did you mean -----------------------------------------------------------------------
def test_unknown_model_suggests_the_bundled_alias(cli):
    result = cli("plan", "llama-2-7b", "--gpu", "H100")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith(
        "error[model-not-found]: unknown model 'llama-2-7b'"
    )
    assert result.stderr.splitlines()[1].startswith(
        "hint: did you mean 'llama-2-7b-hf'? `kvcalc models`"
    )


def test_top_level_requirement_says_where_it_goes(cli, tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("deployments:\n  - name: a\n    model: qwen3-8b\n    gpu: L40S\n"
                 "    min_concurrency: 4\n", encoding="utf-8")  # fmt: skip
    result = cli("check", str(f))
    assert result.exit_code == 2
    assert (
        "unknown key 'min_concurrency'; it belongs to a section: move it under `requirements:`"
        in (result.stdout + result.stderr)
    )


# -- --help ends its description with two worked examples, each of which runs --------------------
_COMMANDS = [
    "plan",
    "inspect",
    "check",
    "schema",
    "curve",
    "compare",
    "throughput",
    "models",
    "gpus",
    "verify",
]


def _examples(cli, command: str) -> list[str]:
    text = cli(command, "-h").stdout
    block = text.split("Examples:\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.strip().splitlines()]


@pytest.mark.parametrize("command", _COMMANDS)
def test_help_has_two_worked_examples(cli, command):
    examples = _examples(cli, command)
    assert len(examples) == 2
    assert all(e.startswith(f"kvcalc {command} ") or e == f"kvcalc {command}" for e in examples)


@pytest.mark.parametrize("command", [c for c in _COMMANDS if c != "verify"])
def test_help_examples_run(cli, command):
    import shlex

    for example in _examples(cli, command):
        result = cli(*shlex.split(example)[1:])
        # 1: the fleet example fails two deployments on purpose
        assert result.exit_code in (0, 1), (example, result.stderr)
        assert "error[" not in result.stderr, example


def test_the_app_module_runs_as_a_script_too():
    """``python -m kvcalc.cli.app``: the commands register on the real module's app, and a usage
    error is kvcalc's, not a traceback."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    run = [sys.executable, "-m", "kvcalc.cli.app"]
    listed = subprocess.run([*run, "models", "--json"], cwd=root, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert '"llama-3.1-8b"' in listed.stdout
    bad = subprocess.run([*run, "nope"], cwd=root, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error[usage]: ")
    assert "Traceback" not in bad.stderr
