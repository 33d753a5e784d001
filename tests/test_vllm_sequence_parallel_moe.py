"""Sequence-parallel MoE (expert parallel with TP > 1 and DP > 1): kvcalc equals vLLM 0.33.0.

``fixtures/vllm_0_33/sequence_parallel_moe.json`` was recorded with ``deploy_probe.py`` (the
harness's scenario with the target's parameter and buffer bytes per rank; its provenance is in
the file). Under vLLM's default all-to-all, EP with TP > 1 and DP > 1 is
``ParallelConfig.use_sequence_parallel_moe``: the model files that pass it to an MLP build that MLP
whole on every rank (:mod:`kvcalc.engines.vllm.moe_layout`, a rule per file); the others change
nothing. Each scenario names its model file and what it builds differently. Blocks, tokens and
concurrency must be equal, and the weights per rank vLLM's bytes to the byte (less the Mamba2
``conv_weights`` view the probe counts twice, ``conv_view_bytes``, and the fp8 KV-scale placeholders
vLLM deletes after loading, ``kv_scale_placeholder_bytes``). ``weights_not_equal`` holds recordings
whose weights differ for reasons other than sequence-parallel MoE (each says why): their blocks
are checked.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from helpers import config_folder

from kvcalc.engines.vllm.moe_layout import dense_mlps_whole, shared_experts_whole
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "sequence_parallel_moe.json"
DATA = json.loads(FIXTURE.read_text())
SCENARIOS = DATA["scenarios"]
NOT_EQUAL = DATA["weights_not_equal"]
ALL = SCENARIOS | NOT_EQUAL
GPUS = {"h200": "H200", "h100": "H100-80GB"}


def _inputs(row: dict, **changes) -> PlanInputs:
    fields = dict(
        gpu=GPUS[row["gpu"]], tensor_parallel_size=row["tp"], max_model_len=row["max_model_len"],
        data_parallel_size=row["data_parallel_size"], enable_expert_parallel=row["enable_expert_parallel"],
        kv_cache_memory_bytes=int(float(row["kv_gib"]) * GIB),  # the harness's int(GiB * 2**30)
    )  # fmt: skip
    if "speculative_config" in row:
        fields["speculative_config"] = json.dumps(row["speculative_config"])
    fields.update(changes)
    return PlanInputs(**fields)


@functools.cache
def _model(name: str) -> str:
    """The scenario's model: a bundled name, or a folder holding the config it was recorded with."""
    row = ALL[name]
    if "config_json" not in row:
        return row["model"]
    return config_folder(row["config_json"], "kvcalc-spmoe-")


def _plan(name: str, **changes):
    return plan_reference(_model(name), _inputs(ALL[name], **changes))


def test_the_deployment_shapes_are_recorded():
    assert all(r["vllm"]["status"] == "ok" for r in ALL.values())
    assert all(r["weights_gap"] for r in NOT_EQUAL.values())
    assert {(r["data_parallel_size"], r["tp"], r["enable_expert_parallel"])
            for r in SCENARIOS.values()} == {(2, 2, True), (2, 4, True)}  # fmt: skip
    assert all(
        r["config"].startswith("model_configs/") or r["config"] == "config_json"
        for r in ALL.values()
    )
    # the model files whose modules change (llama4/mllama4, nemotron_h, deepseek_v32,
    # kimi_k25 → deepseek_v2) and some that do not (gpt_oss, qwen3_moe, mixtral, minimax_m2)
    assert {
        "Llama4ForConditionalGeneration", "NemotronHForCausalLM", "GlmMoeDsaForCausalLM",
        "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "GptOssForCausalLM",
        "Qwen3MoeForCausalLM", "MixtralForCausalLM", "MiniMaxM2ForCausalLM",
    } <= {r["vllm"]["architecture"] for r in ALL.values()}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ALL))
