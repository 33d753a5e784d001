"""Speculative decoding: kvcalc equals vLLM 0.33.0's own sizing of the draft.

``fixtures/vllm_0_33/speculative.json`` was recorded with ``deploy_probe.py`` (the harness's
scenario plus the drafter built on the meta device as vLLM's model runner builds it; its provenance
is in the file). Blocks, tokens and concurrency must be equal, the draft layers those vLLM added,
and the draft's weights vLLM's parameter bytes less the rotary cache it shares with the target.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import config_folder

from kvcalc.engines.speculative import SpecMethod
from kvcalc.engines.vllm.speculative import read_speculative_config
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference, resolve_model_cached
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "speculative.json"
CONFIGS = Path(__file__).parent.parent / "model_configs"
DATA = json.loads(FIXTURE.read_text())
SCENARIOS = DATA["scenarios"]
GPUS = {"h200": "H200", "h100": "H100-80GB"}


def _draft_dir(row: dict) -> str:
    """A folder holding the scenario's own draft config (a head that is not bundled)."""
    return config_folder(row["draft_config_json"], "kvcalc-draft-")


def _inputs(row: dict, **changes) -> PlanInputs:
    spec = dict(row["speculative_config"])
    if spec.get("model") == "DRAFT_DIR":
        spec["model"] = _draft_dir(row)
    fields = dict(
        gpu=GPUS[row["gpu"]], tensor_parallel_size=row["tp"], max_model_len=row["max_model_len"],
        kv_cache_memory_bytes=int(float(row["kv_gib"]) * GIB),  # the harness's int(GiB * 2**30)
        speculative_config=json.dumps(spec),
        # vLLM 0.33 ignores --mamba-cache-mode: prefix caching off is what sets mode none
        engine_options=tuple((k, v) for k, v in row.get("engine_options", {}).items()
                             if k != "mamba_cache_mode"),
        enable_prefix_caching=row.get("recorded_engine_args", {}).get("enable_prefix_caching"),
    )  # fmt: skip
    fields.update(changes)
    return PlanInputs(**fields)


def _plan(name: str, **changes):
    row = SCENARIOS[name]
    return plan_reference(row["model"], _inputs(row, **changes))


def test_every_bundled_mtp_family_is_recorded():
    # the bundled configs whose checkpoints ship MTP layers: DeepSeek-V3 (num_nextn_predict_layers 1),
    # GLM-5 (1), Qwen3.5 (mtp_num_hidden_layers 1), Qwen3-Next (no key: vLLM builds 1 layer);
    # Kimi-K2 (num_nextn_predict_layers 0) has none, and vLLM builds none (refused below)
    recorded = {resolve_model_cached(r["model"]).shape.model_type for r in SCENARIOS.values()}
    assert {"deepseek_v3", "glm_moe_dsa", "qwen3_next", "qwen3_5_moe_text"} <= recorded
    assert all(r["config"].startswith("model_configs/") for r in SCENARIOS.values())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kv_cache_matches_vllm(name):
    row, vllm = SCENARIOS[name], SCENARIOS[name]["vllm"]
    p = _plan(name)
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
        vllm["block_size"], vllm["num_blocks"], vllm["gpu_kv_cache_size_tokens"],
    )  # fmt: skip
    assert abs(p.max_concurrency - vllm["max_concurrency"]) < 1e-4
    if name != "glm5_mtp3":  # GLM-5's bf16 weights (179 GiB per GPU at TP 8) do not load on an H200
        assert p.log_lines[-1] == vllm["capacity_log_line"]
    # the draft's transformer layers: vLLM names one cache layer per attention (GLM-5: MLA + indexer)
    drafted = {n.split(".self_attn")[0] for n in vllm["probe"]["draft_attention_layers"]}
    assert p.speculative.draft_layers == len(drafted)
    assert sum(g.num_layers - g.padding_layers for g in p.groups) == (
        vllm["num_layers_with_kv"] if name != "glm5_mtp3" else vllm["num_layers_with_kv"] // 2
    )  # GLM-5: one kvcalc layer holds vLLM's two caches (MLA latent + indexer keys)
    assert (
        p.speculative.num_speculative_tokens == row["speculative_config"]["num_speculative_tokens"]
    )
    assert p.speculative.lookahead_tokens == p.speculative.num_speculative_tokens


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_draft_weights_match_vllm(name):
    row, probe = SCENARIOS[name], SCENARIOS[name]["vllm"]["probe"]
    p = _plan(name)
    # the draft's rotary cache is the target's own module (get_rope's cache): vLLM allocates it once
    expected = (
        probe[row["draft_weights_from"]] - row["shared_rope_bytes"]
        + row["own_weights_the_probe_skips_bytes"] - row["buffers_not_in_inventory_bytes"]
    )  # fmt: skip
    assert p.speculative.draft_weights_bytes == expected
    assert row["buffers_not_in_inventory_bytes"] < 2048


