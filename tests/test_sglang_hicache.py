"""SGLang 0.5.23's HiCache host pool (``kvcalc.engines.sglang.hicache``) against SGLang's own
classes, and the plan's host fields from flags, a command and a deployment file.

``fixtures/sglang_0_5_23/hicache_host_pool.json`` was recorded with ``hicache_probe.py`` beside
the SGLang reference tool: the device pool the tool builds on the meta device, then
``auto_size_hicache`` around ``build_kv_host_pool`` (``MHATokenToKVPoolHost`` /
``MLATokenToKVPoolHost``) with the host buffer on the meta device and the host's free memory set.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.engines.sglang import hicache
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.sources.bundled import find_bundled
from kvcalc.units import GIB, MIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "sglang_0_5_23" / "hicache_host_pool.json").read_text()
)
ENTRIES = FIXTURE["entries"]
BUILT = [e for e in ENTRIES if e["status"] == "ok" and e["host_status"] == "ok"]
SGLANG = get_engine("sglang")
H100 = FIXTURE["gpu"]["total_mib"] * MIB


def _id(e: dict) -> str:
    args = "-".join(f"{k}={v}" for k, v in e["server_args"].items()) or "default"
    name = Path(e["config"]).stem.split("--")[-1]
    return f"{name}-tp{e['tp']}-{e['kv_cache_dtype']}-{args}-host{e['host_free_bytes'] // GIB}"


def _ref(entry: dict) -> str:
    ref = Path(entry["config"]).stem.replace("--", "/", 1)
    bundled = find_bundled(ref)
    assert bundled is not None, ref
    assert hashlib.sha256(bundled.path.read_bytes()).hexdigest() == entry["config_sha256"]
    return ref


def _request(entry: dict) -> EngineRequest:
    return EngineRequest(
        model=bundled_shape(_ref(entry)), max_model_len=entry.get("context_len", 8192),
        kv_cache_dtype=entry["kv_cache_dtype"], tensor_parallel_size=entry["tp"],
        available_kv_bytes=int(entry["kv_memory_gib"] * GIB), gpu_memory_bytes=H100,
        gpu_compute_capability=tuple(FIXTURE["gpu"]["cap"]),
        extra={**entry["server_args"], "enable_hierarchical_cache": True},
    )  # fmt: skip


def test_fixture_covers_the_cases():
    args = [e["server_args"] for e in BUILT]
    assert {"hicache_ratio": 2} in args and {} in args and {"hicache_size": 100} in args
    assert any(e["host_pool"]["class"] == "MLATokenToKVPoolHost" for e in BUILT)
    assert any(e["tp"] > 1 and e["host_pool"]["class"] == "MHATokenToKVPoolHost" for e in BUILT)
    assert any(e["page_size"] > 1 for e in BUILT)
    assert len({e["host_pool"]["layout"] for e in BUILT}) >= 4
    assert sum(e["status"] != "ok" or e["host_status"] != "ok" for e in ENTRIES) >= 4


@pytest.mark.parametrize("entry", BUILT, ids=_id)
def test_host_pool_equals_sglangs(entry):
    """The device pool as before, and the host pool SGLang builds beside it: its tokens (with
    the padding page), its bytes per token, its bytes on every rank."""
    request = _request(entry)
    plan = SGLANG.plan_kv_cache(request)
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"] == entry["device_pool_size"]
    assert plan.kv_cache_bytes == entry["device_pool_bytes"]
    opts = hicache.options(request.extra)
    assert opts is not None
    host = entry["host_pool"]
    assert opts.mem_layout == entry["resolved_hicache"]["hicache_mem_layout"] == host["layout"]
    assert opts.io_backend == entry["resolved_hicache"]["hicache_io_backend"]
    if opts.auto_sized:  # the ratio SGLang's auto-sizing chose for this host
        ratio = hicache.auto_ratio(opts, device_pool_bytes=plan.kv_cache_bytes,
                                   host_free_bytes=entry["host_free_bytes"])  # fmt: skip
        assert ratio == entry["hicache_ratio_used"]
        opts = replace(opts, ratio=ratio)
    tokens = hicache.host_tokens(opts, device_tokens=plan.kv_cache_tokens,
                                 bytes_per_token=plan.kv_bytes_per_token, page=plan.block_size)  # fmt: skip
    assert tokens == host["size"]
    assert plan.kv_bytes_per_token == host["size_per_token"]
    if entry["hicache_ratio_used"] == 2.0 or not hicache.options(request.extra).auto_sized:
        tier = SGLANG.engine_host_tier(request, plan)
        assert tier.kv_tokens == host["size"]
        assert tier.host_bytes == host["host_bytes"] * entry["tp"]
        assert host["host_bytes"] <= entry["host_free_bytes"] - hicache.HOST_RESERVE_BYTES


def test_sglangs_host_memory_refusals():
    """Where SGLang's host check stops it, kvcalc's pool per rank is over the same line (the
    host's memory is not an input: kvcalc says the line in a note)."""
    for entry in ENTRIES:
        error = entry.get("host_error", "")
        if "Not enough host memory" in error:
            request = _request(entry)
            tier = SGLANG.engine_host_tier(request, SGLANG.plan_kv_cache(request))
            assert tier.host_bytes > entry["host_free_bytes"] - hicache.HOST_RESERVE_BYTES
            assert any("Not enough host memory" in n for n in tier.notes)
        elif "No host memory is left" in error:
            opts = hicache.options({"enable_hierarchical_cache": True})
            assert opts is not None
            assert hicache.auto_ratio(opts, device_pool_bytes=entry["device_pool_bytes"],
                                      host_free_bytes=entry["host_free_bytes"]) <= 0  # fmt: skip


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["status"] != "ok"], ids=_id)
def test_sglangs_argument_refusals(entry):
    with pytest.raises(InputError) as err:
        SGLANG.plan_kv_cache(_request(entry))
    sglang_says = entry["error"].removeprefix("ValueError: ")
    assert sglang_says in err.value.message


