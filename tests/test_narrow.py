"""In an 80-column terminal ``models``, ``gpus``, ``compare``, ``check`` and ``inspect`` stay
readable: tables that do not fit drop their prose columns (listed under the table) or stack each
row, rather than let the terminal wrap every row; no header or cell is cut (``…``); every GPU
alias is shown. (Piped output keeps the whole-width tables of the golden files.)"""

from __future__ import annotations

import pytest

import kvcalc.render.console as console
from kvcalc.model.gpus import list_gpus

COMMANDS = {
    "models": ["models"],
    "gpus": ["gpus"],
    "compare": ["compare", "qwen3-8b", "llama-3.1-8b", "mistral-7b-v0.1", "--max-model-len", "32768",
                "--gpu", "H100"],
    "check": ["check", "tests/fixtures/deployments/good/multi.yaml"],
    "inspect": ["inspect", "qwen3-next-80b-a3b-thinking"],
}  # fmt: skip


@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setattr(console, "stdout_is_terminal", lambda: True)  # COLUMNS is 80 (conftest)


def _table_lines(stdout: str) -> list[str]:
    # the check's findings and suggestions are sentences: the terminal wraps those
    return [line for line in stdout.splitlines() if not line.startswith(("FAIL ", "  try:"))]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_fits_80_columns_with_nothing_cut(cli, terminal, name):
    result = cli(*COMMANDS[name])
    assert result.exit_code in (0, 1), result.stderr
    lines = _table_lines(result.stdout)
    assert [line for line in lines if len(line.rstrip()) > 80] == []
    assert "…" not in result.stdout


def test_a_stacked_row_keeps_every_figure(cli, terminal):
    out = cli(*COMMANDS["models"]).stdout
    # Llama-3.1-8B: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B = 131,072 B = 128.00 KiB a token
    assert "\nllama-3.1-8b  meta-llama/Llama-3.1-8B\n    attention GQA · layers 32 ·" in out
    assert (
        "llama-3.1-8b meta-llama/Llama-3.1-8B attention GQA · layers 32 · KV / token (auto) 128.00 KiB · max len 131,072"
        in " ".join(out.split())
    )


def test_every_gpu_alias_is_discoverable(cli, terminal):
    out = " ".join(cli("gpus").stdout.split())
    for gpu in list_gpus():
        for alias in gpu.aliases:
            assert alias in out, alias


def test_inspect_layer_headers_keep_their_unit(cli, terminal):
    out = cli("inspect", "llama-3.1-8b").stdout
    assert "bytes/token" in out and "state/request" in out and "per layer" in out
    # 8 KV heads × (128 + 128) × 2 B = 4,096 B per token per layer
    assert "4,096" in out
