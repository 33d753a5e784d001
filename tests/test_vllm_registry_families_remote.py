"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of the registry families whose config class
is the checkpoints' remote code (InternLM2, InternLM3, MiniCPM, EXAONE 3, Solar, Orion, DeepSeek V1,
Bailing MoE and its V2, TeleFLM, openPangu Ultra MoE, Sarvam-MLA, K2 Horizon, Param-2 MoE, AliceAI), and of Bailing MoE V3 (transformers' ``BailingHybridConfig``).

``fixtures/vllm_0_33/registry_families_2026_12b.json`` was recorded with the vLLM reference harness
as ``registry_families.json`` was (auto/fp8 × TP 1/8 × 4,096/32,768 tokens × 20 GiB per GPU),
run through ``scripts/vllm_remote_configs.py``: transformers 5.20 and vLLM's config registry have
none of these classes, so a stand-in that stores config.json's keys as attributes (what each
published class does) stands for each; the configs carry every key the model files read. Block
size, blocks, tokens, concurrency, groups and the capacity line must be equal, and every refusal
refused for vLLM's reason class.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_sized, harness_cases, harness_plan, refusal_class

from kvcalc.errors import KvcalcError
from kvcalc.estimate.weights import weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "registry_families_2026_12b.json"
DATA = json.loads(FIXTURE.read_text())
CASES = harness_cases(DATA)

LENGTH, PARALLELISM, CONFIG = "max-model-len", "parallelism", "config"
#: vLLM's error texts (exception type and message, or a bare assert's line) → the class
VLLM_REASONS = {
    "User-specified max_model_len": LENGTH,  # config/model.py _get_and_verify_max_len
    "assert self.total_num_kv_heads % tp_size == 0": PARALLELISM,  # the model file's attention
    "assert self.tp_size % self.total_num_kv_heads == 0": PARALLELISM,  # internlm2.py: replicated
    "assert tp_size % self.total_num_kv_heads == 0": PARALLELISM,  # k2_horizon.py: replicated
    "must be divisible by tensor-parallel world size": PARALLELISM,  # param2moe.py: KV heads
    "must be divisible by tensor parallel size": PARALLELISM,  # config/parallel.py: the heads
    "BailingMoeV3 KDA currently expects no_kda_lora=True": CONFIG,  # bailing_moe_v3.py
    "object has no attribute 'use_bias'": CONFIG,  # bailing_moe_v3.py's MLPs read it
    "AliceAI requires kda_allow_negative_eigenvalues=false": CONFIG,  # models/config.py
    "tp_size must be <= group_norm_size for local rms norm": PARALLELISM,  # bailing_linear_attn.py
}
KVCALC_CODES = {
    "max-model-len-exceeded": LENGTH,
    "invalid-parallelism": PARALLELISM,
    "config-invalid": CONFIG,
}
KINDS = {
    "full_attention": LayerKind.FULL,
    "mla_attention": LayerKind.MLA,
    "mamba": LayerKind.RECURRENT,
}


def vllm_reason(text: str) -> str:
    classes = {c for marker, c in VLLM_REASONS.items() if marker in text}
    assert len(classes) == 1, f"vLLM's refusal maps to no single reason class: {text}"
    return classes.pop()


def _model(name: str):
    return parse_config(DATA["models"][name]["config"], name=name)


def test_every_family_is_recorded():
    types = {m["config"]["model_type"] for m in DATA["models"].values()}
    assert types == {"internlm2", "internlm3", "minicpm", "exaone", "solar", "orion", "deepseek",
                     "bailing_moe", "bailing_moe_v2", "teleflm", "bailing_hybrid", "pangu_ultra_moe",
                     "sarvam_mla", "k2_horizon", "param2moe", "alice_ai"}  # fmt: skip
    assert all(m["source"] for m in DATA["models"].values())


