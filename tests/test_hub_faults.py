"""Network faults between kvcalc and the Hub, through the CLI against the loopback fake Hub: each
ends in its documented error (docs/errors.md) within a bounded time, never a traceback or a hang;
where the file is already cached, a Hub that misbehaves is bypassed instead."""

from __future__ import annotations

import time

import pytest
from hubserver import FAULTS, checkpoint_files, serve_fake_hub

pytest.importorskip("torch")  # the fake checkpoints are written with safetensors.torch

TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 16, "vocab_size": 64, "max_position_embeddings": 128,
        "torch_dtype": "bfloat16"}  # fmt: skip
#: every request waits at most this long (HF_HUB_ETAG_TIMEOUT)
TIMEOUT_S = 1


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    hubs = serve_fake_hub(tmp_path, monkeypatch)
    hub = next(hubs)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", str(TIMEOUT_S))  # after: serve_fake_hub clears it
    yield hub
    hubs.close()


EXERCISED: set[str] = set()


def _config(**repo):
    EXERCISED.add(repo.get("fault", ""))
    return lambda hub: hub.add("acme/x", {"config.json": TINY}, **repo)


def _weights(*, sharded: bool, **repo):
    """A good config.json; the fault hits only the safetensors requests."""
    EXERCISED.add(repo.get("fault", ""))
    return lambda hub: hub.add("acme/x", {"config.json": TINY, **checkpoint_files(sharded=sharded)},
                               fault_paths="safetensors", **repo)  # fmt: skip


#: name -> (arrange the Hub, expected code, seconds it may take at most)
FAULT_CASES = {
    "connection refused": (lambda hub: hub.stop(), "hub-unreachable", 3),
    "connection reset": (_config(fault="reset"), "hub-unreachable", 3),
    "timeout": (_config(slow_s=3.0), "hub-timeout", TIMEOUT_S + 1.5),
    # huggingface_hub resumes a cut-short download up to five times, a second apart
    "config body cut short": (_config(fault="truncate"), "hub-unreachable", 12),
    "safetensors header cut short": (_weights(sharded=False, fault="truncate"), "hub-unreachable", 3),
    "HTML portal instead of the Hub": (_config(fault="html"), "hub-bad-response", 3),
    "HTML page as config.json": (_config(fault="html-body"), "config-malformed-json", 3),
    "HTML page as the safetensors index": (_weights(sharded=True, fault="html-body"), "safetensors-invalid", 3),
    "HTML page as a safetensors header": (_weights(sharded=False, fault="html-body"), "safetensors-invalid", 3),
    "redirect loop": (_config(fault="redirect-loop"), "hub-bad-response", 3),
    "redirect loop on the weights": (_weights(sharded=False, fault="redirect-loop"), "hub-bad-response", 3),
    "HTTP 500": (_config(fail_status=500), "hub-http-error", 3),
    "HTTP 502": (_config(fail_status=502), "hub-http-error", 3),
    "HTTP 503": (_config(fail_status=503), "hub-http-error", 3),
    "HTTP 429": (_config(fail_status=429), "hub-rate-limited", 3),
    "HTTP 404 without the Hub's headers": (_config(fail_status=404), "hub-http-error", 3),
    "HTTP 500 on the weights": (_weights(sharded=False, fail_status=500), "hub-http-error", 3),
    "a 17 MiB config.json": (lambda hub: hub.add("acme/x", {"config.json": b" " * (17 << 20) + b"{}"}),
                             "config-too-large", 3),
}  # fmt: skip


def assert_one_error(result, code: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"error[{code}]: "), result.stderr
    assert lines[1].startswith("hint: ")
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("case", sorted(FAULT_CASES))
def test_each_fault_gives_its_error_in_bounded_time(cli, fake_hub, case):
    arrange, code, seconds = FAULT_CASES[case]
    arrange(fake_hub)
    started = time.monotonic()
    result = cli("inspect", "acme/x", "--json")  # inspect reads the config, then the weights
    elapsed = time.monotonic() - started
    assert_one_error(result, code)
    assert elapsed < seconds, f"{case}: {elapsed:.1f} s"


def test_every_fault_mode_of_the_fake_hub_is_exercised():
    assert set(FAULTS) <= EXERCISED


def test_sharded_weights_from_the_hub_print_nothing_on_stderr(cli, fake_hub):
    """huggingface_hub's progress bar ("Parse safetensors files: 100%|...") stays off."""
    fake_hub.add("acme/x", {"config.json": TINY, **checkpoint_files(sharded=True)})
    result = cli("inspect", "acme/x")
    assert result.exit_code == 0 and result.stderr == "", result.stderr


def test_an_oversized_config_is_refused_before_download(cli, fake_hub):
    FAULT_CASES["a 17 MiB config.json"][0](fake_hub)
    assert_one_error(cli("inspect", "acme/x"), "config-too-large")
    assert fake_hub.count(method="GET", contains="config.json") == 0  # the HEAD said enough


def test_an_oversized_safetensors_index_is_refused_before_download(cli, fake_hub):
    files = checkpoint_files(sharded=True)
    files["model.safetensors.index.json"] = (
        b" " * (64 << 20) + files["model.safetensors.index.json"]
    )
    fake_hub.add("acme/x", {"config.json": TINY, **files})
    assert_one_error(cli("inspect", "acme/x"), "safetensors-invalid")
    assert fake_hub.count(method="GET", contains="index.json") == 0


@pytest.mark.parametrize(
    "fault", ["refused", "timeout", "html", "redirect-loop", "reset", "500", "429"]
)
def test_a_misbehaving_hub_falls_back_to_the_cache(cli, fake_hub, fault):
    """Once config.json is cached, a Hub that cannot answer properly costs at most one timeout."""
    fake_hub.add("acme/x", {"config.json": TINY})
    assert cli("inspect", "acme/x", "--json").exit_code == 0
    repo = fake_hub.repos["acme/x"]
    if fault == "refused":
        fake_hub.stop()
    elif fault == "timeout":
        repo.slow_s = 3.0
    elif fault.isdigit():
        repo.fail_status = int(fault)
    else:
        repo.fault = fault
    started = time.monotonic()
    result = cli("inspect", "acme/x", "--json")
    assert result.exit_code == 0, result.stderr
    assert (
        result.json["model_source"].startswith("hub")
        and time.monotonic() - started < TIMEOUT_S + 1.5
    )


@pytest.mark.parametrize(
    ("endpoint", "code"),
    [("ftp://hub.example", "hub-bad-endpoint"), ("no-scheme", "hub-bad-endpoint"),
     ("http://exa mple.com", "hub-bad-endpoint"), ("http://256.256.256.256", "hub-bad-endpoint"),
     ("http://127.0.0.1:99999", "hub-bad-endpoint")],
)  # fmt: skip
def test_a_bad_endpoint_is_named(cli, fake_hub, monkeypatch, endpoint, code):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    started = time.monotonic()
    assert_one_error(cli("inspect", "acme/x"), code)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("value", ["inf", "1e309", "nan", "-1", "0", "abc", ""])
def test_a_timeout_that_is_not_a_positive_finite_number_is_not_used(monkeypatch, value):
    from kvcalc.sources import hub

    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", value)
    assert hub.env_timeout_s() == hub.DEFAULT_TIMEOUT_S