def test_eagle3_head_joins_the_targets_group():
    # the head's one layer is 8 KV heads × 128 like the target's: one group of 33 layers, 33 ×
    # 65,536 B = 2,162,688 B a block; 20 GiB // that = 9,929 blocks; 2,048 a request: 4.85x
    p = _plan("l8_eagle3_k3")
    assert [(g.num_layers, g.page_bytes) for g in p.groups] == [(33, 65_536)]
    assert p.num_blocks == (20 << 30) // (33 * 65_536) == 9_929


def test_draft_model_makes_a_uniform_type_group_of_mixed_pages():
    # Llama-3.2-1B's 16 layers of 8 × 64 (32,768 B a page) beside the target's 32 of 65,536 B:
    # one UniformTypeKVCacheSpecs group, 32 × 65,536 + 16 × 32,768 = 2,621,440 B a block;
    # 20 GiB // that = 8,192 blocks, 4.00x
    p = _plan("l8_draft1b_k4")
    assert [(g.uniform_type, g.num_layers, g.page_bytes) for g in p.groups] == [
        (True, 48, 2_621_440)
    ]
    assert p.num_blocks == 8_192


def test_gpt_oss_eagle3_pads_the_sliding_layers_to_the_full_group():
    # 12 sliding + 12 full + the head's full layer = 12 + 13: 13 < 1.5 × 12, so the group size is
    # the largest, 13, and the sliding group gets a padding layer (vLLM's "gpt-oss-20b + eagle" case)
    p = _plan("gptoss20_eagle3_k3")
    assert [(g.kind.value, g.num_layers, g.padding_layers) for g in p.groups] == [
        ("sliding", 13, 1), ("full", 13, 0)]  # fmt: skip
    assert p.log_lines[0] == "Add 1 padding layers, may waste at most 8.33% KV cache memory"


def test_draft_kv_dtype_overrides_the_targets():
    # speculative_config.kv_cache_dtype fp8: the head's page is 16 × 8 × 128 × 2 × 1 B = 32,768 B
    # beside the target's 65,536 B: one UniformType group of 32 × 65,536 + 32,768 = 2,129,920 B
    p = _plan("l8_eagle3_k3_fp8_draft")
    assert [(g.uniform_type, g.page_bytes) for g in p.groups] == [(True, 2_129_920)]
    assert p.speculative.draft_kv_bytes_per_token == 2_048


def test_recurrent_state_holds_the_speculative_tokens():
    # Gated DeltaNet conv state (k - 1 + 2) × 8,192 / 4 channels instead of (k - 1) rows, so the
    # mamba page grows and without prefix caching the block is 288 tokens (272 would hold it
    # without speculation); 1 + k = 3 state blocks a request
    p = _plan("q3next_mtp2_no_prefix_caching")
    assert p.block_size == 288
    assert {g.blocks_per_request for g in p.groups if g.kind.value == "recurrent"} == {3}