def test_grid_is_complete():
    grid = {(d, t, n) for d in ("auto", "fp8") for t in (1, 8) for n in (4096, 32768)}
    for name, model in DATA["models"].items():
        ids = {(r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"])
               for r in model["scenarios"]}  # fmt: skip
        assert grid <= ids, name


def test_every_refusal_reason_is_classed():
    texts = {r["error"] for _, r in (c.values for c in CASES) if "error" in r}
    assert {vllm_reason(t) for t in texts} == {LENGTH, PARALLELISM, CONFIG}


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if "error" in row:
        got = refusal_class(lambda: harness_plan(DATA, name, row), KVCALC_CODES)
        assert got == vllm_reason(row["error"]), row["error"]
        return
    p = harness_plan(DATA, name, row)
    assert_sized(p, row)
    got = sorted((g.kind.value, g.num_layers - g.padding_layers, g.page_bytes, g.block_size,
                  g.blocks_per_request) for g in p.groups)  # fmt: skip
    want = sorted(
        (KINDS[k].value, n, page, block, blocks) for k, n, page, block, blocks, _ in row["groups"]
    )
    assert got == want
    assert row["log_line"] in p.log_lines


def _row(name: str, dtype: str, tp: int, length: int) -> dict:
    return next(r for r in DATA["models"][name]["scenarios"]
                if (r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"])
                == (dtype, tp, length))  # fmt: skip


#: one recorded config per family
ONE_PER_FAMILY = [
    "synthetic--internlm2-7b-shape.json",
    "synthetic--internlm3-8b-shape.json",
    "synthetic--minicpm-2b-shape.json",
    "synthetic--exaone-3-7.8b-shape.json",
    "synthetic--solar-pro-shape.json",
    "synthetic--orion-14b-shape.json",
    "synthetic--deepseek-moe-16b-shape.json",
    "synthetic--bailing-moe-lite-shape.json",
    "synthetic--bailing-moe-v2-mini-shape.json",
    "synthetic--teleflm-8-kv-mup.json",
    "synthetic--k2-horizon-24-layers-mova-4-kv.json",
    "synthetic--param2moe-24-layers-4-kv.json",
    "synthetic--alice-ai-qwen3-next-shape-alice-keys.json",
]
#: the MLA families (no KV-head count) and Bailing MoE V3 (its config class is transformers')
MLA_FAMILIES = [
    "synthetic--pangu-ultra-moe-61-layers-mla.json",
    "synthetic--sarvam-mla-32-layers.json",
]
ONE_PER_FAMILY_WITH_V3 = [
    *ONE_PER_FAMILY,
    *MLA_FAMILIES,
    "synthetic--bailing-hybrid-vllm-keys.json",
]


@pytest.mark.parametrize("name", ONE_PER_FAMILY)
def test_a_missing_kv_head_count_is_refused_not_defaulted(name):
    # the stand-in has no defaults, and the published remote class's default is not known here
    raw = {k: v for k, v in DATA["models"][name]["config"].items() if k != "num_key_value_heads"}
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name=name)
    assert refused.value.code == "config-missing-key"
    assert "num_key_value_heads" in refused.value.message


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "hf", "trtllm", "lmdeploy"])
@pytest.mark.parametrize("name", ONE_PER_FAMILY_WITH_V3)
def test_the_other_engines_refuse_them(engine, name):
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    with pytest.raises(KvcalcError) as refused:
        get_engine(engine).plan_kv_cache(
            EngineRequest(model=_model(name), max_model_len=4096, available_kv_bytes=20 << 30)
        )
    assert refused.value.code == "unsupported-model"


@pytest.mark.parametrize("name", ONE_PER_FAMILY_WITH_V3)
def test_their_weights_are_not_counted(name):
    with pytest.raises(KvcalcError) as refused:
        weight_bytes(_model(name), tensor_parallel_size=1)
    assert "not counted" in refused.value.message


def test_internlm2_dynamic_rope_doubles_the_length():
    # 32 layers of 8 KV heads × 128 (4,096 / 32): a 16-token page 16 × 8 × 128 × 2 × 2 B = 65,536 B,
    # 20 GiB / (65,536 × 32) = 10,240 blocks; the dynamic RoPE factor 2 over 32,768 positions lets
    # vLLM derive 65,536, so the 32,768-token request is served (recorded)
    name = "synthetic--internlm2-7b-shape.json"
    assert _model(name).max_model_len == 32_768 * 2
    row = _row(name, "auto", 1, 32768)
    assert row["num_blocks"] == 20 * 2**30 // (65_536 * 32) == 10_240


def test_minicpm_heads_are_hidden_over_heads_wide_whatever_head_dim_says():
    # head_dim 128 in config.json; minicpm.py: 2,304 / 36 = 64 wide, 2 KV heads: a page of
    # 16 × 2 × 64 × 2 × 2 B = 8,192 B, 40 layers: 20 GiB / (8,192 × 40) = 65,536 blocks (recorded)
    name = "synthetic--minicpm-moe-2-kv-head-dim-128-unread.json"
    layer = _model(name).layers[0]
    assert (layer.kv_heads, layer.k_dim) == (2, 64)
    assert _row(name, "auto", 1, 4096)["num_blocks"] == 20 * 2**30 // (8_192 * 40) == 65_536


def test_deepseek_v1_is_multi_head_not_mla():
    # model_type deepseek takes DeepseekAttention: 16 KV heads of 2,048 / 16 = 128, a page of
    # 16 × 16 × 128 × 2 × 2 B = 131,072 B per layer (recorded); 20 GiB / (131,072 × 28) = 5,851
    name = "synthetic--deepseek-moe-16b-shape.json"
    model = _model(name)
    assert {type(x).__name__ for x in model.layers} == {"FullAttention"}
    assert model.layers[0].bytes_per_token == 16 * 128 * 2 * 2 == 8_192
    row = _row(name, "auto", 1, 4096)
    assert row["groups"][0][2] == 131_072 and row["num_blocks"] == 20 * 2**30 // (131_072 * 28)


