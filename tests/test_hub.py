"""The Hub through the real ``huggingface_hub`` client, against :class:`FakeHub` on 127.0.0.1."""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from hubserver import (
    EXPECTED_BY_DTYPE,
    EXPECTED_EXPERTS_BYTES,
    EXPECTED_PARAMETERS,
    EXPECTED_TOTAL_BYTES,
    SHARD_1,
    SHARD_2,
    FakeHub,
    checkpoint_files,
    commit_sha,
    serve_fake_hub,
)

from kvcalc.errors import KvcalcError
from kvcalc.sources import hub
from kvcalc.sources.resolve import load_model

TINY = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 64,
    "intermediate_size": 16,
    "vocab_size": 64,
    "max_position_embeddings": 128,
    "torch_dtype": "bfloat16",
}
#: 2 (K, V) x 2 layers x 2 KV heads x 16 head dim x 2 B
TINY_BYTES_PER_TOKEN = 256
#: the same with 4 layers and 4 KV heads: 2 x 4 x 4 x 16 x 2 B
WIDER = {**TINY, "num_hidden_layers": 4, "num_key_value_heads": 4}
WIDER_BYTES_PER_TOKEN = 1024


@pytest.fixture
def fake_hub(tmp_path, monkeypatch) -> Iterator[FakeHub]:
    yield from serve_fake_hub(tmp_path, monkeypatch)


SECRET = "hf_kvcalcSECRETtoken0123456789abcdef"
TIMEOUT_S = 1.0


def errors_of(call) -> KvcalcError:
    with pytest.raises(KvcalcError) as info:
        call()
    return info.value


# -- download, cache, offline ---------------------------------------------------------------
def test_config_lands_in_the_standard_cache(fake_hub: FakeHub, tmp_path):
    fake_hub.add("acme/tiny", {"config.json": TINY})
    m = load_model("acme/tiny")
    commit = fake_hub.repos["acme/tiny"].commit("main")
    assert m.source == "hub"
    assert m.location == "acme/tiny@main"
    assert m.revision == "main"
    assert m.commit_hash == commit
    assert m.from_cache is False
    assert m.shape.name == "acme/tiny"
    assert m.shape.bytes_per_token == TINY_BYTES_PER_TOKEN
    repo_cache = tmp_path / "hf-cache" / "models--acme--tiny"
    assert m.config_path == repo_cache / "snapshots" / commit / "config.json"
    assert (repo_cache / "refs" / "main").read_text() == commit
    assert fake_hub.count(method="GET", contains="/resolve/main/config.json") == 1


