"""SGLang 0.5.23's decode context parallelism (``kvcalc.engines.sglang.dcp``) against SGLang's own
sizing code, and the plan's use of ``--dcp-size``.

``fixtures/sglang_0_5_23/dcp_pool.json`` was recorded with ``dcp_probe.py`` beside the SGLang
reference tool: the entry's ``dcp_size`` resolved by SGLang's own argument pipeline, the tool's
configurator and pools on the meta device, then ``KVCacheConfigurator.logical_token_capacity``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.sources.bundled import find_bundled
from kvcalc.units import GIB, MIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "sglang_0_5_23" / "dcp_pool.json").read_text()
)
ENTRIES = FIXTURE["entries"]
SGLANG = get_engine("sglang")
H100 = FIXTURE["gpu"]["total_mib"] * MIB


def _modelled(e: dict) -> bool:
    """The entries kvcalc plans: MLA (not DSA), a DCP that divides TP, no HiCache beside it."""
    args = e["server_args"]
    return (e["device_pool_class"] == "MLATokenToKVPool" and e["tp"] % args["dcp_size"] == 0
            and not args.get("enable_hierarchical_cache"))  # fmt: skip


MODELLED = [e for e in ENTRIES if _modelled(e)]
REFUSED = [e for e in ENTRIES if not _modelled(e)]


def _id(e: dict) -> str:
    args = "-".join(f"{k}={v}" for k, v in e["server_args"].items())
    return f"{Path(e['config']).stem.split('--')[-1]}-tp{e['tp']}-{e['kv_cache_dtype']}-{args}"


def _request(entry: dict) -> EngineRequest:
    ref = Path(entry["config"]).stem.replace("--", "/", 1)
    bundled = find_bundled(ref)
    assert bundled is not None, ref
    assert hashlib.sha256(bundled.path.read_bytes()).hexdigest() == entry["config_sha256"]
    args = dict(entry["server_args"])
    dcp = args.pop("dcp_size")
    running = args.pop("max_running_requests", None)
    context = args.pop("context_length", None)
    return EngineRequest(
        model=bundled_shape(ref), max_model_len=context or entry["context_len"],
        kv_cache_dtype=entry["kv_cache_dtype"], tensor_parallel_size=entry["tp"],
        decode_context_parallel_size=dcp, max_num_seqs=running,
        available_kv_bytes=int(entry["kv_memory_gib"] * GIB), gpu_memory_bytes=H100,
        gpu_compute_capability=tuple(FIXTURE["gpu"]["cap"]), extra=args,
    )  # fmt: skip


def test_fixture_covers_the_cases():
    assert {e["server_args"]["dcp_size"] for e in MODELLED} >= {2, 4, 8}
    assert {e["kv_cache_dtype"] for e in MODELLED} == {"auto", "fp8_e4m3"}
    assert any(e["page_size"] > 1 for e in MODELLED)
    assert {e["device_pool_class"] for e in REFUSED} >= {"MHATokenToKVPool", "DSATokenToKVPool"}


@pytest.mark.parametrize("entry", MODELLED, ids=_id)
def test_pool_equals_sglangs(entry):
    """The rows per rank, the logical tokens the allocator makes of them, its page, the request
    cap from the rows, and the default memory fraction without the prefill-graph reserve."""
    request = _request(entry)
    dcp = request.decode_context_parallel_size
    plan = SGLANG.plan_kv_cache(request)
    assert plan.kv_bytes_per_token == entry["cell_size"]
    assert plan.kv_cache_tokens == entry["logical_token_capacity"] == entry["allocator_size"]
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"] * dcp
    assert plan.block_size == entry["allocator_page_size"]
    assert plan.num_blocks * entry["page_size"] == entry["max_total_num_tokens"]
    assert plan.max_num_seqs == entry["max_running_requests"]
    rows = entry["kv_buffer"]["shapes"][0]["shape"][0]  # tokens + one padding page per layer
    assert plan.kv_cache_bytes == rows * entry["cell_size"]
    assert f"#tokens: {entry['max_total_num_tokens']}," in plan.log_lines[0]
    assert f"max_total_num_tokens={entry['logical_token_capacity']}," in plan.log_lines[1]
    memory = MemoryInputs(gpu_memory_bytes=H100, tensor_parallel_size=entry["tp"],
                          decode_context_parallel_size=dcp, model=request.model,
                          max_num_seqs=request.max_num_seqs)  # fmt: skip
    assert SGLANG.default_gpu_memory_utilization(memory) == entry["mem_fraction_static"]


@pytest.mark.parametrize("entry", REFUSED, ids=_id)
def test_unrecorded_layouts_refused_by_name(entry):
    with pytest.raises(InputError) as err:
        SGLANG.plan_kv_cache(_request(entry))
    assert err.value.code in ("unsupported-parallelism", "offload-not-modelled")
    assert "not modelled" in err.value.message


def test_plan_and_command():
    from kvcalc.planning.servecmd import parse_serve_command

    read = parse_serve_command(
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dcp-size 8"
    )
    assert read.values["decode_context_parallel_size"] == 8
    base = dict(engine="sglang", gpu="H100-80GB", tensor_parallel_size=8, max_model_len=32768,
                weights_memory_bytes=60 * GIB)  # fmt: skip
    without = plan_reference("deepseek-v3", PlanInputs(**base), with_suggestions=False)
    plan = plan_reference("deepseek-v3", PlanInputs(**base, decode_context_parallel_size=8),
                          with_suggestions=False)  # fmt: skip
    # no prefill-graph reserve under DCP (0.818 against 0.799 on the recorded H100)
    assert plan.memory.gpu_memory_utilization > without.memory.gpu_memory_utilization
    assert plan.kv_cache_tokens == 8 * (plan.kv_cache_tokens // 8)
    assert plan.kv_cache_tokens > 7 * without.kv_cache_tokens
    with pytest.raises(InputError) as err:
        plan_reference("llama-3.1-8b", PlanInputs(engine="sglang", gpu="H100-80GB",
                       tensor_parallel_size=2, decode_context_parallel_size=2),
                       with_suggestions=False)  # fmt: skip
    assert err.value.code == "unsupported-parallelism" and "MHA" in err.value.message