def test_deepseek_v3_mtp_by_hand():
    # 61 MLA layers + 1 MTP layer, each (512 + 64) × 2 B = 1,152 B per token, 16 per block:
    # 62 × 18,432 B = 1,142,784 B per block; 42.91 GiB = 46,073,849,364 B // 1,142,784 = 40,317
    # blocks; 32,000 tokens = 2,000 blocks a request: 40,317 / 2,000 = 20.16x (20.49x without)
    p = _plan("dsv3_mtp1")
    assert p.num_blocks == 46_073_849_364 // (62 * 18_432) == 40_317
    assert p.kv_bytes_per_token == 62 * 1_152
    assert p.speculative.draft_kv_bytes_per_token == 1_152
    plain = _plan("dsv3_mtp1", speculative_config=None)
    assert (plain.num_blocks, round(plain.max_concurrency, 2)) == (40_978, 20.49)
    assert plain.speculative is None


def test_qwen3_next_mtp_enlarges_every_group_and_holds_2_more_state_blocks():
    # 12 full + 1 MTP layer = 13 full, 36 Gated DeltaNet: the group size is 13 (36 ≥ 1.5 × 13), so
    # 3 mamba groups of 12 padded to 13; align mode holds 2 + k + 1 checkpoint = 5 state blocks
    # (3 without speculation): 103 + 3 × 5 = 118 blocks a request, 5,041 / 118 = 42.72x
    p = _plan("q3next_mtp2")
    recurrent = [g for g in p.groups if g.kind.value == "recurrent"]
    assert [(g.num_layers, g.blocks_per_request) for g in recurrent] == [(13, 5)] * 3
    assert sum(g.blocks_per_request for g in p.groups) == 103 + 15
    plain = _plan("q3next_mtp2", speculative_config=None)
    assert (plain.num_blocks, round(plain.max_concurrency, 2)) == (5_461, 48.76)


def test_workload_requests_hold_the_lookahead_slots():
    # vLLM allocate_slots: min(computed + new + lookahead, max_model_len); 1,000 + 1,000 tokens and
    # k = 1 → cdiv(2,001, 16) = 126 blocks a request (125 without the draft)
    p = _plan("dsv3_mtp1", prompt_len=1000, output_len=1000)
    assert p.workload_concurrency == pytest.approx(40_317 / 126)
    assert round(p.max_concurrency, 2) == 20.16  # the max_model_len line: no lookahead term


def test_cuda_graphs_are_captured_at_decode_query_length_1_plus_k():
    p = _plan("dsv3_mtp1", kv_cache_memory_bytes=None)
    assert any("decode query length 2" in n for n in p.notes)
    assert any("drafter's own graphs" in n for n in p.notes)


def test_draft_weights_come_out_of_the_kv_budget():
    plain = _plan("dsv3_mtp1", kv_cache_memory_bytes=None, speculative_config=None)
    mtp = _plan("dsv3_mtp1", kv_cache_memory_bytes=None)
    assert mtp.weights_bytes - plain.weights_bytes == mtp.speculative.draft_weights_bytes
    # the budget also follows the graphs captured at a decode query length of 2
    graphs = mtp.memory.cudagraph_bytes - plain.memory.cudagraph_bytes
    activation = mtp.memory.activation_bytes - plain.memory.activation_bytes
    assert plain.available_kv_bytes - mtp.available_kv_bytes == (
        mtp.speculative.draft_weights_bytes + graphs + activation
    )


@pytest.mark.parametrize(
    ("given", "method"),
    [({"method": "deepseek_mtp", "num_speculative_tokens": 1}, SpecMethod.MTP),  # legacy name
     ({"method": "qwen3_next_mtp", "num_speculative_tokens": 1}, SpecMethod.MTP),
     ({"model": "ngram", "num_speculative_tokens": 3}, SpecMethod.NGRAM),
     ({"model": "[ngram]", "num_speculative_tokens": 3}, SpecMethod.NGRAM),
     ({"model": "org/draft", "num_speculative_tokens": 3}, None)],  # draft_model once read
)  # fmt: skip
def test_methods_resolve_as_vllm_resolves_them(given, method):
    assert read_speculative_config(json.dumps(given)).method is method


