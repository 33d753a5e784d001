"""kvcalc's weights per rank equal vLLM 0.33.0's own meta build for the families counted since
December 2026 (``fixtures/vllm_0_33/family_weights_2026_12.json``, recorded with the reference
harness's ``deploy_probe.py``: every parameter and buffer of one TP rank, numel × element size).
Bamba is not recorded: vLLM 0.33 serves it through its Transformers backend no more (it refuses
the Mamba2 layers: ``hybrid_families.json``), so its count is checked against transformers only.
For the Mamba2 models (Zamba2) a record's ``conv_view_bytes`` are the probe's count of
``mamba_mixer2.py``'s ``conv_weights`` buffers, views of ``conv1d.weight`` that hold no memory of
their own (read from the probe's per-tensor listing): kvcalc equals the rest.
OLMoE's defaults are recorded too: vLLM's ``olmoe.py`` keeps its q/k norms over all heads whole on
every rank, as ``olmo_hybrid.py`` does.
Each record names the fixture file that holds its config (``config_from``), or the fixture carries
the config itself (``configs``). Hand-computed layers of the unusual tensors are in
``tests/test_weights_2026.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.estimate.tensors import inventory
from kvcalc.estimate.weights import weight_bytes
from kvcalc.hfconfig import parse_config

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_0_33"
DATA = json.loads((FIXTURES / "family_weights_2026_12.json").read_text())


def _config(rec: dict) -> dict:
    if "config_from" in rec:
        return json.loads((FIXTURES / rec["config_from"]).read_text())["models"][rec["model"]][
            "config"
        ]
    return DATA["configs"][rec["model"]]


@pytest.mark.parametrize(
    "rec", DATA["records"], ids=lambda r: f"{r['model']}-tp{r['tensor_parallel_size']}"
)
def test_weights_per_rank_equal_vllms_meta_build(rec):
    model = parse_config(_config(rec), name=rec["model"])
    w = weight_bytes(model, tensor_parallel_size=rec["tensor_parallel_size"])
    # less the Mamba2 conv_weights views of conv1d.weight the probe counts again
    want = rec["target_param_bytes_per_rank"] - rec.get("conv_view_bytes", 0)
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == want


def test_every_family_is_recorded_at_tp_1_and_2():
    types = {_config(r)["model_type"] for r in DATA["records"]}
    assert {"mimo_v2_flash", "gemma3n_text", "kimi_linear", "lfm2_moe", "longcat_flash",
            "step3p5", "zamba2", "olmo_hybrid", "hy_v3", "axk1", "gemma4_text",
            "muse_glimmer_text", "laguna"} <= types  # fmt: skip
    got = {(r["model"], r["tensor_parallel_size"]) for r in DATA["records"]}
    assert {(m, tp) for m, _ in got for tp in (1, 2)} <= got


def test_mimo_v2_flash_by_dtype_at_tp_1():
    # fp32: 47 MoE layers' routers 256 × 4,096 × 4 B = 197,132,288, their e_score_correction_bias
    # 47 × 256 × 4 B = 48,128 and 48 layers' four attention scales 48 × 16 B = 768
    rec = next(r for r in DATA["records"] if r["model"] == "XiaomiMiMo--MiMo-V2-Flash.json")
    assert rec["tensor_parallel_size"] == 1
    assert rec["target_by_dtype"]["float32"] == 197_132_288 + 48_128 + 768 == 197_181_184


def _record(name: str, tp: int) -> dict:
    return next(r for r in DATA["records"] if (r["model"], r["tensor_parallel_size"]) == (name, tp))


def test_kimi_linear_experts_padded_at_tp_8():
    # KimiMoE: 1,024 // 8 = 128 < min_moe_intermediate_per_partition 256, so each rank holds 256
    # of each expert's width: 26 MoE layers × 256 experts × 3 × (256 − 128) × 2,304 × 2 B =
    # 11,777,605,632 B of padding (the TP 8 record is half the TP 2 one, not a quarter)
    name = "moonshotai--Kimi-Linear-48B-A3B-Instruct.json"
    w = weight_bytes(parse_config(_config(_record(name, 8)), name=name), tensor_parallel_size=8)
    assert w.layout_padding_bytes_per_gpu == 26 * 256 * 3 * 128 * 2_304 * 2 == 11_777_605_632
    assert _record(name, 8)["target_param_bytes_per_rank"] == 24_122_537_932


def test_longcat_flash_ngram_tables():
    # LongcatFlashNgramForCausalLM, ngram_vocab_size_ratio 4, emb_split_num 4, emb_neighbor_num 3:
    # 4 × 2 = 8 embedders of 4 × 131,072 + 2i + 1 rows (4,194,368 in all) × 6,144 / 8 = 768, and
    # the stacked projection 8 × 768 × 6,144 (bf16, beside the model's 6 decoder layers); int32
    # buffers ne_weights 2 × 4 × 3, ne_mods 2 × 4 and exclusive_sizes 9: 41 × 4 B = 164 B
    rec = _record("synthetic--longcat-flash-ngram-6-layers-vllm-keys.json", 1)
    assert rec["target_by_dtype"]["int32"] == 4 * (24 + 8 + 9) == 164
    w = parse_config(_config(rec), name=rec["model"]).weights
    assert (w.ngram.rows, w.ngram.width, w.ngram.embedders) == (4_194_368, 768, 8)


@pytest.mark.torch
@pytest.mark.parametrize(
    "name",
    ["synthetic--step3p5-flash-shape.json", "synthetic--step3p5-sliding-36-heads-4-kv-16k.json"],
)
def test_step3p5_count_equals_transformers_step3p7_text_model(name):
    # transformers has no Step3p5ForCausalLM; vLLM reads step3p5 through Step3p7TextConfig, whose
    # text model (plus the untied lm_head, vocab × hidden) builds the same parameters
    torch = pytest.importorskip("torch")
    step3p7 = pytest.importorskip("transformers.models.step3p7.modeling_step3p7")
    from kvcalc.estimate.weights import count_parameters

    raw = {
        k: v
        for k, v in _config(_record(name, 1)).items()
        if k not in ("model_type", "architectures")
    }
    config = step3p7.Step3p7TextConfig(**raw)
    with torch.device("meta"):
        model = step3p7.Step3p7TextModel(config)
    want = sum(p.numel() for p in model.parameters()) + config.vocab_size * config.hidden_size
    assert (
        count_parameters(parse_config(_config(_record(name, 1)), name=name).weights).total == want
    )


def test_zamba2_one_mamba_group_replicated_at_tp_2():
    # MambaMixer2 at TP 2 replicates the one group (extra_groups_for_head_shards): each rank's
    # in_proj and conv hold 2 × 64 group rows instead of 64: 36 layers × 64 × (2,048 + 4 + 1) ×
    # 2 B = 9,460,224 B beside the even split; the probe also counts the conv views, 36 × (2,048 +
    # 128) × 4 × 2 B = 626,688 B
    name = "synthetic--zamba2-2-mem-blocks-36-layers-32k.json"
    w = weight_bytes(parse_config(_config(_record(name, 2)), name=name), tensor_parallel_size=2)
    assert w.layout_padding_bytes_per_gpu == 36 * 64 * (2_048 + 4 + 1) * 2 == 9_460_224
    assert _record(name, 2)["conv_view_bytes"] == 36 * 2_176 * 4 * 2 == 626_688


def test_olmo_hybrid_qk_norms_whole_on_every_rank():
    # olmo_hybrid.py: q_norm RMSNorm(hidden_size), k_norm RMSNorm(KV heads × head_dim), not split:
    # at TP 2 each rank holds 4 attention layers × (4,096 + 1,024) × 2 B = 40,960 B of them
    # (a TP split would hold half); and A_log in the model dtype (no fp32 bytes but the scales:
    # 4 attention layers × 16 B)
    name = "synthetic--olmo-hybrid-32-heads-8-kv-gdn-16-32.json"
    w = parse_config(_config(_record(name, 2)), name=name).weights
    norms = [t for t in inventory(w) if t.name.endswith(("self_attn.q_norm", "self_attn.k_norm"))]
    assert {t.split for t in norms} == {"replicated"}
    assert sum(t.numel for t in norms) * 2 == 4 * (4_096 + 1_024) * 2 == 40_960
    assert _record(name, 2)["target_by_dtype"]["float32"] == 4 * 16


def test_gemma4_v_slot_second_rope_cache_and_scalars():
    # Gemma 4 (26B-A4B's shape) as vLLM builds it beside transformers' parameters: each of the 5
    # k_eq_v global layers' qkv_proj keeps a V slot, 2 × 512 × 2,816 = 2,883,584 values loaded
    # with K; the global layers' own RoPE cache 32,768 × 512 beside the sliding one 32,768 × 256;
    # 30 layer_scalar, 30 router root_size and the normalizer, one value each; at TP 1 every
    # value but the attention scales is bf16: 2 B × (25,233,141,760 + 5 × 2,883,584 + 32,768 ×
    # (256 + 512) + 61) = 50,545,451,130 B
    rec = _record("synthetic--gemma-4-moe-26b-a4b-shape.json", 1)
    w = parse_config(_config(rec), name=rec["model"]).weights
    slots = [t for t in inventory(w) if t.engine_only]
    assert len(slots) == 5 and {t.numel for t in slots} == {2 * 512 * 2_816}
    assert (w.rope_cache_positions, w.rotary_dim, w.extra_rope_values) == (
        32_768,
        256,
        32_768 * 512,
    )
    params = 25_233_141_760
    assert rec["target_by_dtype"]["bfloat16"] == 2 * (
        params + 5 * 2_883_584 + 32_768 * (256 + 512) + 30 + 30 + 1
    )


@pytest.mark.torch
@pytest.mark.parametrize(
    "name",
    ["synthetic--muse-glimmer-text-defaults.json",
     "synthetic--muse-glimmer-text-52-heads-4-kv-window-4096.json"],
)  # fmt: skip
def test_muse_glimmer_count_equals_transformers_text_model(name):
    # transformers builds MuseGlimmer's text model as MuseGlimmerTextModel only (no causal-LM
    # class): its parameters plus the untied lm_head, vocab × hidden
    torch = pytest.importorskip("torch")
    mg = pytest.importorskip("transformers.models.muse_glimmer.modeling_muse_glimmer")
    from kvcalc.estimate.weights import count_parameters

    raw = {
        k: v
        for k, v in _config(_record(name, 1)).items()
        if k not in ("model_type", "architectures")
    }
    config = mg.MuseGlimmerTextConfig(**raw)
    with torch.device("meta"):
        model = mg.MuseGlimmerTextModel(config)
    want = sum(p.numel() for p in model.parameters()) + config.vocab_size * config.hidden_size
    assert (
        count_parameters(parse_config(_config(_record(name, 1)), name=name).weights).total == want
    )
