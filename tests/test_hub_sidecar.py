"""ModelOpt's ``hf_quant_config.json`` beside ``config.json``: read from a folder and from the Hub
(real ``huggingface_hub`` client, loopback fake Hub), cached and offline like ``config.json``, and
``--kv-cache-dtype auto`` following it as vLLM 0.33.0's own code does.

``fixtures/vllm_0_33/modelopt_sidecars.json`` was recorded with the vLLM reference harness, each
config in its own folder with the sidecar beside it (H100, 20 GiB, TP 1, 4,096 tokens, ``auto``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hubserver import FakeHub, serve_fake_hub

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import KvcalcError
from kvcalc.sources.resolve import load_model
from kvcalc.units import GIB

HERE = Path(__file__).parent
FIXTURE = json.loads((HERE / "fixtures" / "vllm_0_33" / "modelopt_sidecars.json").read_text())
H100 = {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_compute_capability": (9, 0)}  # fmt: skip
SIDECAR = "hf_quant_config.json"


@pytest.fixture
def fake_hub(tmp_path, monkeypatch) -> Iterator[FakeHub]:
    yield from serve_fake_hub(tmp_path, monkeypatch)


def base_config(name: str) -> dict:
    for folder in (HERE / "fixtures" / "configs", HERE.parent / "model_configs"):
        if (folder / name).is_file():
            return json.loads((folder / name).read_text())
    raise FileNotFoundError(name)


def recorded(name: str) -> tuple[dict, dict, dict]:
    """(config.json, hf_quant_config.json, the recorded scenario) of one fixture model."""
    m = FIXTURE["models"][name]
    config = {k: v for k, v in base_config(m["base_config"]).items() if k not in m["drop_keys"]}
    return config, m["hf_quant_config"], m["scenarios"][0]


def plan(model, row: dict):
    return get_engine("vllm").plan_kv_cache(
        EngineRequest(model=model, max_model_len=row["max_model_len"], kv_cache_dtype="auto",
                      tensor_parallel_size=row["tensor_parallel_size"],
                      available_kv_bytes=row["available_kv_bytes"], **H100)
    )  # fmt: skip


def assert_matches(model, row: dict) -> None:
    if "error" in row:  # vLLM refuses to start, with this reason
        with pytest.raises(KvcalcError) as info:
            plan(model, row)
        assert row["error"] in info.value.message
        return
    p = plan(model, row)
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
        row["block_size"], row["num_blocks"], row["kv_cache_tokens"],
    )  # fmt: skip
    assert abs(p.max_concurrency - row["max_concurrency"]) < 0.005
    assert p.log_lines[-1].endswith(row["log_line"])
    assert (p.kv_cache_dtype == "fp8") == (row["cache_dtype"] == "fp8_e4m3")


@pytest.mark.parametrize("name", sorted(FIXTURE["models"]))
def test_a_local_folder_with_a_sidecar_matches_vllm(name, tmp_path):
    config, sidecar, row = recorded(name)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / SIDECAR).write_text(json.dumps(sidecar))
    assert_matches(load_model(str(tmp_path)).shape, row)


@pytest.mark.parametrize("name", sorted(FIXTURE["models"]))
def test_a_hub_model_with_a_sidecar_matches_vllm(name, fake_hub):
    config, sidecar, row = recorded(name)
    fake_hub.add("acme/quantized", {"config.json": config, SIDECAR: sidecar})
    m = load_model("acme/quantized")
    assert m.shape.checkpoint_quant_config == sidecar
    assert_matches(m.shape, row)


def test_the_recorded_outcomes():
    # producer-tagged FP8 KV: 20 GiB / (16 · 32 layers · 8 heads · 128 · 2 (K, V) · 1 B) = 20,480
    # blocks; the same without a producer block, or without kv_cache_quant_algo: bf16, 10,240
    rows = {n: m["scenarios"][0] for n, m in FIXTURE["models"].items()}
    assert rows["llama-producer-fp8"]["num_blocks"] == 20 * GIB // (16 * 32 * 8 * 128 * 2 * 1)
    assert rows["llama-noproducer-fp8"]["num_blocks"] == 20 * GIB // (16 * 32 * 8 * 128 * 2 * 2)
    assert rows["llama-producer-nokv"]["num_blocks"] == 10_240
    assert rows["gemma4-31b-sidecar"]["cache_dtype"] == "fp8_e4m3"


def test_the_sidecar_lands_in_the_cache_and_is_read_offline(fake_hub):
    config, sidecar, row = recorded("llama-producer-fp8")
    fake_hub.add("acme/fp8", {"config.json": config, SIDECAR: sidecar})
    online = load_model("acme/fp8")
    assert fake_hub.count(method="GET", contains=f"/{SIDECAR}") == 1
    fake_hub.stop()
    seen = len(fake_hub.requests)
    offline = load_model("acme/fp8", offline=True)
    fallback = load_model("acme/fp8", timeout_s=1.0)  # online, Hub down: the cache serves both
    assert len(fake_hub.requests) == seen
    for m in (online, offline, fallback):
        assert m.shape.checkpoint_quant_config == sidecar
        assert_matches(m.shape, row)


def test_no_sidecar_is_no_sidecar_and_the_cache_remembers(fake_hub, tmp_path):
    config, _, row = recorded("llama-noproducer-fp8")
    fake_hub.add("acme/plain", {"config.json": config})
    m = load_model("acme/plain")
    assert m.shape.checkpoint_quant_config is None
    commit = fake_hub.repos["acme/plain"].commit("main")
    # huggingface_hub records the Hub's "no such file" in the cache, so offline runs know it too
    assert (
        tmp_path / "hf-cache" / "models--acme--plain" / ".no_exist" / commit / SIDECAR
    ).is_file()
    fake_hub.stop()
    again = load_model("acme/plain", offline=True)
    assert again.shape.checkpoint_quant_config is None
    assert_matches(again.shape, row)


def test_a_config_with_quantization_config_never_asks_for_the_sidecar(fake_hub):
    # vLLM reads the sidecar only when config.json has no quantization_config
    config = base_config("nvidia--Gemma-4-31B-IT-NVFP4.json")
    fake_hub.add("nvidia/gemma", {"config.json": config, SIDECAR: {"quantization": {}}})
    m = load_model("nvidia/gemma")
    assert fake_hub.count(contains=SIDECAR) == 0
    assert m.shape.checkpoint_quant_config == config["quantization_config"]


def test_the_sidecar_comes_from_the_configs_commit(fake_hub):
    config, sidecar, _ = recorded("llama-producer-fp8")
    fake_hub.add("acme/m", {"config.json": config})
    fake_hub.add("acme/m", {"config.json": config, SIDECAR: sidecar}, revision="v2")
    assert load_model("acme/m").shape.checkpoint_quant_config is None
    assert load_model("acme/m@v2").shape.checkpoint_quant_config == sidecar
    v2 = fake_hub.repos["acme/m"].commit("v2")
    assert fake_hub.count(method="GET", contains=f"/resolve/{v2}/{SIDECAR}") == 1


def test_offline_with_a_cache_that_does_not_know_is_refused(fake_hub, tmp_path):
    # config.json cached by another tool: the cache says nothing about the sidecar
    from huggingface_hub import hf_hub_download

    config, sidecar, _ = recorded("llama-producer-fp8")
    fake_hub.add("acme/other", {"config.json": config, SIDECAR: sidecar})
    hf_hub_download("acme/other", "config.json", cache_dir=str(tmp_path / "hf-cache"),
                    endpoint=fake_hub.url)  # fmt: skip
    fake_hub.stop()
    with pytest.raises(KvcalcError) as info:
        load_model("acme/other", offline=True)
    assert info.value.code == "hub-not-cached"
    assert SIDECAR in info.value.message


@pytest.mark.parametrize(
    ("files", "options", "code"),
    [
        ({SIDECAR: b"[1, 2]"}, {}, "config-invalid"),  # JSON, but not an object
        ({SIDECAR: b"{oops"}, {}, "config-malformed-json"),
        ({SIDECAR: b"{}"}, {"fault": "html-body", "fault_paths": SIDECAR}, "config-malformed-json"),
        ({SIDECAR: b"{}"}, {"fault": "reset", "fault_paths": SIDECAR}, "hub-unreachable"),
        ({SIDECAR: b"{}"}, {"fault": "redirect-loop", "fault_paths": SIDECAR}, "hub-bad-response"),
        ({SIDECAR: b" " * (16 * 1024 * 1024 + 1)}, {}, "config-too-large"),
    ],
    ids=["not-an-object", "malformed", "html", "reset", "redirect-loop", "too-large"],
)
def test_a_broken_sidecar_is_a_coded_error(fake_hub, files, options, code):
    config, _, _ = recorded("llama-noproducer-fp8")
    fake_hub.add("acme/broken", {"config.json": config, **files}, **options)
    with pytest.raises(KvcalcError) as info:
        load_model("acme/broken", timeout_s=1.0)
    assert info.value.code == code
    assert "Traceback" not in info.value.message


def test_cli_plan_follows_a_hub_sidecar(cli, fake_hub):
    config, sidecar, row = recorded("llama-producer-fp8")
    fake_hub.add("acme/fp8", {"config.json": config, SIDECAR: sidecar})
    result = cli("plan", "acme/fp8", "--kv-cache-memory", "20GiB", "--max-model-len", "4096",
                 "--weights-memory", "16GiB", "--json")  # fmt: skip
    assert result.exit_code in (0, 1), result.stderr
    assert result.json["kv_cache_dtype"] == "fp8"
    assert result.json["num_blocks"] == row["num_blocks"]