@pytest.mark.parametrize(
    ("given", "shorthands", "code", "text"),
    [({"metod": "mtp"}, {}, "invalid-speculative-config", "no key 'metod'"),
     ({"method": "mtp", "tensor_parallel_size": 1}, {}, "invalid-speculative-config",
      "Please pass 'draft_tensor_parallel_size' instead"),
     ({"method": "mtp"}, {"spec_method": "mtp"}, "invalid-speculative-config",
      "--spec-method and --speculative-config['method'] are mutually exclusive"),
     ({"num_speculative_tokens": 1}, {"spec_tokens": 2}, "invalid-speculative-config",
      "--spec-tokens and --speculative-config['num_speculative_tokens'] are mutually exclusive"),
     ({"method": "mtp", "num_speculative_tokens": 0}, {}, "invalid-speculative-config", "at least 1"),
     ({"method": "dspark"}, {}, "speculative-not-modelled", "'dspark'"),
     ({"method": "mtp", "parallel_drafting": True}, {}, "speculative-not-modelled", "parallel_drafting"),
     ({"method": "medusa"}, {}, "invalid-speculative-config", "no speculative method 'medusa'"),
     # SpeculativeConfig._maybe_override_draft_max_model_len sets the draft's length to it, and
     # VllmConfig._limit_max_model_len_to_draft then serves that length: not modelled
     ({"model": "org/draft", "num_speculative_tokens": 4, "max_model_len": 4096}, {},
      "speculative-not-modelled", "max_model_len")],
)  # fmt: skip
def test_settings_vllm_refuses_are_refused(given, shorthands, code, text):
    with pytest.raises(InputError) as refused:
        read_speculative_config(json.dumps(given), **shorthands)
    assert refused.value.code == code
    assert text in refused.value.message


def test_shorthands_fill_the_config():
    cfg = read_speculative_config(None, spec_method="mtp", spec_tokens=2)
    assert (cfg.method, cfg.num_speculative_tokens) == (SpecMethod.MTP, 2)
    assert read_speculative_config(None) is None


def test_a_draft_model_shorter_than_max_model_len_is_refused(tmp_path):
    # vllm/config/vllm.py VllmConfig._limit_max_model_len_to_draft (0.33.0): model runner V2, the
    # default, lowers max_model_len to a draft model's own when shorter -- here Llama-3.2-1B's
    # config with max_position_embeddings 8,192 and no rope scaling (its derived length 8,192)
    # under a 32,768 plan. kvcalc does not re-plan at 8,192: refused, naming the length
    config = json.loads((CONFIGS / "meta-llama--Llama-3.2-1B-Instruct.json").read_text())
    config.pop("rope_scaling")
    config["max_position_embeddings"] = 8192
    (tmp_path / "config.json").write_text(json.dumps(config))
    given = json.dumps({"model": str(tmp_path), "num_speculative_tokens": 4})
    with pytest.raises(InputError) as refused:
        plan_reference("meta-llama/Llama-3.1-8B", PlanInputs(
            gpu="H200", max_model_len=32768, kv_cache_memory_bytes=20 * GIB,
            speculative_config=given))  # fmt: skip
    assert refused.value.code == "speculative-not-modelled"
    assert "reduces max_model_len to 8,192" in refused.value.message
    assert "--max-model-len 8192" in (refused.value.hint or "")
    # at 8,192 the draft is as long as max_model_len: planned, the draft's 16 layers beside the
    # target's 32 (one group of 48, as in the recorded l8_draft1b_k4)
    p = plan_reference("meta-llama/Llama-3.1-8B", PlanInputs(
        gpu="H200", max_model_len=8192, kv_cache_memory_bytes=20 * GIB, speculative_config=given))  # fmt: skip
    assert [g.num_layers for g in p.groups] == [48]


