"""GGUF from the Hub through the real ``huggingface_hub`` client and the fake Hub: header bytes only
(ranged reads), the file picked by quant tag, cached, and offline from the cache."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from gguf import GGMLQuantizationType as Q
from gguf_helpers import llama_keys, write_gguf
from helpers import assert_clean
from hubserver import FakeHub, serve_fake_hub

from kvcalc.errors import KvcalcError
from kvcalc.sources.gguf.hub import pick_file
from kvcalc.sources.resolve import load_model

REPO = "org/tiny-GGUF"
#: 8 layers · 2 KV heads · (64 + 64) · 2 B = 4,096 B per token
KEYS = llama_keys(layers=8, heads=8, kv_heads=2, hidden=512)


def _file(tmp_path, name: str, qtype: Q, rows: int = 4096) -> bytes:
    # a 4,096 × 512 embedding: Q8_0 544 B per row (2,228,224 B), Q4_K 288 B per row (1,179,648 B)
    path = write_gguf(tmp_path / name, "llama", KEYS, [("token_embd.weight", (rows, 512), qtype),
                                                        ("output_norm.weight", (512,), Q.F32)])  # fmt: skip
    return path.read_bytes()


@pytest.fixture
def fake_hub(tmp_path, monkeypatch) -> Iterator[FakeHub]:
    yield from serve_fake_hub(tmp_path, monkeypatch)


@pytest.fixture
def gguf_repo(fake_hub, tmp_path):
    q8 = _file(tmp_path, "tiny-Q8_0.gguf", Q.Q8_0)
    q4 = _file(tmp_path, "tiny-Q4_K_M.gguf", Q.Q4_K)
    fake_hub.add(REPO, {"tiny-Q8_0.gguf": q8, "tiny-Q4_K_M.gguf": q4, "README.md": b"hi",
                        "mmproj-tiny-Q8_0.gguf": b"not read"})  # fmt: skip
    return fake_hub, q8, q4


def _range_bytes(hub) -> int:
    total = 0
    for r in hub.requests:
        m = re.match(r"bytes=(\d+)-(\d+)", r.headers.get("range", ""))
        if r.method == "GET" and m:
            total += int(m[2]) - int(m[1]) + 1
    return total


def test_pick_by_quant_tag_and_read_only_the_header(gguf_repo):
    hub, q8, _ = gguf_repo
    loaded = load_model(f"{REPO}:Q8_0")
    assert loaded.source == "hub" and loaded.location.endswith("/tiny-Q8_0.gguf")
    assert loaded.shape.bytes_per_token == 4096
    weights = loaded.weights_metadata()
    assert weights.by_dtype["Q8_0"].total_bytes == 4096 * 544
    assert weights.total_bytes == 4096 * 544 + 2048
    # no full download: the ranges asked for cover the header, not the 2.2 MB of tensors
    assert hub.count(method="GET", contains="tiny-Q8_0.gguf") >= 1
    assert _range_bytes(hub) < len(q8) // 2
    assert not any(r.method == "GET" and "range" not in r.headers and r.path.endswith(".gguf")
                   for r in hub.requests)  # fmt: skip


def test_gguf_file_name_and_offline_from_the_cache(gguf_repo, monkeypatch):
    hub, _, _ = gguf_repo
    online = load_model(f"{REPO}:tiny-Q4_K_M.gguf")
    assert online.weights_metadata().by_dtype["Q4_K"].total_bytes == 4096 * 288
    hub.requests.clear()
    offline = load_model(f"{REPO}:tiny-Q4_K_M.gguf", offline=True)
    assert hub.requests == []
    assert offline.from_cache and offline.commit_hash == online.commit_hash
    assert offline.weights_metadata() == online.weights_metadata()
    assert offline.shape == online.shape


def test_unreachable_hub_falls_back_to_the_cache(gguf_repo):
    hub, _, _ = gguf_repo
    load_model(f"{REPO}:Q8_0")
    hub.stop()
    again = load_model(f"{REPO}:Q8_0", timeout_s=1.0)
    assert again.from_cache and again.shape.bytes_per_token == 4096


def test_not_cached_offline(gguf_repo):
    with pytest.raises(KvcalcError) as err:
        load_model(f"{REPO}:Q8_0", offline=True)
    assert err.value.code == "hub-not-cached"


def test_unknown_tag_lists_the_files(gguf_repo):
    with pytest.raises(KvcalcError) as err:
        load_model(f"{REPO}:Q2_K")
    assert err.value.code == "gguf-file-not-found"
    assert "tiny-Q4_K_M.gguf" in err.value.hint and "mmproj" not in err.value.hint


def test_split_repo_reads_every_shard_header(fake_hub, tmp_path):
    tensors = [(f"blk.{i}.attn_q.weight", (512, 512), Q.Q8_0) for i in range(4)]
    write_gguf(tmp_path / "big-Q8_0.gguf", "llama", KEYS, tensors, split_max_tensors=2)
    files = {f"Q8_0/{p.name}": p.read_bytes() for p in tmp_path.glob("big-Q8_0-*.gguf")}
    fake_hub.add("org/big", files)
    loaded = load_model("org/big:Q8_0")
    weights = loaded.weights_metadata()
    assert weights.num_tensors == 4 and weights.total_bytes == 4 * 512 * 544
    assert weights.files == (
        "Q8_0/big-Q8_0-00001-of-00002.gguf",
        "Q8_0/big-Q8_0-00002-of-00002.gguf",
    )


def test_pick_file_rules():
    files = [
        "a-Q4_K_M.gguf",
        "a-Q4_K_S.gguf",
        "x/b-Q8_0-00001-of-00002.gguf",
        "x/b-Q8_0-00002-of-00002.gguf",
    ]
    assert pick_file(files, quant="q4_k_m", filename=None, where="r") == "a-Q4_K_M.gguf"
    assert (
        pick_file(files, quant="Q8_0", filename=None, where="r") == "x/b-Q8_0-00001-of-00002.gguf"
    )
    with pytest.raises(KvcalcError) as err:
        pick_file(files, quant=None, filename=None, where="r")
    assert err.value.code == "gguf-ambiguous"
    with pytest.raises(KvcalcError):
        pick_file(files, quant="Q4_K", filename=None, where="r")  # not a whole tag


def test_cli_inspect_from_the_hub(gguf_repo, cli):
    result = cli("inspect", f"{REPO}:Q8_0", "--json")
    assert_clean(result, json_output=True)
    data = result.json
    assert data["kv_bytes_per_token"] == 4096
    assert data["weights"]["by_dtype"]["Q8_0"]["total_bytes"] == 4096 * 544
