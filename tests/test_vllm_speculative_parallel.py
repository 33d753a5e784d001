"""Speculative decoding on a MoE target under data or expert parallelism: kvcalc equals vLLM 0.33.0.

``fixtures/vllm_0_33/speculative_parallel.json`` was recorded with ``deploy_probe.py`` (the
harness's scenario plus the drafter built on the meta device as vLLM's model runner builds it; its
provenance is in the file). vLLM builds an MTP drafter with the target's own ``VllmConfig``, so the
MTP layer's experts are split as the target's (TP × DP, whole experts with EP) and its KV layer
joins each DP rank's pool as without DP. Blocks, tokens and concurrency must be equal, the target's
weights per rank vLLM's parameter bytes, and the draft's those less the rotary cache it shares.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from helpers import config_folder

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "speculative_parallel.json"
SCENARIOS = json.loads(FIXTURE.read_text())["scenarios"]
#: the settings vLLM refused, with its error
REJECTED = json.loads(FIXTURE.read_text())["rejected"]
ROWS = {**SCENARIOS, **REJECTED}
GPUS = {"h200": "H200", "h100": "H100-80GB"}


@functools.cache
def _draft_dir(name: str) -> str:
    return config_folder(ROWS[name]["draft_config_json"], "kvcalc-spdp-draft-")


def _inputs(row: dict, **changes) -> PlanInputs:
    spec = dict(row["speculative_config"])
    if spec.get("model") == "DRAFT_DIR":
        spec["model"] = _draft_dir(next(k for k, v in ROWS.items() if v is row))
    fields = dict(
        gpu=GPUS[row["gpu"]], tensor_parallel_size=row["tp"], max_model_len=row["max_model_len"],
        data_parallel_size=row["data_parallel_size"], enable_expert_parallel=row["enable_expert_parallel"],
        enable_eplb=row.get("enable_eplb", False), num_redundant_experts=row.get("num_redundant_experts", 0),
        prefill_context_parallel_size=row.get("prefill_context_parallel_size", 1),
        async_scheduling=row.get("async_scheduling"),
        kv_cache_memory_bytes=int(float(row["kv_gib"]) * GIB),  # the harness's int(GiB * 2**30)
        speculative_config=json.dumps(spec),
    )  # fmt: skip
    fields.update(changes)
    return PlanInputs(**fields)


@functools.cache
def _model(name: str) -> str:
    """The scenario's model: a bundled name, or a folder holding the config it was recorded with."""
    row = ROWS[name]
    if "config_json" not in row:
        return row["model"]
    return config_folder(row["config_json"], "kvcalc-spdp-")


def _plan(name: str, **changes):
    return plan_reference(_model(name), _inputs(ROWS[name], **changes))


def test_the_deployment_shapes_are_recorded():
    shapes = {
        (r["data_parallel_size"] > 1, r["enable_expert_parallel"]) for r in SCENARIOS.values()
    }
    assert {(True, True), (False, True), (True, False)} <= shapes
    assert all(
        r["config"].startswith("model_configs/") or r["config"] == "config_json"
        for r in SCENARIOS.values()
    )
    # the MTP families: DeepSeek-V3, GLM-4.5 (glm4_moe), GLM-4.7-Flash (glm4_moe_lite), Qwen3-Next,
    # Qwen3.5 MoE
    assert {r["vllm"]["probe"].get("draft_architecture") for r in SCENARIOS.values()} == {
        "DeepSeekMTPModel", "Glm4MoeMTPModel", "Glm4MoeLiteMTPModel", "Qwen3NextMTP", "Qwen3_5MoeMTP",
        "LlamaForCausalLMEagle3", None,  # gpt-oss-20b's EAGLE-3 head; n-gram builds no draft
        "Qwen3ForCausalLM",  # Qwen3-0.6B as a draft model for Qwen3-30B-A3B
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kv_cache_matches_vllm(name):
    row, vllm = SCENARIOS[name], SCENARIOS[name]["vllm"]
    p = _plan(name)
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
        vllm["block_size"], vllm["num_blocks"], vllm["gpu_kv_cache_size_tokens"],
    )  # fmt: skip
    assert abs(p.max_concurrency - vllm["max_concurrency"]) < 1e-4
    assert p.log_lines[-1] == vllm["capacity_log_line"]
    drafted = {n.split(".self_attn")[0] for n in vllm["probe"].get("draft_attention_layers", [])}
    assert p.speculative.draft_layers == len(drafted)
    # suffix decoding without k takes suffix_decoding_max_tree_depth (24)
    k = (
        row.get("resolved_num_speculative_tokens")
        or row["speculative_config"]["num_speculative_tokens"]
    )
    assert p.speculative.num_speculative_tokens == k


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_weights_per_rank_match_vllm(name):
    row, probe = SCENARIOS[name], SCENARIOS[name]["vllm"]["probe"]
    p = _plan(name)
    # the draft's rotary cache is the target's own module (get_rope's cache): allocated once; an
    # EAGLE-3 head's own lm_head is a module the probe skips by name
    # (a draft model has its own embedding and head: all of its bytes)
    source = row.get("draft_weights_from", "draft_param_bytes_per_rank_excl_shared_embed_head")
    draft = (
        probe.get(source, 0) - row["shared_rope_bytes"] + row.get("own_weights_the_probe_skips_bytes", 0)
    )  # fmt: skip
    assert p.speculative.draft_weights_bytes == draft
    if "target_weights" not in row:  # gpt-oss: the emulation loads mxfp4 unpadded (see the row)
        assert p.weights_bytes - draft == probe["target_param_bytes_per_rank"]


