"""SGLang 0.5.23's LoRA memory pool (``kvcalc.engines.sglang.lora``) against SGLang's own code,
and the plan's use of it: built after the weights, before the KV pool; SGLang's refusals.

``fixtures/sglang_0_5_23/lora_pool.json`` was recorded with ``lora_probe.py`` beside the SGLang
reference tool: the model built by SGLang's loader on the meta device, ``LoRAManager``
constructed as ``ModelRunner.init_lora_manager`` does, every pool tensor summed; then the tool's
KV-cache configurator with the free memory after the weights lowered by the pool.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.engines.lora_options import LoraOptions
from kvcalc.engines.sglang.lora import sglang_lora_pool
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference, resolve_model_cached
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB, MIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "sglang_0_5_23" / "lora_pool.json").read_text()
)
ENTRIES = FIXTURE["entries"]
OK = [e for e in ENTRIES if e["status"] == "ok"]
REFUSED = [e for e in ENTRIES if e["status"] != "ok"]
SGLANG = get_engine("sglang")
H100 = 81_559 * MIB


def _options(args: dict) -> LoraOptions:
    modules = args.get("lora_target_modules")
    n, r = args.get("max_loras_per_batch"), args.get("max_lora_rank")
    return LoraOptions(max_loras=n or 1, max_lora_rank=r or 16, asked_max_loras=n,
                       asked_max_lora_rank=r,
                       target_modules=tuple(modules) if modules is not None else None)  # fmt: skip


def _id(e: dict) -> str:
    a = e["server_args"]
    mods = "-".join(a.get("lora_target_modules") or ["none"])
    return f"{e['model']}-tp{e['tp']}-r{a.get('max_lora_rank')}-n{a.get('max_loras_per_batch', 'default')}-{mods}"


def test_fixture_covers_the_cases_asked_for():
    keys = {(e["model"], e["tp"], e["max_lora_rank"], e["max_loras_per_batch"]) for e in OK}
    for model in ("llama-3.1-8b", "qwen3-8b"):
        for tp in (1, 2):
            assert {(model, tp, 64, 8), (model, tp, 16, 4)} <= keys
    assert {tuple(e["server_args"]["lora_target_modules"]) for e in OK} >= {
        ("all",),
        ("q_proj", "k_proj", "v_proj", "o_proj"),
    }
    assert len(REFUSED) >= 3


@pytest.mark.parametrize("entry", OK, ids=_id)
def test_pool_bytes_equal_sglangs(entry):
    model = resolve_model_cached(entry["model"]).shape
    pool = sglang_lora_pool(model, _options(entry["server_args"]), tensor_parallel_size=entry["tp"])
    assert pool.bytes_per_gpu == entry["lora_pool_bytes_per_rank"]
    assert dict(pool.by_module) == entry["by_module"]
    assert sorted(pool.target_modules) == entry["target_modules"]
    assert pool.max_loras_per_batch == entry["max_loras_per_batch"]  # SGLang's default: 8


@pytest.mark.parametrize("entry", OK, ids=_id)
def test_kv_pool_shrinks_by_the_pool(entry):
    """SGLang's configurator measured the free memory with the pool resident: kvcalc's budget,
    the pool in the weights term, gives the same budget and the same max_total_num_tokens."""
    model = resolve_model_cached(entry["model"]).shape
    pool = sglang_lora_pool(model, _options(entry["server_args"]), tensor_parallel_size=entry["tp"])
    free = entry["free_after_weights_without_lora_bytes"]

    def available(pre: int, lora: int) -> int:
        device = MemoryInputs(gpu_memory_bytes=H100, tensor_parallel_size=entry["tp"], model=model,
                              gpu_memory_utilization=entry["mem_fraction_static"],
                              weights_bytes=pre - free + lora, non_torch_bytes=H100 - pre)  # fmt: skip
        return SGLANG.available_kv_bytes(device)

    # the tool's free memory before the weights P is a float64 in GiB (P·2^30 need not be whole
    # bytes; SGLang reads it through the same float32 all-reduce as the free memory at TP > 1):
    # the whole byte count next to it whose rest is nearest the tool's 20 GiB without LoRA
    # (exact at TP 1; 65 B above at TP 2, less than a token)
    near = round(entry["pre_model_load_memory_gib"] * GIB)
    pre = min(range(near - 64, near + 65),
              key=lambda p: (abs(available(p, 0) - 20 * GIB), available(p, 0) < 20 * GIB))  # fmt: skip
    assert abs(available(pre, 0) - 20 * GIB) <= 128
    # with the pool resident the budget is 20 GiB less the pool, to the byte, as SGLang's
    assert entry["kv_budget_bytes"] == 20 * GIB - entry["lora_pool_bytes_per_rank"]
    assert available(pre, 0) - available(pre, pool.bytes_per_gpu) == pool.bytes_per_gpu
    available_bytes = available(pre, pool.bytes_per_gpu)
    request = EngineRequest(model=model, max_model_len=entry["context_len"],
                            kv_cache_dtype="auto", tensor_parallel_size=entry["tp"],
                            available_kv_bytes=available_bytes, gpu_memory_bytes=H100,
                            gpu_compute_capability=(9, 0))  # fmt: skip
    plan = SGLANG.plan_kv_cache(request)
    # e.g. Llama-3.1-8B TP 1, 8 × rank 64 on all: (20 GiB − 3,226,468,352) // 131,072 = 139,224
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"]
    assert plan.max_num_seqs == entry["max_running_requests"]


def test_llama_8b_all_modules_by_hand():
    # per slot and layer at TP 1, r = 64: qkv 3·64·4096 + 6144·64 = 1,179,648; o 64·4096 +
    # 4096·64 = 524,288; gate_up 2·64·4096 + 28,672·64 = 2,359,296; down 64·14,336 + 4096·64 =
    # 1,179,648 → 5,242,880 × 32 layers; embed_tokens and lm_head 64·128,256 + 4096·64 =
    # 8,470,528 each, each allocated twice (embedding and lm_head buffers both hold the two)
    # → (167,772,160 + 4 · 8,470,528) × 2 B × 8 slots
    model = resolve_model_cached("llama-3.1-8b").shape
    options = LoraOptions(asked_max_lora_rank=64, target_modules=("all",))
    pool = sglang_lora_pool(model, options, tensor_parallel_size=1)
    assert pool.bytes_per_gpu == (5_242_880 * 32 + 4 * 8_470_528) * 2 * 8 == 3_226_468_352


@pytest.mark.parametrize("entry", REFUSED, ids=_id)
def test_refuses_what_sglang_refuses(entry):
    model = resolve_model_cached(entry["model"]).shape
    args = entry["server_args"]
    sglang_says = entry["error"].split(": ", 1)[1]
    if args.get("max_loras_per_batch") == 0:
        assert "max_loras_per_batch must be positive" in sglang_says
        with pytest.raises(InputError) as err:  # kvcalc's own check: a positive integer
            PlanInputs(engine="sglang", gpu="H100-80GB", enable_lora=True, max_loras=0)
        assert err.value.code == "invalid-input"
        return
    with pytest.raises(InputError) as err:
        sglang_lora_pool(model, _options(args), tensor_parallel_size=entry["tp"])
    assert err.value.code == "lora-refused"
    assert sglang_says.split(". ")[0] in err.value.message or sglang_says[:40] in err.value.message


def _plan(**kw):
    base = dict(engine="sglang", gpu="H100-80GB", max_model_len=32768)
    return plan_reference("llama-3.1-8b", PlanInputs(**(base | kw)), with_suggestions=False)


def test_plan_takes_the_pool_before_the_kv_pool():
    lora = dict(enable_lora=True, max_lora_rank=64, lora_target_modules="all")
    without, with_lora = _plan(), _plan(**lora)
    assert with_lora.lora_bytes == 3_226_468_352
    assert with_lora.weights_bytes - without.weights_bytes == 3_226_468_352
    assert with_lora.kv_cache_tokens < without.kv_cache_tokens
    # a given --weights-memory is SGLang's "Load weight end ... mem usage", printed before the
    # pool is built: the pool is added to it (vLLM's "Model loading took" holds its slots)
    given = _plan(weights_memory_bytes=16 * GIB, **lora)
    assert given.weights_bytes == 16 * GIB + 3_226_468_352
    assert any("added to --weights-memory" in n for n in given.notes)


def test_max_loras_per_batch_is_max_loras():
    four = _plan(enable_lora=True, max_loras=4, max_lora_rank=16, lora_target_modules="all")
    assert four.lora_bytes == next(
        e["lora_pool_bytes_per_rank"] for e in OK
        if e["model"] == "llama-3.1-8b" and e["tp"] == 1 and e["max_lora_rank"] == 16
        and e["max_loras_per_batch"] == 4 and e["target_modules"][0] == "down_proj"
        and len(e["target_modules"]) == 6
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        (dict(max_lora_rank=64), "lora-refused"),  # no --lora-target-modules
        (dict(lora_target_modules="all"), "lora-refused"),  # no --max-lora-rank
        (dict(max_lora_rank=64, lora_target_modules="all q_proj"), "lora-refused"),
        (dict(max_lora_rank=64, lora_target_modules="all", max_cpu_loras=2), "lora-refused"),
        (dict(max_lora_rank=64, lora_target_modules="all", lora_dtype="float16"), "lora-refused"),
        (
            dict(max_lora_rank=64, lora_target_modules="all", pipeline_parallel_size=2),
            "lora-not-modelled",
        ),
        (dict(max_lora_rank=64, lora_target_modules="kv_b_proj"), "lora-not-modelled"),
    ],
)
def test_plan_refuses(kw, code):
    with pytest.raises(InputError) as err:
        _plan(enable_lora=True, **kw)
    assert err.value.code == code


def test_older_sglang_profiles_refused():
    with pytest.raises(InputError) as err:
        _plan(engine_version="0.5.8", enable_lora=True, max_lora_rank=16, lora_target_modules="all")
    assert err.value.code == "lora-not-modelled"


def test_moe_and_other_architectures_refused():
    with pytest.raises(InputError) as err:
        plan_reference("qwen3-30b-a3b", PlanInputs(engine="sglang", gpu="H100-80GB",
                       max_model_len=8192, enable_lora=True, max_lora_rank=16,
                       lora_target_modules="all"), with_suggestions=False)  # fmt: skip
    assert err.value.code == "lora-not-modelled"


def test_vllm_refuses_lora_target_modules():
    with pytest.raises(InputError) as err:
        plan_reference("llama-3.1-8b", PlanInputs(gpu="H100-80GB", max_model_len=8192,
                       enable_lora=True, lora_target_modules="all"), with_suggestions=False)  # fmt: skip
    assert err.value.code == "lora-not-modelled"


def test_from_command_reads_sglangs_lora_flags():
    from kvcalc.planning.servecmd import parse_serve_command

    read = parse_serve_command(
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --enable-lora "
        "--max-loras-per-batch 4 --max-lora-rank 16 --lora-target-modules q_proj k_proj v_proj "
        "o_proj --max-loaded-loras 8 --lora-eviction-policy fifo"
    )
    values = {k: v for k, v in read.values.items() if k != "engine_options"}
    inputs = replace(PlanInputs(engine="sglang", gpu="H100-80GB"), **values)
    lora = inputs.lora
    assert lora is not None and lora.asked_max_loras == 4 and lora.asked_max_lora_rank == 16
    assert lora.target_modules == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert lora.max_cpu_loras == 8
