"""vLLM 0.33's LoRA slots (``kvcalc.engines.vllm.lora``) against vLLM's own code, and the plan's
use of them: in the weights term before the KV budget, graphs captured twice, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvcalc.engines.lora_options import LoraOptions
from kvcalc.engines.vllm.lora import vllm_lora_slots
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference, resolve_model_cached
from kvcalc.planning.inputs import PlanInputs

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "tests/fixtures/vllm_0_33/lora_slots.json").read_text())
RECORDS = FIXTURE["records"]


def _options(rec: dict) -> LoraOptions:
    return LoraOptions(max_loras=rec["max_loras"], max_lora_rank=rec["max_lora_rank"],
                       fully_sharded_loras=rec.get("fully_sharded_loras", False),
                       lora_dtype=rec.get("lora_dtype", "auto"))  # fmt: skip


def _class(name: str) -> str:
    return name.replace("WithShardedLoRA", "").replace("WithLoRA", "")


def test_fixture_covers_the_cases_asked_for():
    keys = {(r["model"], r["tensor_parallel_size"], r["max_lora_rank"]) for r in RECORDS}
    assert {("llama-3.1-8b", 1, 64), ("llama-3.1-8b", 2, 64), ("llama-3.1-8b", 1, 16)} <= keys
    assert len({r["model"] for r in RECORDS}) >= 3  # more than one dense family
    assert all("deploy_probe.py" in r["command"] and "/work" not in r["command"] for r in RECORDS)


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r["command"].split()[3])
def test_slot_bytes_equal_vllms(rec):
    model = resolve_model_cached(rec["model"]).shape
    slots = vllm_lora_slots(model, _options(rec), tensor_parallel_size=rec["tensor_parallel_size"],
                            weight_dtype=rec.get("dtype"))  # fmt: skip
    assert slots.bytes_per_gpu == rec["lora_slot_bytes_per_rank"]
    assert dict(slots.by_class) == {_class(k): v for k, v in rec["by_layer_class"].items()}


def test_llama_8b_four_slots_rank_64_by_hand():
    # per slot and layer at TP 1, r = 64, bf16: qkv 3·64·4096 + (4096 + 2·1024)·64 = 1,179,648;
    # o 64·4096 + 4096·64 = 524,288; gate_up 2·64·4096 + 2·14336·64 = 2,359,296;
    # down 64·14336 + 4096·64 = 1,179,648 → 5,242,880 values × 32 layers; embedding and lm_head
    # 128,256·64 + 4096·64 = 8,470,528 each → (167,772,160 + 16,941,056) × 2 B × 4 slots
    model = resolve_model_cached("llama-3.1-8b").shape
    slots = vllm_lora_slots(
        model, LoraOptions(max_loras=4, max_lora_rank=64), tensor_parallel_size=1
    )
    assert slots.bytes_per_gpu == (5_242_880 * 32 + 2 * 8_470_528) * 2 * 4 == 1_477_705_728
    assert not slots.moe_unconfirmed


def test_moe_experts_by_the_source_formula_unconfirmed_by_a_run():
    # Qwen3-30B-A3B TP 1, 4 slots of rank 16 (fused_moe.py FusedMoEWithLoRA._create_lora_a/b_weights):
    # per expert w13 2·(16·2048 + 768·16) + w2 (16·768 + 2048·16) = 135,168 values
    # × 128 experts × 48 layers × 2 B × 4 slots
    model = resolve_model_cached("qwen3-30b-a3b").shape
    slots = vllm_lora_slots(
        model, LoraOptions(max_loras=4, max_lora_rank=16), tensor_parallel_size=1
    )
    assert dict(slots.by_class)["FusedMoE"] == 135_168 * 128 * 48 * 2 * 4 == 6_643_777_536
    assert slots.moe_unconfirmed
    assert any("unconfirmed by a run" in n for n in slots.notes)


def _plan(**kw):
    base = dict(gpu="H100-80GB", max_model_len=32768)
    return plan_reference("llama-3.1-8b", PlanInputs(**(base | kw)), with_suggestions=False)


def test_plan_takes_the_slots_before_the_kv_budget():
    without, with_lora = _plan(), _plan(enable_lora=True, max_loras=4, max_lora_rank=64)
    assert with_lora.lora_bytes == 1_477_705_728
    assert with_lora.weights_bytes - without.weights_bytes == 1_477_705_728
    # the budget loses the slots and the larger graph estimate (graphs captured twice)
    graphs = with_lora.memory.cudagraph_bytes - without.memory.cudagraph_bytes
    assert graphs > 0
    assert without.available_kv_bytes - with_lora.available_kv_bytes == 1_477_705_728 + graphs
    # and the band moves with it
    assert (without.available_kv_bytes_low - with_lora.available_kv_bytes_low
            == 1_477_705_728 + graphs)  # fmt: skip


def test_slots_follow_the_dtype_vllm_serves_the_model_in():
    # lora_dtype auto = the model's served dtype (config/lora.py verify_with_model_config): Gemma-2-9B
    # in fp32 holds 4-byte slots, recorded with --dtype float32 (432,144,384 B = 2 × 216,072,192)
    fp32 = next(r for r in RECORDS if r.get("dtype") == "float32")["lora_slot_bytes_per_rank"]
    kw = dict(max_model_len=8192, enable_lora=True, max_loras=2, max_lora_rank=16)
    plan = plan_reference("gemma-2-9b-it", PlanInputs(gpu="H100-80GB", dtype="float32", **kw),
                          with_suggestions=False)  # fmt: skip
    assert plan.lora_bytes == fp32 == 432_144_384
    # on a T4 (no bf16) vLLM's auto rule serves Gemma-2 in fp32 too (vllm/config/model.py
    # _resolve_auto_dtype): the same 4-byte slots, not the bf16 ones
    t4 = plan_reference("gemma-2-9b-it", PlanInputs(gpu="T4", **kw), with_suggestions=False)
    assert t4.lora_bytes == 432_144_384


@pytest.mark.parametrize(
    "kw",
    [
        {"data_parallel_size": 2, "num_gpus": 2},
        {"enable_expert_parallel": True, "tensor_parallel_size": 2},
    ],
)
def test_moe_slots_under_expert_or_data_parallelism_are_refused(kw):
    # FusedMoEWithLoRA holds its local experts' slots only: a layout kvcalc has not read
    with pytest.raises(InputError) as err:
        plan_reference("qwen3-30b-a3b", PlanInputs(gpu="H100-80GB", max_model_len=8192,
                       enable_lora=True, **kw), with_suggestions=False)  # fmt: skip
    assert err.value.code == "lora-not-modelled" and "routed experts" in err.value.message


def test_given_kv_memory_keeps_the_blocks():
    # the harness's check: at 20 GiB of KV the block count is vLLM's, LoRA or not (10,240)
    plan = _plan(kv_cache_memory_bytes=20 * 2**30, enable_lora=True, max_loras=4, max_lora_rank=64)
    assert plan.num_blocks == RECORDS[0]["num_blocks_at_20_gib"] == 10_240
    assert plan.lora_bytes == 1_477_705_728


def test_graphs_counted_twice():
    plan = _plan(enable_lora=True)
    assert "2 LoRA cases" in " ".join(plan.notes)
    assert "102 PIECEWISE" in " ".join(plan.notes)  # 51 capture sizes × 2


def test_given_weights_are_taken_to_include_the_slots():
    plan = _plan(enable_lora=True, weights_memory_bytes=17 * 2**30)
    assert plan.weights_bytes == 17 * 2**30
    assert plan.lora_bytes > 0


@pytest.mark.parametrize(
    ("kw", "code"),
    [
        ({"max_lora_rank": 24}, "lora-refused"),
        ({"max_loras": 4, "max_cpu_loras": 2}, "lora-refused"),
        (
            {"max_lora_rank": 8, "fully_sharded_loras": True, "tensor_parallel_size": 16},
            "lora-refused",
        ),
        ({"pipeline_parallel_size": 2}, "lora-not-modelled"),
        ({"engine_version": "0.21"}, "lora-not-modelled"),
        ({"engine": "llamacpp"}, "lora-not-modelled"),
    ],
)
def test_refusals(kw, code):
    with pytest.raises(InputError) as err:
        _plan(enable_lora=True, **kw)
    assert err.value.code == code


def test_vocabulary_above_the_limit_is_refused():
    # gemma-3 1b: vocab 262,144 > 258,048, but Gemma3ForCausalLM is not in the read table;
    # the limit is checked on a Llama shape with a larger vocabulary
    from dataclasses import replace

    model = resolve_model_cached("llama-3.1-8b").shape
    big = replace(model, weights=replace(model.weights, vocab_size=258_049))
    with pytest.raises(InputError) as err:
        vllm_lora_slots(big, LoraOptions(), tensor_parallel_size=1)
    assert err.value.code == "lora-refused" and "258048" in err.value.message
    ok = replace(model, weights=replace(model.weights, vocab_size=258_048))
    assert vllm_lora_slots(ok, LoraOptions(), tensor_parallel_size=1).bytes_per_gpu > 0


def test_unread_architecture_is_refused():
    model = resolve_model_cached("deepseek-v3").shape
    with pytest.raises(InputError) as err:
        vllm_lora_slots(model, LoraOptions(), tensor_parallel_size=8)
    assert err.value.code == "lora-not-modelled"


def test_lora_settings_without_enable_lora_change_nothing():
    assert _plan(max_loras=8, max_lora_rank=64).lora_bytes == 0


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvcalc", *args], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip


def test_cli_from_command_and_refusals():
    out = _cli("plan", "--from-command", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 32768 "
               "--enable-lora --max-loras 4 --max-lora-rank 64", "--gpu", "H100-80GB", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["lora_bytes"] == 1_477_705_728
    bad = _cli(
        "plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--enable-lora", "--max-lora-rank", "24"
    )
    assert bad.returncode == 2 and "error[lora-refused]" in bad.stderr
    pp = _cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--enable-lora", "-pp", "2")
    assert pp.returncode == 2 and "error[lora-not-modelled]" in pp.stderr


def test_deployment_file_keys(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("model: llama-3.1-8b\ngpu: H100-80GB\nmax_model_len: 32768\nenable_lora: true\n"
                 "max_loras: 4\nmax_lora_rank: 64\n")  # fmt: skip
    out = _cli("check", str(f), "--format", "json")
    assert out.returncode in (0, 1), out.stderr
    assert '"lora_bytes": 1477705728' in out.stdout