def _plan(**kw):
    base = dict(engine="sglang", gpu="H100-80GB", max_model_len=32768)
    return plan_reference("llama-3.1-8b", PlanInputs(**(base | kw)), with_suggestions=False)


def test_plan_reports_the_host_tier():
    without = _plan()
    plan = _plan(engine_options={"enable_hierarchical_cache": True, "hicache_size": 100})
    assert without.host_kv_tokens is None and not without.host_memory_bytes
    assert plan.kv_cache_tokens == without.kv_cache_tokens  # the GPU pool is unchanged
    assert plan.host_kv_tokens == 762_940  # int(100e9 // 131,072) + 1 page
    assert plan.host_memory_bytes == 762_940 * 131_072
    assert any("HiCache host pool" in n for n in plan.notes)
    auto = _plan(engine_options={"enable_hierarchical_cache": True})
    assert auto.host_kv_tokens == 2 * auto.kv_cache_tokens + 1
    assert any("auto-sizes" in n for n in auto.notes)


def test_from_command_reads_the_hicache_flags():
    from kvcalc.planning.servecmd import parse_serve_command

    read = parse_serve_command(
        "python -m sglang.launch_server --model-path m --tp 2 --enable-hicache "
        "--hicache-ratio 3 --hicache-mem-layout layer_first --hicache-write-policy write_back"
    )
    options = dict(read.values["engine_options"])
    assert options["enable_hierarchical_cache"] is True
    assert options["hicache_ratio"] == 3.0 and options["hicache_mem_layout"] == "layer_first"


def test_deployment_file_checks_max_host_memory(tmp_path):
    from kvcalc.deploy.run import check_paths

    path = tmp_path / "d.yaml"
    path.write_text(
        "model: llama-3.1-8b\nengine: sglang\ngpu: H100-80GB\nmax_model_len: 32768\n"
        "engine_options: {enable_hierarchical_cache: true, hicache_size: 100}\n"
        "requirements: {max_host_memory: 64GiB}\n"
    )
    report = check_paths([str(path)])
    assert not report.problems, report.problems
    (result,) = report.results
    assert result.plan.host_memory_bytes == 762_940 * 131_072
    assert [f.requirement for f in result.failures] == ["max_host_memory"]


@pytest.mark.parametrize(
    ("model", "extra", "what"),
    [("openai/gpt-oss-20b", {}, "sliding-window"), ("Qwen/Qwen3-Next-80B-A3B-Thinking", {}, "hybrid"),
     ("zai-org/GLM-5", {}, "DSA")],
)  # fmt: skip
def test_unrecorded_models_refused_by_name(model, extra, what):
    request = EngineRequest(model=bundled_shape(model), max_model_len=8192, available_kv_bytes=20 * GIB,
                            gpu_memory_bytes=H100, extra={"enable_hierarchical_cache": True, **extra})  # fmt: skip
    with pytest.raises(InputError) as err:
        SGLANG.plan_kv_cache(request)
    assert err.value.code == "offload-not-modelled" and what in err.value.message


def test_hicache_keys_without_enable_build_nothing():
    request = EngineRequest(model=bundled_shape("meta-llama/Llama-3.1-8B"), max_model_len=8192,
                            available_kv_bytes=20 * GIB, gpu_memory_bytes=H100,
                            extra={"hicache_ratio": 3})  # fmt: skip
    plan = SGLANG.plan_kv_cache(request)
    assert SGLANG.engine_host_tier(request, plan) is None
    assert any("builds no host pool" in n for n in plan.notes)