def test_exaone_and_solar_read_head_dim():
    # head_dim 64 (not 2,560 / 32 = 80) and 96 (not 4,096 / 32 = 128) as exaone.py / solar.py read it
    assert _model("synthetic--exaone-head-dim-64-4-kv.json").layers[0].k_dim == 64
    solar = _model("synthetic--solar-head-dim-96-8-kv.json")
    assert (solar.layers[0].k_dim, solar.layers[0].kv_heads) == (96, 8)
    # 16 × 8 × 96 × 2 × 2 B = 49,152 B per layer, 48 layers: 20 GiB / (49,152 × 48) = 9,102
    row = _row("synthetic--solar-head-dim-96-8-kv.json", "auto", 1, 4096)
    assert row["num_blocks"] == 20 * 2**30 // (49_152 * 48) == 9_102


def test_bailing_moe_needs_head_dim_in_the_config():
    # bailing_moe.py reads config.head_dim as an attribute: null is hidden_size // heads, a
    # missing key is not defaulted
    raw = dict(DATA["models"]["synthetic--bailing-moe-lite-shape.json"]["config"])
    del raw["head_dim"]
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="ling-lite")
    assert refused.value.code == "config-missing-key" and "head_dim" in refused.value.message


def test_bailing_moe_v3_layers_follow_layer_group_size_not_layer_types():
    # 30 layers, layer_group_size 4: layers 3, 7, ..., 27 MLA, and 28, 29 past the last whole group
    # (30 // 4 × 4 = 28) MLA too, as bailing_moe_v3.py's _is_kda_layer has it; transformers'
    # layer_types call 28 and 29 linear. vLLM recorded 9 MLA and 21 KDA layers (3 groups of 7)
    name = "synthetic--bailing-hybrid-30-layers-group-4-16-heads-vllm-keys.json"
    kinds = [x.kind for x in _model(name).layers]
    assert [i for i, k in enumerate(kinds) if k is LayerKind.MLA] == [*range(3, 28, 4), 28, 29]
    assert DATA["models"][name]["config"]["layer_types"][28:] == ["linear_attention"] * 2
    groups = _row(name, "auto", 1, 4096)["groups"]
    assert sorted((g[0], g[1]) for g in groups) == [("mamba", 7)] * 3 + [("mla_attention", 9)]


def test_bailing_moe_v3_refuses_what_vllm_cannot_build():
    # the config class's defaults: no no_kda_lora (ValueError), then no use_bias (AttributeError)
    for name in (
        "synthetic--bailing-hybrid-defaults.json",
        "synthetic--bailing-hybrid-no-kda-lora.json",
    ):
        with pytest.raises(KvcalcError) as refused:
            _model(name)
        assert refused.value.code == "config-invalid"
    raw = dict(DATA["models"]["synthetic--bailing-hybrid-vllm-keys.json"]["config"])
    del raw["moe_shared_expert_intermediate_size"]
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="ling-v3")
    assert "moe_shared_expert_intermediate_size" in refused.value.message


@pytest.mark.parametrize("name", MLA_FAMILIES)
def test_the_mla_families_cache_one_latent_whole_on_every_rank(name):
    # kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576 values of 2 B per token and layer: a 16-token
    # page of 18,432 B (recorded), the same at TP 1 and TP 8; 20 GiB / (18,432 × layers)
    model = _model(name)
    assert {x.kind for x in model.layers} == {LayerKind.MLA}
    assert model.layers[0].bytes_per_token == (512 + 64) * 2
    n = len(model.layers)
    one, eight = _row(name, "auto", 1, 4096), _row(name, "auto", 8, 4096)
    assert one["groups"][0][2] == 16 * 576 * 2 == 18_432
    assert one["num_blocks"] == eight["num_blocks"] == 20 * 2**30 // (18_432 * n)


@pytest.mark.parametrize("name", MLA_FAMILIES)
def test_the_mla_families_refuse_missing_or_unrecorded_mla_keys(name):
    raw = dict(DATA["models"][name]["config"])
    with pytest.raises(KvcalcError) as refused:  # openpangu.py then builds sink or plain attention
        parse_config({k: v for k, v in raw.items() if k != "kv_lora_rank"}, name=name)
    assert refused.value.code == "config-missing-key"
    with pytest.raises(KvcalcError) as refused:  # prefill backends take fixed MLA head shapes
        parse_config(dict(raw, qk_rope_head_dim=32), name=name)
    assert refused.value.code == "config-unverified"