def test_second_lookup_is_served_from_the_cache_with_the_network_gone(fake_hub, monkeypatch):
    fake_hub.add("acme/tiny", {"config.json": TINY})
    first = load_model("acme/tiny")
    fake_hub.stop()
    seen = len(fake_hub.requests)

    offline = load_model("acme/tiny", offline=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    by_env = load_model("acme/tiny")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    started = time.monotonic()
    fallback = load_model("acme/tiny", timeout_s=TIMEOUT_S)  # online, but the Hub is down

    assert time.monotonic() - started < 2
    for m in (offline, by_env, fallback):
        assert m.shape == first.shape
        assert m.commit_hash == first.commit_hash
        assert m.from_cache is True
        assert m.weights_metadata() is None  # no Hub: no Hub metadata, and no error either
    assert len(fake_hub.requests) == seen


def test_offline_never_touches_the_network(fake_hub):
    fake_hub.add("acme/tiny", {"config.json": TINY})
    err = errors_of(lambda: load_model("acme/tiny", offline=True))
    assert err.code == "hub-not-cached"
    assert "offline mode is on" in err.message
    assert "--offline" in err.hint
    assert fake_hub.requests == []


def test_revision_pinning(fake_hub):
    fake_hub.add("acme/tiny", {"config.json": TINY})
    fake_hub.add("acme/tiny", {"config.json": WIDER}, revision="v2")
    fake_hub.add("acme/tiny", {"config.json": WIDER}, revision="refs/pr/1")
    main = load_model("acme/tiny")
    v2 = load_model("acme/tiny@v2")
    pr = load_model("acme/tiny", revision="refs/pr/1")
    assert main.shape.bytes_per_token == TINY_BYTES_PER_TOKEN
    assert v2.shape.bytes_per_token == WIDER_BYTES_PER_TOKEN
    assert (v2.location, v2.revision) == ("acme/tiny@v2", "v2")
    assert v2.commit_hash == commit_sha("acme/tiny@v2:['config.json']") != main.commit_hash
    assert pr.revision == "refs/pr/1" and pr.shape.bytes_per_token == WIDER_BYTES_PER_TOKEN
    # a pinned commit is found in the cache without the Hub
    fake_hub.stop()
    by_commit = load_model(f"acme/tiny@{v2.commit_hash}", offline=True)
    assert by_commit.shape == v2.shape
    assert load_model("acme/tiny@v2", offline=True).commit_hash == v2.commit_hash


def test_a_pinned_revision_skips_the_bundled_copy(fake_hub):
    fake_hub.add("Qwen/Qwen3-8B", {"config.json": TINY}, revision="v0")
    assert load_model("Qwen/Qwen3-8B").source == "bundled"
    pinned = load_model("Qwen/Qwen3-8B@v0")
    assert pinned.source == "hub"
    assert pinned.shape.bytes_per_token == TINY_BYTES_PER_TOKEN


def test_endpoint_cache_and_timeout_are_read_when_called(fake_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2.5")
    access = hub.HubAccess.from_env(token=SECRET)
    assert access.endpoint == fake_hub.url
    assert access.cache_dir == str(tmp_path / "elsewhere")
    assert access.timeout_s == 2.5
    assert access.offline is False
    assert SECRET not in repr(access)
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub.default_cache_dir() == str(tmp_path / "home" / "hub")
    fake_hub.add("acme/tiny", {"config.json": TINY})
    m = load_model("acme/tiny", cache_dir=str(tmp_path / "explicit"))
    assert str(m.config_path).startswith(str(tmp_path / "explicit" / "models--acme--tiny"))


# -- tokens ---------------------------------------------------------------------------------
def gated(fake_hub: FakeHub) -> None:
    fake_hub.add("acme/gated", {"config.json": TINY}, gated=True, gated_token=SECRET)


def auth_headers(fake_hub: FakeHub) -> set[str]:
    return {r.headers.get("authorization", "") for r in fake_hub.requests if "acme/gated" in r.path}


def test_gated_without_a_token(fake_hub):
    gated(fake_hub)
    err = errors_of(lambda: load_model("acme/gated"))
    assert err.code == "hub-gated"
    assert err.message == "acme/gated is a gated repository: access must be granted first"
    assert f"request access at {fake_hub.url}/acme/gated" in err.hint
    assert "HF_TOKEN" in err.hint


def test_gated_with_a_token_lacking_access(fake_hub):
    gated(fake_hub)
    err = errors_of(lambda: load_model("acme/gated", token="hf_someoneElse"))
    assert err.code == "hub-gated"
    assert "the token in use has no access" in err.hint


@pytest.mark.parametrize("how", ["argument", "HF_TOKEN", "stored login"])
def test_token_sources(fake_hub, monkeypatch, how):
    gated(fake_hub)
    token = None
    if how == "argument":
        token = SECRET
    elif how == "HF_TOKEN":
        monkeypatch.setenv("HF_TOKEN", SECRET)
    else:
        from huggingface_hub import constants

        Path(constants.HF_TOKEN_PATH).parent.mkdir(parents=True, exist_ok=True)
        Path(constants.HF_TOKEN_PATH).write_text(SECRET)
    m = load_model("acme/gated", token=token)
    assert m.shape.bytes_per_token == TINY_BYTES_PER_TOKEN
    assert auth_headers(fake_hub) == {f"Bearer {SECRET}"}
    assert SECRET not in repr(m)


# -- errors ---------------------------------------------------------------------------------
def setup_error(fake_hub: FakeHub, case: str) -> tuple[str, dict]:
    """Arrange one failure; return the reference to load and extra load_model arguments."""
    if case == "repo-not-found":
        return "acme/missing", {}
    if case == "gated":
        fake_hub.add("acme/gated", {"config.json": TINY}, gated=True, gated_token="hf_other")
        return "acme/gated", {}
    if case == "revision-not-found":
        fake_hub.add("acme/tiny", {"config.json": TINY})
        return "acme/tiny@nope", {}
    if case == "no-config":
        fake_hub.add("acme/gguf", {"model.gguf": b"GGUF"})
        return "acme/gguf", {}
    if case == "unreachable":
        fake_hub.stop()
        return "acme/tiny", {}
    if case == "timeout":
        fake_hub.add("acme/slow", {"config.json": TINY}, slow_s=3.0)
        return "acme/slow", {}
    if case == "malformed-json":
        fake_hub.add("acme/broken", {"config.json": b'{"num_hidden_layers": 2,'})
        return "acme/broken", {}
    if case == "http-error":
        fake_hub.add("acme/down", {"config.json": TINY}, fail_status=500)
        return "acme/down", {}
    if case == "rate-limited":
        fake_hub.add("acme/busy", {"config.json": TINY}, fail_status=429)
        return "acme/busy", {}
    if case == "unauthorized":
        fake_hub.add(
            "acme/tiny",
            {"config.json": TINY},
            fail_status=401,
            fail_headers={"X-Error-Message": "Invalid credentials in Authorization header"},
        )
        return "acme/tiny", {}
    if case == "not-cached":
        return "acme/tiny", {"offline": True}
    raise AssertionError(case)


ERROR_CODES = {
    "repo-not-found": "hub-repo-not-found",
    "gated": "hub-gated",
    "revision-not-found": "hub-revision-not-found",
    "no-config": "hub-no-config",
    "unreachable": "hub-unreachable",
    "timeout": "hub-timeout",
    "malformed-json": "config-malformed-json",
    "http-error": "hub-http-error",
    "rate-limited": "hub-rate-limited",
    "unauthorized": "hub-unauthorized",
    "not-cached": "hub-not-cached",
}


@pytest.mark.parametrize("case", sorted(ERROR_CODES))
def test_each_error_is_one_line_with_a_code_and_never_shows_the_token(fake_hub, case):
    ref, extra = setup_error(fake_hub, case)
    started = time.monotonic()
    err = errors_of(lambda: load_model(ref, token=SECRET, timeout_s=TIMEOUT_S, **extra))
    assert err.code == ERROR_CODES[case], err.message
    assert time.monotonic() - started < 2.5  # bounded: no retries, no minute-long waits
    assert err.message and "\n" not in err.message
    assert err.hint and "\n" not in err.hint
    shown = "".join(traceback.format_exception(err))  # what KVCALC_DEBUG=1 would print
    for text in (str(err), err.message, err.hint, repr(err), repr(err.args), shown):
        assert SECRET not in text
    assert err.__cause__ is None  # the client's exception (with its request headers) is dropped


def test_error_messages(fake_hub):
    fake_hub.add("acme/tiny", {"config.json": TINY})
    fake_hub.add("acme/broken", {"config.json": b"{oops"})
    assert errors_of(lambda: load_model("acme/missing")).message == (
        f"repository acme/missing not found on {fake_hub.url}"
    )
    assert errors_of(lambda: load_model("acme/tiny@v9")).message == (
        "revision 'v9' not found in acme/tiny"
    )
    broken = errors_of(lambda: load_model("acme/broken"))
    assert broken.message.startswith("acme/broken@main/config.json: malformed JSON at line 1")
    fake_hub.add("acme/slow", {"config.json": TINY}, slow_s=3.0)
    slow = errors_of(lambda: load_model("acme/slow", timeout_s=TIMEOUT_S))
    assert (
        slow.message
        == f"the Hub at {fake_hub.url} did not answer within 1 s (fetching acme/slow@main)"
    )
    assert "--offline" in slow.hint and "bundled model" in slow.hint


def test_timeout_from_the_environment(fake_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    fake_hub.add("acme/slow", {"config.json": TINY}, slow_s=3.0)
    started = time.monotonic()
    assert errors_of(lambda: load_model("acme/slow")).code == "hub-timeout"
    assert time.monotonic() - started < 2.5


def test_a_cached_answer_that_the_file_is_missing_is_honoured_offline(fake_hub, tmp_path):
    """huggingface_hub records a 404 in the cache (``.no_exist``); offline, kvcalc reports it."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    fake_hub.add("acme/gguf", {"model.gguf": b"GGUF"})
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(
            "acme/gguf", "config.json", cache_dir=tmp_path / "hf-cache", endpoint=fake_hub.url
        )
    fake_hub.stop()
    assert errors_of(lambda: load_model("acme/gguf", offline=True)).code == "hub-no-config"


# -- safetensors metadata -------------------------------------------------------------------
def assert_checkpoint(w) -> None:
    assert w.by_dtype == EXPECTED_BY_DTYPE
    assert w.total_bytes == EXPECTED_TOTAL_BYTES == 8_900
    assert w.num_parameters == EXPECTED_PARAMETERS
    assert w.experts_bytes == EXPECTED_EXPERTS_BYTES
    assert w.source == "safetensors metadata (hub)"


def test_weights_from_a_single_file_by_range_requests(fake_hub):
    repo = fake_hub.add("acme/fp8", {"config.json": TINY, **checkpoint_files(sharded=False)})
    m = load_model("acme/fp8")
    assert fake_hub.count(contains="model.safetensors") == 0  # lazy: nothing until asked
    w = m.weights_metadata()
    assert_checkpoint(w)
    assert w.files == ("model.safetensors",)
    gets = [r for r in fake_hub.requests if r.method == "GET" and r.path.endswith(".safetensors")]
    assert gets and all(r.headers.get("range", "").startswith("bytes=") for r in gets)
    # pinned to the commit the config came from, not to whatever "main" is now
    assert all(f"/resolve/{repo.commit('main')}/" in r.path for r in gets)
    assert m.weights_metadata() is w


def test_weights_from_shards(fake_hub):
    fake_hub.add("acme/sharded", {"config.json": TINY, **checkpoint_files(sharded=True)})
    w = load_model("acme/sharded").weights_metadata()
    assert_checkpoint(w)
    assert w.files == (SHARD_1, SHARD_2)


def test_weights_with_a_header_over_100kb(fake_hub):
    """The client fetches the first 100 kB, then the rest of a longer header."""
    import torch
    from safetensors.torch import save

    tensors = {
        f"model.layers.{i}.mlp.experts.{j}.w": torch.zeros(2, dtype=torch.bfloat16)
        for i in range(40)
        for j in range(64)
    }  # 2,560 x 4 B
    fake_hub.add("acme/many", {"config.json": TINY, "model.safetensors": save(tensors)})
    w = load_model("acme/many").weights_metadata()
    assert w.num_tensors == 2560
    assert w.total_bytes == w.experts_bytes == 2560 * 2 * 2 == 10_240
    assert fake_hub.count(method="GET", contains="model.safetensors") == 2


def test_no_safetensors_means_no_weights(fake_hub):
    fake_hub.add("acme/bin", {"config.json": TINY, "pytorch_model.bin": b"\0" * 8})
    assert load_model("acme/bin").weights_metadata() is None


def test_slow_safetensors_time_out(fake_hub):
    fake_hub.add("acme/fp8", {"config.json": TINY, **checkpoint_files(sharded=False)})
    m = load_model("acme/fp8", timeout_s=TIMEOUT_S, token=SECRET)
    fake_hub.repos["acme/fp8"].slow_s = 3.0
    fake_hub.repos["acme/fp8"].slow_methods = ("GET",)  # the header download stalls
    started = time.monotonic()
    err = errors_of(m.weights_metadata)
    assert err.code == "hub-timeout"
    assert SECRET not in repr(err) + err.message + (err.hint or "")
    assert time.monotonic() - started < 2.5


def test_hub_module_alone_does_not_import_the_client():
    import subprocess
    import sys

    code = "import sys, kvcalc.sources.hub, kvcalc.sources.resolve; assert 'huggingface_hub' not in sys.modules"
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_the_fake_hub_answers_model_info_like_the_hub(fake_hub):
    """The test double itself, through the real client: /api/models/{repo}/revision/{rev}."""
    from huggingface_hub import HfApi

    repo = fake_hub.add("acme/tiny", {"config.json": TINY})
    info = HfApi(endpoint=fake_hub.url).model_info("acme/tiny", revision="main")
    assert info.sha == repo.commit("main")
    assert [s.rfilename for s in info.siblings] == ["config.json"]


def test_credentials_in_the_endpoint_are_not_shown():
    assert (
        hub.shown_endpoint("https://bob:hf_pw@mirror.example:8443") == "https://mirror.example:8443"
    )
    assert hub.shown_endpoint("http://127.0.0.1:9") == "http://127.0.0.1:9"


def test_offline_instruct_id_points_to_the_bundled_base(fake_hub):
    """Offline, ``meta-llama/Llama-3.1-8B-Instruct`` is not cached, but kvcalc bundles the base
    model of the same layers: the hint names it instead of a generic "use a bundled model"."""
    err = errors_of(lambda: load_model("meta-llama/Llama-3.1-8B-Instruct", offline=True))
    assert err.code == "hub-not-cached"
    assert "kvcalc bundles meta-llama/Llama-3.1-8B (llama-3.1-8b)" in err.hint
    other = errors_of(lambda: load_model("acme/tiny-Instruct", offline=True))
    assert "kvcalc bundles" not in other.hint and "`kvcalc models`" in other.hint


def test_a_broken_local_config_is_not_sent_to_the_cache(tmp_path, cli):
    """A local config.json that is not JSON: fix the file (there is no cache copy to delete)."""
    (tmp_path / "config.json").write_text("{not json")
    result = cli("inspect", str(tmp_path))
    assert result.exit_code == 2 and "error[config-malformed-json]" in result.stderr
    assert "cache" not in result.stderr and "fix the file" in result.stderr