def test_deepseek_v3_dp8_ep_mtp_by_hand():
    # at DP 8 + EP each rank holds 32 of the MTP layer's 256 experts whole (and a 256-entry int32
    # expert_map), as the target's layers: the draft grows by the 28 experts more than at TP 8 + EP
    # less the TP-split attention and shared expert it now holds whole
    dp8 = SCENARIOS["dsv3_dp8_ep_mtp1"]["vllm"]["probe"]
    assert dp8["draft_by_dtype"]["torch.int32"] == 256 * 4
    assert dp8["target_by_dtype"]["torch.int32"] == 58 * 256 * 4
    p = _plan("dsv3_dp8_ep_mtp1")
    # 28 GiB of MLA pages: 576 × 2 B × 62 layers (61 + the MTP layer) per token, 16-token blocks
    assert p.num_blocks == 28 * GIB // (16 * 576 * 2 * 62)


@pytest.mark.parametrize(
    "name", ["dsv3_dp2_tp4_ep_mtp1", "q35_dp2_tp2_ep_mtp1", "q3next_dp2_tp2_ep_mtp2"]
)
def test_sequence_parallel_moe_holds_the_shared_experts_whole(name):
    # TP > 1 × DP > 1 with EP: vLLM's default all-gather/reduce-scatter makes the MoE sequence
    # parallel and the shared expert MLP is built with disable_tp, in the target and the MTP layer
    row = SCENARIOS[name]
    split = _plan(name, enable_expert_parallel=False)
    whole = _plan(name)
    assert whole.speculative.draft_weights_bytes > split.speculative.draft_weights_bytes
    if name == "dsv3_dp2_tp4_ep_mtp1":
        # DeepSeek-V3's shared expert: gate/up 2 × 2,048 × 7,168 + down 7,168 × 2,048 fp8, and
        # fp32 128 × 128 block scales (2 × 16 × 56 + 56 × 16): 44,050,944 B whole, a quarter at TP 4
        shared = 3 * 2048 * 7168 + 4 * (2 * 16 * 56 + 56 * 16)
        probe = row["vllm"]["probe"]
        tp4 = SCENARIOS["dsv3_dp2_tp4_mtp1"]["vllm"]["probe"]
        assert (
            probe["draft_param_bytes_per_rank_excl_shared_embed_head"]
            - tp4["draft_param_bytes_per_rank_excl_shared_embed_head"]
            == shared - shared // 4 + 256 * 4  # and the EP expert_map; experts the same bytes
        )


def test_an_ngram_draft_adds_only_its_lookahead():
    # n-gram under DP 8 + EP: no draft layers, so DeepSeek-V3's 61 MLA layers alone share each
    # rank's 28 GiB: 28 GiB // (16 × 576 × 2 B × 61) = 26,739 blocks (recorded), more than the
    # 26,308 of the MTP draft's 62 layers
    p = _plan("dsv3_dp8_ep_ngram2")
    assert p.num_blocks == 28 * GIB // (16 * 576 * 2 * 61) == 26_739
    assert p.speculative.draft_weights_bytes == 0
    assert SCENARIOS["dsv3_dp8_ep_mtp1"]["vllm"]["num_blocks"] == 26_308


def test_an_eagle3_head_is_whole_on_each_dp_rank():
    # gpt-oss-20b's head (one Llama layer, 2,880 wide) is dense: at TP 1 each DP rank holds all
    # of it, with or without EP (the probe's figure is the same in both records)
    with_ep, without = _plan("gptoss20_dp2_ep_eagle3_k3"), _plan("gptoss20_dp2_eagle3_k3")
    assert with_ep.speculative.draft_weights_bytes == without.speculative.draft_weights_bytes
    probes = [
        SCENARIOS[n]["vllm"]["probe"]
        for n in ("gptoss20_dp2_ep_eagle3_k3", "gptoss20_dp2_eagle3_k3")
    ]
    assert (
        probes[0]["draft_param_bytes_per_rank_all"] == probes[1]["draft_param_bytes_per_rank_all"]
    )