def test_kv_cache_matches_vllm(name):
    vllm = ALL[name]["vllm"]
    p = _plan(name)
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
        vllm["block_size"], vllm["num_blocks"], vllm["gpu_kv_cache_size_tokens"],
    )  # fmt: skip
    assert abs(p.max_concurrency - vllm["max_concurrency"]) < 1e-4
    if not name.startswith(
        "glm5"
    ):  # GLM-5's bf16 weights (199 GB a rank at TP 4) do not load on an H200
        assert p.log_lines[-1] == vllm["capacity_log_line"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_weights_per_rank_match_vllm(name):
    row = SCENARIOS[name]
    probe = row["vllm"]["probe"]
    target = (probe["target_param_bytes_per_rank"] - row.get("conv_view_bytes", 0)
              - row.get("kv_scale_placeholder_bytes", 0))  # fmt: skip
    p = _plan(name)
    draft = 0
    if "speculative_config" in row:
        # the draft's rotary cache is the target's own module (get_rope's cache): allocated once
        draft = (
            probe["draft_param_bytes_per_rank_excl_shared_embed_head"] - row["shared_rope_bytes"]
        )
        assert p.speculative.draft_weights_bytes == draft
    assert p.weights_bytes - draft == target


def test_dsa_and_kimi_k25_hold_their_shared_experts_whole():
    # weights_not_equal: kvcalc's pricing of these checkpoints' quantization differs, but the
    # sequence-parallel rule applies to them (deepseek_v32, kimi_k25 → deepseek_v2)
    for name in ("dsv32_dp2_tp4_ep", "kimik25_dp2_tp4_ep"):
        sp, split = _plan(name), _plan(name, enable_expert_parallel=False)
        assert sp.weights_bytes > split.weights_bytes


def test_llama4_scout_shared_expert_whole_by_hand():
    # Llama4MoE.shared_expert, LlamaMLP(disable_tp=is_sequence_parallel): 48 MoE layers of
    # gate/up/down 3 × 8,192 × 5,120 bf16 = 251,658,240 B each; at TP 2 a rank held half
    shared = 48 * 3 * 8192 * 5120 * 2
    sp = _plan("scout_dp2_tp2_ep")
    split = _plan("scout_dp2_tp2_ep", enable_expert_parallel=False)  # TP 2 × DP 2, experts split
    # EP: whole experts (the same bytes) and a 16-entry int32 expert_map per MoE layer
    assert sp.weights_bytes - split.weights_bytes == shared - shared // 2 + 48 * 16 * 4
    # the vision tower's complex64 RoPE cache, one for the tower: (336/14)² + 1 rows × 44
    assert (
        SCENARIOS["scout_dp2_tp2_ep"]["vllm"]["probe"]["target_by_dtype"]["torch.complex64"]
        == 577 * 44 * 8
    )


def test_nemotron_shared_experts_whole_and_conv_view():
    # NemotronHMoE.shared_experts (NemotronHMLP(is_sequence_parallel=)): 23 MoE layers of up/down
    # 2 × 3,712 × 2,688 bf16, whole on each rank; the probe counts mamba_mixer2.py's conv_weights
    # view of conv1d.weight again: 23 × (4,096 + 2 × 8 × 128) / TP × 4 × 2 B
    shared = 23 * 2 * 3712 * 2688 * 2
    for name, tp in (("nano_dp2_tp2_ep", 2), ("nano_dp2_tp4_ep", 4)):
        row = SCENARIOS[name]
        assert row["conv_view_bytes"] == 23 * 6144 // tp * 4 * 2
        sp, split = _plan(name), _plan(name, enable_expert_parallel=False)
        assert sp.weights_bytes - split.weights_bytes == shared - shared // tp + 23 * 128 * 4


def test_dsa_models_hold_dense_layers_whole_too():
    # vllm/models/deepseek_v32 (DeepSeek-V3.2, GLM-5 on CUDA): DeepseekV2MoE's shared expert and,
    # unlike deepseek_v2.py, the first_k_dense_replace layers' DeepseekV2MLP built with
    # is_sequence_parallel, where PP is 1
    archs = ("GlmMoeDsaForCausalLM",)
    sp = dict(tensor_parallel_size=4, data_parallel_size=2, enable_expert_parallel=True)
    assert shared_experts_whole(archs, **sp)
    assert dense_mlps_whole(archs, **sp, pipeline_parallel_size=1)
    assert not dense_mlps_whole(archs, **sp, pipeline_parallel_size=2)
    assert not dense_mlps_whole(("DeepseekV3ForCausalLM",), **sp, pipeline_parallel_size=1)
    assert not shared_experts_whole(archs, **(sp | {"data_parallel_size": 1}))
    assert not shared_experts_whole(("GptOssForCausalLM", "Qwen3MoeForCausalLM"), **sp)


def test_serving_command_plans_scout_dp2_tp2_ep(cli):
    row = SCENARIOS["scout_dp2_tp2_ep"]
    command = ("vllm serve meta-llama/Llama-4-Scout-17B-16E-Instruct -dp 2 -tp 2 "
               "--enable-expert-parallel --max-model-len 32768 "
               f"--kv-cache-memory-bytes {int(20 * GIB)}")  # fmt: skip
    r = cli("plan", "--from-command", command, "--gpu", "H200", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["num_blocks"] == row["vllm"]["num_blocks"]
    assert out["kv_cache_tokens"] == row["vllm"]["gpu_kv_cache_size_tokens"]
    assert out["weights_bytes"] == row["vllm"]["probe"]["target_param_bytes_per_rank"]
