"""`kvcalc plan` and `inspect` on a Hub model, end to end through the real huggingface_hub client
against the loopback fake Hub: exact weights from the safetensors headers, then offline from cache."""

from __future__ import annotations

import pytest
from hubserver import EXPECTED_TOTAL_BYTES, checkpoint_files, serve_fake_hub

pytest.importorskip("torch")  # the fake checkpoint is written with safetensors.torch

TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 16, "vocab_size": 64, "max_position_embeddings": 128,
        "torch_dtype": "bfloat16"}  # fmt: skip


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    yield from serve_fake_hub(tmp_path, monkeypatch)


def test_plan_uses_the_checkpoints_exact_bytes(cli, fake_hub):
    fake_hub.add("acme/tiny", {"config.json": TINY, **checkpoint_files(sharded=True)})
    result = cli("plan", "acme/tiny", "--gpu", "L4", "--json", "--no-throughput")
    assert result.exit_code == 0, result.stderr
    data = result.json
    assert data["weights_source"] == "safetensors metadata (hub)"
    assert data["model_source"] == "hub: acme/tiny@main"
    # TP 1: the whole checkpoint (8,900 B in its headers) plus the RoPE cache vLLM allocates with it
    assert data["weights_bytes"] >= EXPECTED_TOTAL_BYTES
    assert data["weights_bytes"] - EXPECTED_TOTAL_BYTES < 1 << 20
    # 2 (K, V) · 2 layers · 2 KV heads · 16 · 2 B = 256 B per token
    assert data["kv_bytes_per_token"] == 256


def test_second_plan_runs_offline_from_the_cache(cli, fake_hub, monkeypatch):
    fake_hub.add("acme/tiny", {"config.json": TINY})
    assert cli("inspect", "acme/tiny", "--json").exit_code == 0
    fake_hub.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = cli("plan", "acme/tiny", "--kv-cache-memory", "1GiB", "--json")
    assert result.exit_code == 0, result.stderr
    # 1 GiB / (16 tokens · 256 B per block) = 262,144 blocks of 16 tokens; 128-token requests: 32,768x
    assert result.json["num_blocks"] == 262_144 and result.json["max_concurrency"] == 32_768.0


def test_unknown_repo_is_one_error_line(cli, fake_hub):
    result = cli("plan", "acme/missing", "--gpu", "L4")
    assert result.exit_code == 2
    assert (
        result.stderr.startswith("error[hub-repo-not-found]") and "Traceback" not in result.stderr
    )
