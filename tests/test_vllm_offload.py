"""vLLM 0.33's host tiers (``kvcalc.engines.vllm.offload``): CPU KV offloading by the chunk rule,
``--kv-transfer-config`` connectors, ``--cpu-offload-gb``, and ``check``'s ``max_host_memory``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvcalc.engines.vllm.offload import native_host_kv
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
FIXTURE = json.loads((ROOT / "tests/fixtures/vllm_0_33/kv_offload.json").read_text())
RECORDS = FIXTURE["records"]


def _plan(model: str, **kw):
    return plan_reference(model, PlanInputs(**kw), with_suggestions=False)


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r["name"])
def test_host_kv_tokens_equal_vllms(rec):
    # the harness sizes the GPU cache from the given KV memory; so does kvcalc
    plan = _plan(rec["model"], gpu=rec["gpu"], tensor_parallel_size=rec["tensor_parallel_size"],
                 max_model_len=rec["max_model_len"], kv_cache_memory_bytes=round(rec["kv_gib"] * GIB),
                 kv_offloading_bytes=int(rec["kv_offloading_size_gib"] * GIB),
                 kv_transfer_config=rec.get("kv_transfer_config"))  # fmt: skip
    assert plan.num_blocks == rec["num_gpu_blocks"]
    groups = max(1, len(plan.groups))
    assert plan.host_kv_tokens == rec["cpu_tokens"] // groups
    assert plan.host_memory_bytes == rec["num_chunks"] * rec["kv_bytes_per_chunk"]
    assert f"{rec['num_chunks']:,} chunks of {rec['kv_bytes_per_chunk']:,} B" in " ".join(
        plan.notes
    )


def test_fixture_has_the_two_oracle_numbers():
    by = {r["name"]: r for r in RECORDS}
    assert by["llama-3.1-8b-tp1-64gib"]["cpu_tokens"] == 524_288
    assert by["deepseek-v3-tp8-500gib"]["cpu_tokens"] == 7_626_000
    assert all("$VLLMENV" in r["command"] and "/work" not in r["command"] for r in RECORDS)


def test_chunk_rule_by_hand():
    # DeepSeek-V3 TP 8: one block = 61 layers × 16 tokens × 576 values × 2 B = 1,124,352 B,
    # replicated latent (one copy), aligned to 4 KiB: 1,126,400 B; 500 GiB // that = 476,625
    # chunks × 16 tokens = 7,626,000 (954,976 without the replicated layout: 8 copies)
    per_block = 61 * 16 * 576 * 2
    rep = native_host_kv(500 * GIB, gpu_kv_bytes=per_block * 100, num_blocks=100, block_size=16,
                         num_groups=1, world_size=8, replicated=True)  # fmt: skip
    assert (rep.chunk_bytes, rep.tokens) == (1_126_400, 7_626_000)
    full = native_host_kv(500 * GIB, gpu_kv_bytes=per_block * 100, num_blocks=100, block_size=16,
                          num_groups=1, world_size=8, replicated=False)  # fmt: skip
    assert full.tokens == 500 * GIB // (per_block * 8) * 16 == 954_976
    # two KV-cache groups: each token range takes a chunk per group
    two = native_host_kv(64 * GIB, gpu_kv_bytes=2**21 * 10, num_blocks=10, block_size=16,
                         num_groups=2, world_size=1, replicated=False)  # fmt: skip
    assert two.tokens == 524_288 // 2


def test_blocks_per_chunk_and_its_refusals():
    # blocks_per_chunk 4: chunk 4 × 2 MiB = 8 MiB; 64 GiB // 8 MiB = 8,192 chunks × 4 × 16 tokens
    kv = native_host_kv(64 * GIB, gpu_kv_bytes=2**21 * 10, num_blocks=10, block_size=16, num_groups=1,
                        world_size=1, replicated=False, extra={"blocks_per_chunk": 4})  # fmt: skip
    assert (kv.num_chunks, kv.tokens) == (8_192, 524_288)
    with pytest.raises(InputError):
        native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                       world_size=1, replicated=False, extra={"block_size": 24})  # fmt: skip


def test_no_gpu_cost_and_shown_beside_the_pool():
    base = dict(gpu="H100-80GB", max_model_len=32768)
    without = _plan("llama-3.1-8b", **base)
    plan = _plan("llama-3.1-8b", **base, kv_offloading_bytes=64 * GIB)
    assert plan.num_blocks == without.num_blocks  # pinned host memory only
    assert plan.host_kv_tokens == 524_288 and plan.host_memory_bytes == 64 * GIB
    assert without.host_kv_tokens is None and without.host_memory_bytes == 0


def test_cpu_offload_frees_gpu_memory_one_for_one():
    base = dict(gpu="H100-80GB", max_model_len=32768)
    without = _plan("llama-3.1-8b", **base)
    plan = _plan("llama-3.1-8b", **base, cpu_offload_bytes=4 * GIB)
    assert plan.weights_offloaded_bytes == 4 * GIB
    assert without.weights_bytes - plan.weights_bytes == 4 * GIB
    # the KV budget gains the moved bytes, and so does the band's pessimistic end
    assert plan.available_kv_bytes - without.available_kv_bytes == 4 * GIB
    assert plan.available_kv_bytes_low - without.available_kv_bytes_low == 4 * GIB
    assert plan.host_memory_bytes == 4 * GIB
    # a budget above the decoder layers moves them all, never the embedding or lm_head
    # (Llama-3.1-8B: 2 × 128,256 × 4,096 × 2 B = 2,101,346,304 B stay)
    whole = _plan("llama-3.1-8b", **base, cpu_offload_bytes=100 * GIB)
    assert whole.weights_bytes - whole.lora_bytes >= 2_101_346_304


def test_nixl_cpu_buffer_mirrors_the_kv_cache():
    cfg = '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"cpu"}'
    plan = _plan("llama-3.1-8b", gpu="H100-80GB", tensor_parallel_size=2, kv_transfer_config=cfg)
    assert plan.host_memory_bytes == plan.kv_cache_bytes * 2
    assert plan.host_kv_tokens is None
    cuda = _plan("llama-3.1-8b", gpu="H100-80GB",
                 kv_transfer_config='{"kv_connector":"NixlConnector","kv_role":"kv_both"}')  # fmt: skip
    assert cuda.host_memory_bytes == 0


def test_lmcache_host_size_is_said_unknown():
    plan = _plan("llama-3.1-8b", gpu="H100-80GB", kv_offloading_bytes=64 * GIB,
                 kv_offloading_backend="lmcache")  # fmt: skip
    assert plan.host_memory_bytes is None and plan.host_kv_tokens is None
    assert any("LMCache" in n and "not known" in n for n in plan.notes)


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"kv_transfer_config": '{"kv_connector":"P2pNcclConnector"}'}, "offload-not-modelled"),
        ({"kv_transfer_config": "{not json"}, "invalid-input"),
        ({"kv_transfer_config": '{"kv_connector":"OffloadingConnector"}'}, "invalid-input"),
        ({"cpu_offload_bytes": GIB, "pipeline_parallel_size": 2}, "offload-not-modelled"),
        ({"cpu_offload_bytes": GIB, "engine": "sglang"}, "offload-not-modelled"),
        ({"kv_offloading_bytes": GIB, "kv_offloading_backend": "disk"}, "invalid-input"),
    ],
)
def test_refusals(kw, code):
    with pytest.raises(InputError) as err:
        _plan("llama-3.1-8b", gpu="H100-80GB", **kw)
    assert err.value.code == code


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvcalc", *args], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip


def test_from_command_reads_vllms_gib():
    out = _cli("plan", "--from-command", "vllm serve meta-llama/Llama-3.1-8B --kv-offloading-size 64 "
               "--cpu-offload-gb 2.5", "--gpu", "H100-80GB", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["host_kv_tokens"] == 524_288
    assert data["weights_offloaded_bytes"] == int(2.5 * GIB)
    bad = _cli("plan", "--from-command", "vllm serve meta-llama/Llama-3.1-8B --kv-transfer-config "
               '\'{"kv_connector":"MooncakeConnector"}\'', "--gpu", "H100-80GB")  # fmt: skip
    assert bad.returncode == 2 and "error[offload-not-modelled]" in bad.stderr


def test_check_max_host_memory(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("model: llama-3.1-8b\ngpu: H100-80GB\nmax_model_len: 32768\nkv_offloading_size: 64\n"
                 "requirements:\n  max_host_memory: 32GiB\n")  # fmt: skip
    out = _cli("check", str(f), "--format", "json")
    assert out.returncode == 1, out.stderr
    assert "max_host_memory" in out.stdout and "64.00 GiB" in out.stdout
    f.write_text(f.read_text().replace("32GiB", "64GiB"))
    assert _cli("check", str(f)).returncode == 0
