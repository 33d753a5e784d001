"""Data, expert and context parallelism against vLLM 0.33.0's own code.

``fixtures/vllm_0_33/parallelism.json`` was recorded with ``deploy_probe.py`` (the reference
harness plus parameter bytes per rank): DeepSeek-V3 TP 8 against DP 8 with and without EP, TP 8 +
DCP 8, Qwen3-30B-A3B and Qwen3-235B-A22B under DP + EP (and EPLB), a dense model under DP and DCP,
and vLLM's refusals. Each scenario is planned as the probe ran it (``--kv-cache-memory`` as given)
and must give vLLM's blocks, tokens, concurrency, printed line and weights per rank.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import config_folder

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "parallelism.json"
SCENARIOS = json.loads(FIXTURE.read_text(encoding="utf-8"))["scenarios"]
GPUS = {"h100": "H100-80GB", "h200": "H200"}


def _inputs(s: dict) -> PlanInputs:
    args = s["engine_args"]
    return PlanInputs(
        gpu=GPUS[s["gpu"]],
        tensor_parallel_size=s["tensor_parallel_size"],
        max_model_len=s["max_model_len"],
        kv_cache_memory_bytes=int(float(s["kv_gib_per_gpu"]) * (1 << 30)),
        data_parallel_size=args.get("data_parallel_size", 1),
        enable_expert_parallel=args.get("enable_expert_parallel", False),
        enable_eplb=args.get("enable_eplb", False),
        num_redundant_experts=args.get("eplb_config", {}).get("num_redundant_experts", 0),
        decode_context_parallel_size=args.get("decode_context_parallel_size", 1),
        prefill_context_parallel_size=args.get("prefill_context_parallel_size", 1),
    )


OK = {k: v for k, v in SCENARIOS.items() if v["status"] == "ok"}
REFUSED = {k: v for k, v in SCENARIOS.items() if v["status"] != "ok"}


@pytest.mark.parametrize("name", sorted(OK))
def test_plan_equals_vllm(name):
    s = OK[name]
    plan = plan_reference(s["model"], _inputs(s))
    assert plan.block_size == s["block_size"]
    assert plan.num_blocks == s["num_blocks"]
    assert plan.kv_cache_tokens == s["kv_cache_tokens"]
    assert round(plan.max_concurrency, 4) == round(s["max_concurrency"], 4)
    assert sum(g.blocks_per_request for g in plan.groups) == sum(s["blocks_per_request"])
    assert s["log_line"] in plan.log_lines
    # vLLM's parameters and buffers per rank, to the byte: the fp32 attention scales (16 B a layer)
    # and DeepSeek's fp32 e_score_correction_bias (256 × 4 B a MoE layer) included
    assert plan.weights_bytes == s["weights_bytes_per_rank"]


def test_recorded_weights_per_rank_are_the_notes():
    # the figures the deployment note quotes, from the same probe runs
    assert OK["dsv3_tp8"]["weights_bytes_per_rank"] == 85_161_103_344
    assert OK["dsv3_dp8"]["weights_bytes_per_rank"] == 100_861_719_856
    # EP adds each MoE layer's int32 expert_map: 58 layers × 256 experts × 4 B
    assert OK["dsv3_dp8_ep"]["weights_bytes_per_rank"] == 100_861_719_856 + 58 * 256 * 4
    assert OK["dsv3_dp8_ep"]["weights_bytes_per_rank"] == 100_861_779_248


def test_deepseek_dp8_ep_per_rank_and_total():
    s = OK["dsv3_dp8_ep"]
    plan = plan_reference("deepseek-v3", _inputs(s))
    # 28 GiB / (61 layers × 18,432 B) = 26,739 blocks; 32,000 tokens need 2,000: 13.37 per rank
    assert plan.num_blocks == 26_739
    assert plan.max_concurrency == pytest.approx(26_739 / 2_000)
    assert plan.data_parallel_size == 8 and plan.data_parallel_replicas == 8
    assert plan.total_max_concurrency == pytest.approx(8 * 26_739 / 2_000)  # 106.96
    assert plan.expert_parallel and plan.moe_parallel_size == 8
    assert plan.num_gpus == 8 and plan.idle_gpus == 0


def test_deepseek_dcp8():
    s = OK["dsv3_tp8_dcp8"]
    plan = plan_reference("deepseek-v3", _inputs(s))
    # cdiv(cdiv(32,000, 8), 16) = 250 blocks per request: 40,978 / 250 = 163.91
    assert plan.groups[0].blocks_per_request == 250
    assert plan.max_concurrency == pytest.approx(40_978 / 250)
    assert plan.kv_cache_tokens == int(40_978 / 250 * 32_000)  # 5,245,184
    assert plan.num_gpus == 8  # DCP reuses the TP ranks


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_vllm_refusals_are_refused_alike(name):
    s = REFUSED[name]
    with pytest.raises(InputError) as err:
        plan_reference(s["model"], _inputs(s))
    # vLLM's own words are in kvcalc's message
    assert s["refused_for"] in s["error"]
    assert s["refused_for"] in err.value.message
    assert err.value.code == "invalid-parallelism"


def test_plan_from_the_gpu_carries_the_split_weights():
    # no --kv-cache-memory: the budget subtracts DP 8's 93.93 GiB, not 8 full copies
    dp = plan_reference("deepseek-v3", PlanInputs(gpu="H200", data_parallel_size=8,
                                                  enable_expert_parallel=True, max_model_len=32000))  # fmt: skip
    assert dp.weights_bytes == OK["dsv3_dp8_ep"]["weights_bytes_per_rank"]
    assert dp.verdict == "ok"
    used = dp.memory.weights_bytes + dp.memory.activation_bytes + dp.memory.non_torch_bytes
    assert dp.available_kv_bytes == dp.memory.budget_bytes - used - dp.memory.cudagraph_bytes


def test_num_gpus_against_the_parallelism():
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H200", data_parallel_size=8, num_gpus=4)
    assert err.value.code == "invalid-parallelism"
    assert "DP 8 × PP 1 × TP 1 = 8 GPUs" in err.value.message
    # without -dp, GPUs beyond TP × PP are full replicas, and an odd one is said, not dropped
    plan = plan_reference("qwen3-8b", PlanInputs(gpu="H100", tensor_parallel_size=2, num_gpus=3))
    assert plan.data_parallel_replicas == 1 and plan.idle_gpus == 1
    assert any("1 GPU(s) idle" in n for n in plan.notes)
    plan = plan_reference("qwen3-8b", PlanInputs(gpu="H100", tensor_parallel_size=2, num_gpus=4))
    assert plan.data_parallel_replicas == 2 and plan.idle_gpus == 0
    assert any("2 independent full replicas" in n for n in plan.notes)
    assert plan.total_max_concurrency == pytest.approx(2 * plan.max_concurrency)


def test_expert_parallel_on_a_dense_model_is_refused():
    # vLLM 0.33.0 config/model.py ModelConfig._verify_with_expert_parallelism
    with pytest.raises(InputError) as err:
        plan_reference("llama-3.1-8b", PlanInputs(gpu="H100", tensor_parallel_size=2,
                                                  enable_expert_parallel=True))  # fmt: skip
    assert "Number of experts in the model must be greater than 0" in err.value.message


def test_other_engines_refuse_vllm_parallelism():
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H100", engine="llamacpp", decode_context_parallel_size=2)
    assert err.value.code == "unsupported-parallelism"


def test_serve_command_reads_the_parallel_flags():
    from kvcalc.planning.servecmd import parse_serve_command

    cmd = parse_serve_command(
        "vllm serve deepseek-ai/DeepSeek-V3 -dp 8 --enable-expert-parallel --enable-eplb "
        "--eplb-config '{\"num_redundant_experts\": 32}' -dcp 1 -pcp 1"
    )
    assert cmd.values == {"data_parallel_size": 8, "enable_expert_parallel": True,
                          "enable_eplb": True, "num_redundant_experts": 32,
                          "decode_context_parallel_size": 1, "prefill_context_parallel_size": 1}  # fmt: skip
    dotted = parse_serve_command(
        "vllm serve m --data-parallel-size=2 --no-enable-expert-parallel "
        "--eplb-config.num_redundant_experts 16 --decode_context_parallel_size 2"
    )
    assert dotted.values == {"data_parallel_size": 2, "enable_expert_parallel": False,
                             "num_redundant_experts": 16, "decode_context_parallel_size": 2}  # fmt: skip


def test_redundant_experts_add_whole_experts_per_rank():
    s = OK["q30_dp4_ep_eplb16"]
    plain = plan_reference("qwen3-30b-a3b", _inputs(OK["q30_dp4_ep"]))
    eplb = plan_reference("qwen3-30b-a3b", _inputs(s))
    # (128 + 16) / 4 = 36 experts per rank instead of 32: 4 more experts in each of 48 layers, each
    # gate_up 2 × 768 × 2,048 + down 2,048 × 768 bf16 values = 9,437,184 B, plus 16 more int32
    # expert_map entries per layer
    assert eplb.weights_bytes - plain.weights_bytes == 48 * (4 * 9_437_184 + 16 * 4)


def _exact(est_total: int, est_experts: int, *, experts_factor: int):
    from kvcalc.sources.safetensors_meta import SafetensorsWeights

    rest = est_total - est_experts
    experts = est_experts * experts_factor
    return SafetensorsWeights(total_bytes=rest + experts, num_parameters=1, by_dtype={},
                              experts_bytes=experts, non_expert_bytes=rest, num_tensors=1,
                              files=("model.safetensors",), source="safetensors metadata (local)")  # fmt: skip


@pytest.mark.parametrize("ep", [False, True])
def test_exact_checkpoint_bytes_split_experts_over_dp(ep):
    """The safetensors path scales the experts by the file's expert bytes and the rest by the
    rest: a checkpoint whose experts are twice the estimate's adds one rank's expert share."""
    from kvcalc.estimate.weights import weight_bytes
    from kvcalc.planning.api import resolve_model_cached
    from kvcalc.planning.core import plan

    model = resolve_model_cached("deepseek-v3").shape
    est = weight_bytes(model)
    inputs = PlanInputs(gpu="H200", data_parallel_size=8, enable_expert_parallel=ep,
                        max_model_len=32000, kv_cache_memory_bytes=28 << 30)  # fmt: skip
    same = plan(model, inputs, exact_weights=_exact(est.weights_bytes, est.experts_bytes,
                                                    experts_factor=1))  # fmt: skip
    double = plan(model, inputs, exact_weights=_exact(est.weights_bytes, est.experts_bytes,
                                                      experts_factor=2))  # fmt: skip
    assert same.weights_bytes == plan(model, inputs).weights_bytes  # the file as estimated
    # one rank's experts: 256 / 8 = 32 experts × 58 layers (or each expert's eighth), each expert
    # gate_up 4,096 × 7,168 + down 7,168 × 2,048 fp8 (44,040,192 B) and its 128 × 128 fp32 block
    # scales (32 × 56 + 56 × 16 = 2,688 scales, 10,752 B): 32 × 58 × 44,050,944 B; the int32
    # expert_map of EP is in no checkpoint and is not scaled
    assert double.weights_bytes - same.weights_bytes == 32 * 58 * 44_050_944  # 81,758,552,064


def test_deployment_file_keys_and_command():
    from kvcalc.deploy.spec import parse_document
    from kvcalc.deploy.yamlread import read_yaml

    text = (
        "deployments:\n"
        "  - model: deepseek-v3\n    gpu: H200\n    num_gpus: 8\n    data_parallel_size: 8\n"
        "    enable_expert_parallel: true\n    max_model_len: 32000\n"
        "  - gpu: H200\n"
        "    command: vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -dcp 8 --max-model-len 32000\n"
    )
    root, problems = read_yaml(text)
    assert problems == []
    deployments, problems = parse_document(root, file="d.yaml", base_dir=".")
    assert problems == []
    keys, command = (d.inputs for d in deployments)
    assert (keys.data_parallel_size, keys.enable_expert_parallel, keys.num_gpus) == (8, True, 8)
    assert (command.tensor_parallel_size, command.decode_context_parallel_size) == (8, 8)


def test_older_releases_refuse_the_parallel_settings():
    with pytest.raises(InputError) as err:
        plan_reference("deepseek-v3", PlanInputs(gpu="H200", data_parallel_size=8,
                                                 engine_version="0.21"))  # fmt: skip
    assert err.value.code == "unsupported-parallelism"
    assert "--data-parallel-size: modelled for vLLM 0.33 only" in err.value.message


def test_all2all_backends_other_than_the_default_are_refused():
    from kvcalc.planning.servecmd import parse_serve_command

    ok = PlanInputs(gpu="H200", data_parallel_size=8, enable_expert_parallel=True,
                    all2all_backend="allgather_reducescatter")  # fmt: skip
    assert ok.all2all_backend == "allgather_reducescatter"
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H200", data_parallel_size=8, enable_expert_parallel=True,
                   all2all_backend="deepep_low_latency")  # fmt: skip
    assert err.value.code == "unsupported-parallelism"
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H200", all2all_backend="deepep")
    assert err.value.code == "invalid-input"
    cmd = parse_serve_command("vllm serve m -dp 8 -ep --all2all-backend deepep_high_throughput")
    assert cmd.values["all2all_backend"] == "deepep_high_throughput"


def test_speculative_decoding_with_dp_on_a_moe_model_plans_the_recorded_methods():
    # MTP, EAGLE-3, draft-model, n-gram and suffix drafts are planned
    # (tests/test_vllm_speculative_parallel.py: equal to vLLM's build); EAGLE (v1) on a MoE target
    # under DP/EP is not recorded: refused
    for spec in ({"method": "mtp", "num_speculative_tokens": 1},
                 {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
                 {"method": "suffix", "num_speculative_tokens": 3}):  # fmt: skip
        plan_reference("deepseek-v3", PlanInputs(
            gpu="H200", data_parallel_size=8, enable_expert_parallel=True, max_model_len=32000,
            speculative_config=spec))  # fmt: skip
    recorded = Path(__file__).parent / "fixtures/vllm_0_33/speculative_parallel.json"
    head = json.loads(recorded.read_text())["scenarios"]["gptoss20_dp2_ep_eagle3_k3"]
    folder = config_folder(head["draft_config_json"], "kvcalc-eagle-")
    with pytest.raises(InputError) as err:
        plan_reference("deepseek-v3", PlanInputs(
            gpu="H200", data_parallel_size=8, enable_expert_parallel=True, max_model_len=32000,
            speculative_config={"method": "eagle", "model": folder, "num_speculative_tokens": 3}))  # fmt: skip
    assert err.value.code == "unsupported-parallelism"