def test_k2_horizon_mova_layers_keep_one_cache():
    # the 23 sparse layers attend through 4 MoVA experts, the dense layer 0 plainly: every layer one
    # cache of 4 KV heads × 128, a page of 16 × 4 × 128 × 2 × 2 B = 32,768 B (recorded), 24 layers:
    # 20 GiB / (32,768 × 24) = 27,306 blocks
    name = "synthetic--k2-horizon-24-layers-mova-4-kv.json"
    assert {(x.kind, x.kv_heads, x.k_dim) for x in _model(name).layers} == {
        (LayerKind.FULL, 4, 128)
    }
    row = _row(name, "auto", 1, 4096)
    assert row["groups"][0][:3] == ["full_attention", 24, 32_768]
    assert row["num_blocks"] == 20 * 2**30 // (32_768 * 24) == 27_306
    raw = dict(DATA["models"][name]["config"], dual_chunk_attention_config={"chunk_size": 8192})
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name=name)
    assert refused.value.code == "config-unverified"


def test_param2moe_never_replicates_kv_heads():
    # 4 KV heads at TP 8: most model files replicate them (one per rank), param2moe.py asserts
    # num_key_value_heads % tp == 0 (recorded: AssertionError); 8 KV heads split one per rank
    name = "synthetic--param2moe-24-layers-4-kv.json"
    assert _model(name).max_tensor_parallel[0] == 4
    assert "error" in _row(name, "auto", 8, 4096)
    # 12 layers of 8 KV heads × 3,072 / 24 = 128 (head_dim null): a TP 8 page of
    # 16 × 1 × 128 × 2 × 2 B = 8,192 B, 20 GiB / (8,192 × 12) = 218,453 blocks (recorded)
    row = _row("synthetic--param2moe-head-dim-null-8-kv.json", "auto", 8, 4096)
    assert row["num_blocks"] == 20 * 2**30 // (8_192 * 12) == 218_453


def test_alice_ai_kda_and_gated_attention_per_layer_types():
    # 12 layers alternating: 6 KDA states (8 heads × 128, conv kernel 4) and 6 caches of 4 KV heads
    # × 128; vLLM pads the pages to one size and raises the attention block to 272 tokens (recorded)
    name = "synthetic--alice-ai-12-layers-alternating-4-kv-alice-keys.json"
    kinds = [x.kind for x in _model(name).layers]
    assert kinds == [LayerKind.RECURRENT, LayerKind.FULL] * 6
    row = _row(name, "auto", 1, 4096)
    assert row["block_size"] == 272 and sorted(g[0] for g in row["groups"]) == [
        "full_attention",
        "mamba",
    ]
    # without the keys vLLM's AliceAIForCausalLMConfig requires: refused (NotImplementedError)
    raw = dict(DATA["models"][name]["config"], kda_allow_negative_eigenvalues=True)
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name=name)
    assert refused.value.code == "config-invalid"


def test_the_remote_code_architectures_not_recorded_say_why():
    from kvcalc.planning.architectures_refused import REFUSED_BY_NAME

    refused = REFUSED_BY_NAME["text-generation"]
    assert "get_nemotron_h_config_for_layer" in refused["NemotronHPuzzleForCausalLM"]
    for name in ("IQuestCoderForCausalLM", "TeleChat2ForCausalLM", "SarvamMoEForCausalLM"):
        assert "model_type" in refused[name]
    # the ones made exact here are refused no more
    for name in ("InternLM2ForCausalLM", "DeepseekForCausalLM", "BailingMoeV2_5ForCausalLM"):
        assert name not in refused


def test_bailing_moe_v2_5_lightning_state_and_group_norm():
    # V2.5 (bailing_moe_linear.py): layer i is lightning linear attention unless (i + 1) % 6 == 0;
    # each keeps one (32, 64, 64) state in bf16: 32 · 64 · 64 · 2 = 262,144 B, which vLLM pads to
    # the MLA group's page of 256 tokens × 576 × 2 B = 294,912 B (recorded)
    name = "synthetic--bailing-hybrid-v2-5-vllm-keys.json"
    layers = _model(name).layers
    assert [i for i, x in enumerate(layers) if x.kind is LayerKind.MLA] == list(range(5, 42, 6))
    assert layers[0].state_bytes == 32 * 64 * 64 * 2 == 262_144
    row = _row(name, "auto", 1, 4096)
    assert {g[2] for g in row["groups"]} == {256 * 576 * 2} and row["block_size"] == 256
    # group_norm_size 1: the group norm cannot be split over 8 ranks (recorded AssertionError)
    assert "error" in _row(name, "auto", 8, 4096)
    raw = {k: v for k, v in DATA["models"][name]["config"].items() if k != "use_bias"}
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name=name)
    assert refused.value.code == "config-invalid" and "use_bias" in refused.value.message