def test_a_draft_model_splits_like_the_targets_attention():
    # Qwen3-0.6B (dense, tied embedding: 1,202,586,048 B whole) beside Qwen3-30B-A3B: whole on each
    # rank at DP 2 + EP (TP 1), halved at TP 2 with or without DP (recorded: 606,601,664 B)
    whole, split = _plan("q3moe_dp2_ep_draft06_k4"), _plan("q3moe_tp2_ep_draft06_k4")
    assert whole.speculative.draft_weights_bytes == 1_202_586_048
    assert split.speculative.draft_weights_bytes == 606_601_664
    assert _plan("q3moe_dp2_tp2_draft06_k4").speculative.draft_weights_bytes == 606_601_664


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_what_vllm_refuses_is_refused(name):
    # gpt-oss's mxfp4 experts refuse EPLB; only MLA attention has PCP; suffix decoding runs on
    # the V1 model runner, which has neither PCP nor async scheduling with it
    with pytest.raises(InputError) as refused:
        _plan(name)
    assert refused.value.code in ("invalid-parallelism", "invalid-speculative-config")
    error = REJECTED[name]["vllm"]["error"]
    if error.startswith("No valid attention backend"):
        assert "no valid attention backend" in refused.value.message
        assert "PCP not supported" in refused.value.message
    else:
        assert error in refused.value.message


def test_unconfirmed_shapes_stay_refused():
    head = {"method": "eagle3", "model": _draft_dir("gptoss20_dp2_ep_eplb8_eagle3_k3"),
            "num_speculative_tokens": 3}  # fmt: skip
    for name, changes, text in (
        ("dsv3_dp8_ep_mtp1", {"enable_eplb": True, "num_redundant_experts": 8,
                              "speculative_config": json.dumps(head)}, "eagle3 draft with EPLB"),
        ("dsv3_tp4_pcp2_mtp1", {"speculative_config": json.dumps(head)},
         "eagle3 draft with prefill context parallelism"),
        ("dsv3_dp8_ep_mtp1", {"speculative_config": json.dumps({**head, "method": "eagle"})},
         "eagle draft"),
    ):  # fmt: skip
        with pytest.raises(InputError) as refused:
            _plan(name, **changes)
        assert refused.value.code == "unsupported-parallelism"
        assert text in refused.value.message


def test_eplb_adds_the_redundant_experts_to_the_mtp_layer():
    # DeepSeek-V3 at DP 8 + EP with 32 redundant experts: each rank holds cdiv(256 + 32, 8) = 36
    # experts of the MTP layer instead of 32; one expert is gate/up 2 × 2,048 × 7,168 + down
    # 7,168 × 2,048 fp8 B and fp32 128 × 128 block scales 4 × (2 × 16 × 56 + 56 × 16) B, and the
    # int32 expert_map covers 288 experts instead of 256
    expert = 3 * 2048 * 7168 + 4 * (2 * 16 * 56 + 56 * 16)
    with_eplb, without = _plan("dsv3_dp8_ep_eplb32_mtp1"), _plan("dsv3_dp8_ep_mtp1")
    grown = with_eplb.speculative.draft_weights_bytes - without.speculative.draft_weights_bytes
    assert grown == 4 * expert + 32 * 4 == 176_203_904
    # the KV cache does not change: the same 62 MLA layers (recorded: 26,308 blocks both)
    assert with_eplb.num_blocks == without.num_blocks == 26_308


def test_suffix_decoding_keeps_one_batch_in_flight():
    # suffix decoding runs on the V1 model runner, which turns async scheduling off: gpt-oss's
    # sliding layers reserve for one 8,192-token batch, cdiv(128 - 1 + 8,192, 16) + 1 = 521
    # blocks, where n-gram (V2 runner, two batches: 16,384 tokens) needs cdiv(16,511, 16) + 1 =
    # 1,033 (both recorded)
    suffix, ngram = SCENARIOS["gptoss20_dp2_ep_suffix8"], SCENARIOS["gptoss20_dp2_ep_ngram3"]
    assert [g["blocks_per_request"] for g in suffix["vllm"]["kv_cache_groups"]] == [521, 2048]
    assert [g["blocks_per_request"] for g in ngram["vllm"]["kv_cache_groups"]] == [1033, 2048]
    p = _plan("gptoss20_dp2_ep_suffix8")
    assert p.kv_cache_tokens == 696_597 and p.speculative.draft_weights_bytes == 0


def test_serving_command_plans_dsv3_dp8_ep_mtp(cli):
    row = SCENARIOS["dsv3_dp8_ep_mtp1"]
    command = ("vllm serve deepseek-ai/DeepSeek-V3 -dp 8 --enable-expert-parallel --max-model-len 32000 "
               f"--kv-cache-memory-bytes {int(28 * GIB)} "
               "--speculative-config '{\"method\":\"mtp\",\"num_speculative_tokens\":1}'")  # fmt: skip
    r = cli("plan", "--from-command", command, "--gpu", "H200", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["num_blocks"] == row["vllm"]["num_blocks"]
    assert out["kv_cache_tokens"] == row["vllm"]["gpu_kv_cache_size_tokens"]
    assert out["speculative"]["method"] == "mtp"