@pytest.mark.parametrize(
    ("model", "given", "code", "text"),
    [("deepseek-ai/DeepSeek-V3", {"method": "mtp"}, "invalid-speculative-config",
      "num_speculative_tokens must be provided"),  # the target is used only when k is given
     ("meta-llama/Llama-3.1-8B", {"method": "mtp", "num_speculative_tokens": 1},
      "invalid-speculative-config", "Unsupported speculative method: 'mtp'"),
     ("deepseek-ai/DeepSeek-V3", {"method": "mtp", "num_speculative_tokens": 1,
                                  "draft_tensor_parallel_size": 2}, "invalid-speculative-config",
      "cannot be other value than 1 or target model tensor_parallel_size"),
     ("meta-llama/Llama-3.1-8B", {"method": "eagle3", "num_speculative_tokens": 3},
      "invalid-speculative-config", "without speculative model")],
)  # fmt: skip
def test_drafts_vllm_cannot_build_are_refused(model, given, code, text):
    with pytest.raises(InputError) as refused:
        plan_reference(model, PlanInputs(gpu="H200", tensor_parallel_size=8 if "Kimi" in model or
                                         "DeepSeek" in model else 1, max_model_len=32000,
                                         speculative_config=json.dumps(given)))  # fmt: skip
    assert refused.value.code == code
    assert text in refused.value.message


@pytest.mark.parametrize("name", sorted(DATA["refused"]))
def test_refused_where_vllm_refuses(name):
    # Kimi-K2: model_type kimi_k2, which no hf_config_override maps to an MTP draft
    row = DATA["refused"][name]
    with pytest.raises(InputError) as refused:
        plan_reference(row["model"], _inputs(row))
    assert refused.value.code == "invalid-speculative-config"
    assert row["vllm"]["error"] in refused.value.message


@pytest.mark.parametrize("name", sorted(DATA["no_draft"]))
def test_ngram_matches_vllm(name):
    row, vllm = DATA["no_draft"][name], DATA["no_draft"][name]["vllm"]
    p = plan_reference(row["model"], _inputs(row))
    assert (p.num_blocks, p.kv_cache_tokens) == (
        vllm["num_blocks"],
        vllm["gpu_kv_cache_size_tokens"],
    )
    assert p.log_lines[-1] == vllm["capacity_log_line"]
    assert "draft_param_bytes_per_rank_all" not in vllm["probe"]  # vLLM built no drafter
    assert (p.speculative.draft_layers, p.speculative.draft_weights_bytes) == (0, 0)


def test_ngram_adds_no_draft_kv_but_recurrent_layers_hold_k_more_state_blocks():
    # n-gram: no draft model, no draft KV, no lookahead (num_lookahead_tokens 0); vLLM's
    # MambaSpec.num_speculative_blocks is num_speculative_tokens for every method: 2 + 2 + 1 = 5
    ngram = '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}'
    p = _plan("q3next_mtp2", speculative_config=ngram)
    assert (p.speculative.draft_layers, p.speculative.draft_kv_bytes_per_token) == (0, 0)
    assert (p.speculative.lookahead_tokens, p.speculative.draft_weights_bytes) == (0, 0)
    assert {g.blocks_per_request for g in p.groups if g.kind.value == "recurrent"} == {5}
    dense = _plan("dsv3_mtp1", speculative_config=ngram)
    assert dense.num_blocks == 40_978


