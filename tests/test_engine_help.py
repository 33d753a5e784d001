"""``--engine-version`` and ``-E`` list every engine's profiles and options, from the engines' own
tables: the versions each engine accepts and the keys its option check lets through."""

from __future__ import annotations

import re

import pytest

from kvcalc.engines import ENGINE_NAMES, get_engine


def _flat(text: str) -> str:
    return " ".join(text.split())


def _known_options(cli, engine: str) -> list[str]:
    """The keys the engine's own option check accepts, as its refusal of an unknown key lists them."""
    r = cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--engine", engine, "-E", "no_such_key=1")
    assert r.exit_code == 2 and "error[unknown-engine-option]" in r.stderr, r.stderr
    (known,) = re.findall(r"known: (.*)", _flat(r.stderr))
    return known.split(", ")


@pytest.mark.parametrize("command", ["plan", "verify"])
def test_every_profile_of_every_engine_is_listed(cli, command):
    page = _flat(cli(command, "--help").stdout)
    for engine in ENGINE_NAMES:
        versions = ", ".join(get_engine(engine).versions)
        assert f"{engine}: {versions}" in page, engine
    # vLLM's profiles, newest first, as they stand (0.28 and 0.20 were missing from the old text)
    assert "vllm: 0.33, 0.28, 0.21, 0.20, 0.10, 0.8, 0.6;" in page


def test_every_engine_option_is_listed_with_its_engine(cli):
    page = _flat(cli("plan", "--help").stdout)
    for engine in ENGINE_NAMES:
        keys = _known_options(cli, engine)
        assert f"{engine}: {', '.join(keys)}" in page, engine
    assert "trtllm: tokens_per_block, max_tokens;" in page


def test_a_command_note_is_kept(cli):
    page = _flat(cli("verify", "--help").stdout)
    assert "lmdeploy: 0.18. hf: the installed transformers." in page
