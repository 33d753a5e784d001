"""A Hugging Face token given by ``--token`` or the environment never appears in anything kvcalc
prints: results, JSON, error lines, hints, tracebacks (``KVCALC_DEBUG=1``), warnings, or what a
library prints while a command runs. In-process (the real ``main()``) and, for the paths that print
through file descriptors, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from conftest import ROOT
from hubserver import serve_fake_hub

TOKEN = "hf_kvcalcLEAKcanary0123456789abcdefXYZ"
TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 16, "vocab_size": 64, "max_position_embeddings": 128,
        "torch_dtype": "bfloat16"}  # fmt: skip


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    yield from serve_fake_hub(tmp_path, monkeypatch)


def _show_on_stderr(message, category, filename, lineno, file=None, line=None):
    """What Python does with a warning outside pytest: write it to the current sys.stderr."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _raises(exc: BaseException):
    def boom(*args, **kwargs):
        raise exc

    return boom


def _scenarios(fake_hub, tmp_path):
    """(name, args, arrange): arrange(mp) runs just before its command; mp is undone after it."""
    from kvcalc.errors import KvcalcError
    from kvcalc.planning import api as planning

    fake_hub.add("acme/tiny", {"config.json": TINY})
    fake_hub.add("acme/gated", {"config.json": TINY}, gated=True, gated_token="hf_someoneElse")
    fake_hub.add("acme/down", {"config.json": TINY}, fail_status=401,
                 fail_headers={"X-Error-Message": f"Invalid credentials: {TOKEN}"})  # fmt: skip
    deploy = tmp_path / "d.yaml"
    deploy.write_text(
        "model: llama-3.1-8b\ngpu: H100-80GB\nmax_model_len: 8192\n", encoding="utf-8"
    )

    def nothing(mp):
        return None

    def warn_with_token(mp):
        # a library warning (or print) during the command, quoting the token
        def plan_and_warn(*args, **kwargs):
            warnings.warn(f"token {TOKEN} looks odd", UserWarning, stacklevel=1)
            print(f"debug: Authorization: Bearer {TOKEN}")
            return real(*args, **kwargs)

        real = planning.plan_reference
        mp.setattr(planning, "plan_reference", plan_and_warn)

    return [
        ("inspect bundled", ["inspect", "llama-3.1-8b", "--json"], nothing),
        ("plan json", ["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--json"], nothing),
        ("plan table", ["plan", "llama-3.1-8b", "--gpu", "L4"], nothing),
        ("hub model", ["inspect", "acme/tiny", "--json"], nothing),
        ("hub gated", ["inspect", "acme/gated"], nothing),
        ("hub 401 quoting the token", ["plan", "acme/down", "--gpu", "L4"], nothing),
        ("hub missing repo", ["inspect", "acme/missing"], nothing),
        ("check", ["check", str(deploy), "--format", "json"], nothing),
        ("curve", ["curve", "llama-3.1-8b", "--gpu", "L4", "--lengths", "4k", "--json"], nothing),
        ("usage error", ["plan", "llama-3.1-8b", "--gpu", "L4", "--max-model-len", TOKEN], nothing),
        ("extra argument", ["models", TOKEN], nothing),
        ("kvcalc error quoting the token", ["plan", "llama-3.1-8b", "--gpu", "L4"],
         lambda mp: mp.setattr(planning, "plan_reference", _raises(
             KvcalcError(f"bad token {TOKEN}", hint=f"not {TOKEN!r}", code="invalid-input")))),
        ("internal error quoting the token", ["plan", "llama-3.1-8b", "--gpu", "L4"],
         lambda mp: mp.setattr(planning, "plan_reference", _raises(RuntimeError(
             f"request failed: headers={{'authorization': 'Bearer {TOKEN}'}}\nurl=https://x/?t={TOKEN}")))),
        ("warnings and prints", ["plan", "llama-3.1-8b", "--gpu", "L4", "--json"], warn_with_token),
    ]  # fmt: skip


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "KVCALC_DEBUG=1"])
@pytest.mark.parametrize("via", ["--token", "--token=", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_the_token_never_appears(cli, fake_hub, tmp_path, monkeypatch, via, debug):
    if debug:
        monkeypatch.setenv("KVCALC_DEBUG", "1")
    if via in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.setenv(via, TOKEN)
    seen_traceback = False
    for name, args, arrange in _scenarios(fake_hub, tmp_path):
        with monkeypatch.context() as mp:
            arrange(mp)
            if via == "--token":
                args = [*args, "--token", TOKEN]
            elif via == "--token=":
                args = [*args, f"--token={TOKEN}"]
            with warnings.catch_warnings():  # printed as outside pytest, on sys.stderr
                warnings.simplefilter("always")
                warnings.showwarning = _show_on_stderr
                result = cli(*args)
        shown = result.stdout + result.stderr
        assert TOKEN not in shown, f"{name} ({via}) printed the token:\n{shown}"
        assert TOKEN[3:20] not in shown, name  # nor a recognisable part of it
        if name == "warnings and prints":
            assert "token *** looks odd" in result.stderr and "Bearer ***" in result.stdout
        if "error[internal]" in result.stderr:
            seen_traceback = seen_traceback or "Traceback" in result.stderr
            assert "***" in result.stderr  # scrubbed, not dropped
            if not debug:  # the exception's two-line message, as one line
                assert len(result.stderr.splitlines()) == 2, result.stderr
    assert seen_traceback == debug  # KVCALC_DEBUG=1 really printed the traceback, scrubbed
    # the token did reach the Hub (so it was in use, not just absent)
    gated = {r.headers.get("authorization") for r in fake_hub.requests if "acme/gated" in r.path}
    assert f"Bearer {TOKEN}" in gated


BOOTSTRAP = """
import sys
from kvcalc.planning import api as planning
def boom(*a, **k):
    raise RuntimeError("failed with Authorization: Bearer " + sys.argv[1])
planning.plan_reference = boom
from kvcalc.cli.app import main
main(sys.argv[2:])
"""


@pytest.mark.parametrize("debug", ["0", "1"])
def test_the_token_never_reaches_the_file_descriptors(tmp_path, debug):
    """A real process, stdout and stderr read at the file-descriptor level: nothing written around
    kvcalc's streams (a traceback, the interpreter itself) shows the token either."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVCALC_"))}
    env.update(HF_TOKEN=TOKEN, KVCALC_DEBUG=debug, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    for args in (["plan", "llama-3.1-8b", "--gpu", "L4"], ["inspect", "acme/not-cached"]):
        done = subprocess.run([sys.executable, "-c", BOOTSTRAP, TOKEN, *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert TOKEN not in done.stdout + done.stderr
        assert done.stderr.count("error[") == 1
        assert ("Traceback" in done.stderr) == (debug == "1" and args[0] == "plan")


def test_a_token_is_masked_only_in_its_own_run(cli):
    """Secrets are registered per command run: a word given as a token once (here by mistake) is not
    masked in what later runs of main() in the same process print."""
    assert "H100" not in cli("gpus", "--token", "H100").stdout
    later = cli("gpus")
    assert later.exit_code == 0 and "H100" in later.stdout and "***" not in later.stdout