def test_suffix_decoding_takes_its_tokens_from_the_tree_depth():
    # vllm/config/speculative.py SpeculativeConfig._validate_suffix_decoding (0.33.0): without
    # num_speculative_tokens, k = suffix_decoding_max_tree_depth (default 24). Qwen3-Next's
    # recurrent groups hold 2 + k + 1 state blocks (as for n-gram above): 2 + 2 + 1 = 5 at depth 2,
    # 2 + 24 + 1 = 27 by default
    deep = _plan("q3next_mtp2", speculative_config='{"method": "suffix"}')
    assert {g.blocks_per_request for g in deep.groups if g.kind.value == "recurrent"} == {27}
    given = '{"method": "suffix", "suffix_decoding_max_tree_depth": 2}'
    p = _plan("q3next_mtp2", speculative_config=given)
    assert {g.blocks_per_request for g in p.groups if g.kind.value == "recurrent"} == {5}
    assert p.speculative.lookahead_tokens == 0


def test_other_engines_refuse_speculative_decoding():
    with pytest.raises(InputError) as refused:
        _plan("dsv3_mtp1", engine="trtllm")
    assert refused.value.code == "speculative-not-modelled"
    with pytest.raises(InputError) as refused:  # SGLang reads its own flags, not vLLM's JSON
        _plan("dsv3_mtp1", engine="sglang")
    assert refused.value.code == "invalid-input"
    assert "--speculative-algorithm" in refused.value.message


def test_serving_command_and_deployment_file_take_it(cli, tmp_path):
    command = ("vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --max-model-len 32000 "
               "--kv-cache-memory-bytes 46073849364 -sc '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'")  # fmt: skip
    r = cli("plan", "--from-command", command, "--gpu", "H200", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["num_blocks"] == 40_317
    spec = tmp_path / "d.yaml"
    spec.write_text(
        "deployments:\n  - model: deepseek-ai/DeepSeek-V3\n    gpu: H200\n    tensor_parallel_size: 8\n"
        "    max_model_len: 32000\n    kv_cache_memory: 42.91GiB\n"
        "    speculative_config: {method: mtp, num_speculative_tokens: 1}\n"
    )
    r = cli("check", str(spec), "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)[0]["num_blocks"] == 40_317


def test_an_eagle3_head_runs_at_the_target_s_tp_whatever_draft_tp_says():
    # recorded: Llama-3.1-8B at TP 2 with the EAGLE-3 head, with and without
    # draft_tensor_parallel_size 1: 19,859 blocks both (the head's 8 KV heads split over 2 ranks:
    # 33 layers × 32,768 B a block; 20 GiB // 1,081,344 = 19,859); at TP 1 the head would take
    # 65,536 B of the block and leave 19,275
    with_dtp, without = _plan("l8_tp2_eagle3_k3_draft_tp1"), _plan("l8_tp2_eagle3_k3")
    assert with_dtp.num_blocks == without.num_blocks == (20 << 30) // (32 * 32_768 + 32_768)
    assert with_dtp.speculative.draft_kv_bytes_per_token == 2_048  # 4 heads × 128 × 2 × 2 B
    assert with_dtp.speculative.draft_weights_bytes == without.speculative.draft_weights_bytes


def test_a_draft_model_at_another_tp_is_refused_as_vllm_refuses_it():
    # vLLM 0.33 v1/spec_decode/draft_model.py, DraftModelProposer._raise_if_draft_tp_mismatch:
    # "Currently, 'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the same. Got 1
    # and 2." — raised when the proposer is made, so the engine does not start
    row = SCENARIOS["l8_draft1b_k4"]
    spec = dict(row["speculative_config"], draft_tensor_parallel_size=1)
    if spec.get("model") == "DRAFT_DIR":
        spec["model"] = _draft_dir(row)
    with pytest.raises(InputError) as caught:
        plan_reference(row["model"], _inputs(row, tensor_parallel_size=2,
                                             speculative_config=json.dumps(spec)))  # fmt: skip
    assert caught.value.code == "invalid-speculative-config"
    assert "must be the same. Got 1 and 2." in caught.value.message
    same = dict(spec, draft_tensor_parallel_size=2)
    plan_reference(row["model"], _inputs(row, tensor_parallel_size=2,
                                         speculative_config=json.dumps(same)))  # fmt: skip
