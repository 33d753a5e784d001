"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of the families added from its registry.

``fixtures/vllm_0_33/registry_families.json`` was recorded with the vLLM reference harness (vLLM's
``create_engine_config``, the model built on the meta device, the CUDA backend selector for an
emulated H100, spec collection, grouping and capacity code) over auto/fp8 × TP 1/8 × 4,096/32,768
tokens × 20 GiB per GPU, for configs of published checkpoints, transformers' config-class defaults
and mutants of them that exercise what vLLM's model file decides over the config (Cohere2's
``sliding_window + 1``, KV heads TP cannot split, a ``head_dim`` vLLM requires). Each model carries
its config and where it came from. Block size, blocks and tokens must be equal, concurrency within
0.005, every group (kind, layers, page, block, blocks per request) equal, the capacity line equal,
and every refusal refused for vLLM's reason: its error text and kvcalc's error code (or the plan's
own refusal) are each mapped to one class. The weights of every config equal transformers' meta
build.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_sized, harness_cases, harness_plan, refusal_class

from kvcalc.errors import KvcalcError
from kvcalc.estimate.weights import count_parameters, weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "registry_families.json"
#: the recurrent families (Mamba, FalconMamba, Mamba2, Zamba2) and Granite's SWA models, recorded apart
RECURRENT = FIXTURE.with_name("registry_families_recurrent.json")
#: the families added in December 2026 (Step-3.5, ...), recorded apart
LATER = FIXTURE.with_name("registry_families_2026_12.json")
#: HY V4 and Qwen4-Exp (text), added on 2026-12-07, recorded apart
LATEST = FIXTURE.with_name("registry_families_2026_12c.json")
#: BLOOM, Apertus and Falcon-RW, recorded through scripts/vllm_meta_readback.py (ALiBi slopes and
#: xIELU's constants computed off the meta device), on 2026-12-08
READBACK = FIXTURE.with_name("registry_families_meta_readback.json")
DATA = json.loads(FIXTURE.read_text())
READBACK_DATA = json.loads(READBACK.read_text())
RECURRENT_DATA = json.loads(RECURRENT.read_text())
LATER_DATA = json.loads(LATER.read_text())
LATEST_DATA = json.loads(LATEST.read_text())
assert not set(LATEST_DATA["models"]) & (set(DATA["models"]) | set(LATER_DATA["models"]))
LATER_DATA["models"].update(LATEST_DATA["models"])
assert not set(DATA["models"]) & set(RECURRENT_DATA["models"])
assert not (set(DATA["models"]) | set(RECURRENT_DATA["models"])) & set(LATER_DATA["models"])
assert not set(READBACK_DATA["models"]) & (set(DATA["models"]) | set(LATER_DATA["models"]))
DATA["models"].update(RECURRENT_DATA["models"])
DATA["models"].update(READBACK_DATA["models"])
DATA["models"].update(LATER_DATA["models"])
CASES = harness_cases(DATA)

#: why an engine refuses a scenario, as a class both sides are mapped to
LENGTH, PARALLELISM, CONFIG, KV_MEMORY = "max-model-len", "parallelism", "config", "kv-memory"
#: no attention backend of vLLM 0.33 serves the shape (its MLA prefill dimensions)
BACKEND = "backend"
#: the attention backend the model is built with has no kernel for the cache dtype
DTYPE = "kv-dtype"
#: vLLM's error texts (exception type and message, or a bare assert's line) → the class
VLLM_REASONS = {
    "User-specified max_model_len": LENGTH,  # config/model.py _get_and_verify_max_len
    "assert self.total_num_kv_heads % tp_size == 0": PARALLELISM,  # the model file's attention
    "assert tp_size % self.total_num_kv_heads == 0": PARALLELISM,  # KV heads fewer than TP
    "must be divisible by tensor parallel size": PARALLELISM,  # config/parallel.py: the heads
    "object has no attribute 'head_dim'": CONFIG,  # glm4_moe.py reads config.head_dim
    "total_num_kv_heads\n  Input should be a valid integer": CONFIG,  # ModelConfig: Nemotron's None
    "object has no attribute 'rope_theta'": CONFIG,  # dbrx.py reads config.attn_config.rope_theta
    "object has no attribute 'original_rope'": CONFIG,  # chatglm.py reads config.original_rope
    "'list' object has no attribute 'strip'": CONFIG,  # step3_text.py splits moe_layers_enum
    "object has no attribute 'score_func'": CONFIG,  # afmoe.py reads config.score_func
    "object has no attribute 'use_moe_router_bias'": CONFIG,  # step3p5.py's MoE layers read it
    "assert self.total_num_heads % tp_size == 0": PARALLELISM,  # the model file's query heads
    "first_k_dense_replace not exist": CONFIG,  # hy_v3.py reads config.first_k_dense_replace
    "Field 'head_dim' expected int, got NoneType": CONFIG,  # a config class's strict validation
    "Dory currently supports tensor_parallel_size=1 only": PARALLELISM,  # dory.py
    "object has no attribute 'mla_scale_q_lora'": CONFIG,  # longcat_flash.py reads it
    "unsupported output_gate_type": CONFIG,  # models/qwen4_exp: Qwen4ExpTextConfig's None
    "No valid MLA prefill backend found": BACKEND,  # platforms/interface.py get_mla_prefill_backend
    "To serve at least one request with the model's max seq len": KV_MEMORY,  # kv_cache_utils
    # flash_attn.py FlashAttentionImpl: BLOOM's ALiBi runs FlashAttention 2, without an fp8 cache
    "FlashAttention does not support fp8 kv-cache on this device": DTYPE,
}
KVCALC_CODES = {
    "max-model-len-exceeded": LENGTH,
    "invalid-parallelism": PARALLELISM,
    "config-invalid": CONFIG,
    "unsupported-model": BACKEND,
    "unsupported-dtype": DTYPE,
}
#: vLLM's spec kinds (``representative_spec.kind``) as kvcalc's group kinds
KINDS = {
    "full_attention": LayerKind.FULL,
    "sliding_window": LayerKind.SLIDING,
    "mla_attention": LayerKind.MLA,
    "mamba": LayerKind.RECURRENT,
}


def vllm_reason(text: str) -> str:
    classes = {c for marker, c in VLLM_REASONS.items() if marker in text}
    assert len(classes) == 1, f"vLLM's refusal maps to no single reason class: {text}"
    return classes.pop()


def _plan(name: str, row: dict):
    """kvcalc on a scenario; a row without a length is the model's own derived one."""
    if row["max_model_len"] is None:
        assert _model(name).max_model_len == row["derived_max_model_len"]
        row = dict(row, max_model_len=row["derived_max_model_len"])
    return harness_plan(DATA, name, row)


def kvcalc_reason(name: str, row: dict) -> str:
    """The class of kvcalc's refusal: its error code, or its plan's wont-start refusal."""
    return refusal_class(lambda: _plan(name, row), KVCALC_CODES)


def test_every_family_is_recorded():
    types = {m["config"]["model_type"] for m in DATA["models"].values()}
    assert {"phi3", "gemma", "glm", "glm4", "glm4_moe", "cohere", "cohere2", "granite", "granitemoe",
            "qwen2_moe", "olmo2", "olmoe", "exaone4", "ernie4_5", "ernie4_5_moe", "phimoe", "minicpm3", "seed_oss", "stablelm", "dbrx", "falcon", "gptj", "opt",
            "nemotron", "ministral3", "glm4_moe_lite", "cohere2_moe", "exaone_moe", "granitemoeshared",
            "chatglm", "hyperclovax", "step3_text", "afmoe"} <= types  # fmt: skip
    assert all(m["source"] for m in DATA["models"].values())
    apart = {m["config"]["model_type"] for m in RECURRENT_DATA["models"].values()}
    assert apart == {"mamba", "falcon_mamba", "mamba2", "zamba2", "granite_swa", "granitemoe_swa",
                     "olmo_hybrid"}  # fmt: skip
    readback = {m["config"]["model_type"] for m in READBACK_DATA["models"].values()}
    assert readback == {"bloom", "apertus", "falcon"}
    later = {m["config"]["model_type"] for m in LATER_DATA["models"].values()}
    assert later == {"step3p5", "hy_v3", "laguna", "axk1", "muse_glimmer_text", "hrm_text", "dory",
                     "beam", "longcat_flash", "hy_v4", "qwen4_exp_text"}  # fmt: skip


#: models recorded at TP 1 only, and why: Beam's fused all-reduce asks for a CUDA driver the
#: reference harness does not emulate at TP 8 (kvcalc refuses Beam above TP 1)
TP1_ONLY = {
    "synthetic--beam-defaults.json",
    "synthetic--beam-every-4th-full-head-dim-128-2-kv.json",
}


def test_grid_is_complete():
    grid = {(d, t, n) for d in ("auto", "fp8") for t in (1, 8) for n in (4096, 32768)}
    for name, model in DATA["models"].items():
        ids = {(r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"])
               for r in model["scenarios"]}  # fmt: skip
        want = {x for x in grid if x[1] == 1} if name in TP1_ONLY else grid
        assert want <= ids, name


def test_every_refusal_reason_is_classed():
    texts = {r["error"] for _, r in (c.values for c in CASES) if "error" in r}
    assert {vllm_reason(t) for t in texts} == {LENGTH, PARALLELISM, CONFIG, KV_MEMORY, BACKEND,
                                                     DTYPE}  # fmt: skip


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if "error" in row:
        assert kvcalc_reason(name, row) == vllm_reason(row["error"]), row["error"]
        return
    p = _plan(name, row)
    assert_sized(p, row)
    # vLLM's group sizes count real layers; kvcalc's num_layers includes the padding layers
    got = sorted((g.kind.value, g.num_layers - g.padding_layers, g.page_bytes, g.block_size,
                  g.blocks_per_request) for g in p.groups)  # fmt: skip
    want = sorted(
        (KINDS[k].value, n, page, block, blocks) for k, n, page, block, blocks, _ in row["groups"]
    )
    assert got == want
    assert row["log_line"] in p.log_lines


def _model(name: str):
    return parse_config(DATA["models"][name]["config"], name=name)


def test_phi3_window_on_every_layer():
    # Phi-3-mini-4k: no layer_types, so vLLM's CacheConfig.sliding_window (2,047) reaches every
    # layer: 32 sliding layers of 32 KV heads × 96 × 2 (K, V) × 2 B = 12,288 B per token and layer
    model = _model("microsoft--Phi-3-mini-4k-instruct.json")
    assert {x.sliding_window for x in model.layers} == {2047}
    assert model.layers[0].bytes_per_token == 32 * 96 * 2 * 2 == 12_288


def test_cohere2_window_is_one_wider():
    # Cohere2Config defaults: sliding_window 4,096, every 4th layer full; vLLM's commandr.py passes
    # sliding_window + 1 = 4,097 to the sliding layers (recorded: SlidingWindowSpec 4,097)
    model = _model("synthetic--cohere2-defaults.json")
    windows = [getattr(x, "sliding_window", None) for x in model.layers]
    assert windows[:4] == [4097, 4097, 4097, None] and len(windows) == 40
    assert {g[5] for r in DATA["models"]["synthetic--cohere2-defaults.json"]["scenarios"]
            for g in r.get("groups", ())} == {4097, None}  # fmt: skip


def test_qwen2_moe_window_keys_reach_no_layer():
    # use_sliding_window true, sliding_window 4,096: transformers' layer_types alternate, so vLLM's
    # CacheConfig keeps no window and qwen2_moe.py passes none: 24 full layers (recorded)
    model = _model("synthetic--qwen2-moe-use-sliding-window.json")
    assert {type(x).__name__ for x in model.layers} == {"FullAttention"} and len(model.layers) == 24


def test_exaone4_pattern_without_layer_types():
    # sliding_window_pattern 4, sliding_window 512: layers 3, 7, ... full, the rest slide over 512
    model = _model("synthetic--exaone4-pattern-window-512.json")
    windows = [getattr(x, "sliding_window", None) for x in model.layers]
    assert windows[:4] == [512, 512, 512, None] and windows.count(None) == 32 // 4


def test_minicpm3_caches_every_head_not_a_latent():
    # MiniCPM3-4B's shape: 40 heads × (64 + 32) = 96 wide, K and V: 40 × 96 × 2 × 2 B = 15,360 B
    # per token and layer (an MLA latent would be (256 + 32) × 2 B = 576 B); vLLM recorded 40 KV
    # heads of 96 at TP 1, 5 at TP 8
    layer = _model("synthetic--minicpm3-defaults.json").layers[0]
    assert (type(layer).__name__, layer.kv_heads, layer.k_dim, layer.v_dim) == (
        "FullAttention",
        40,
        96,
        96,
    )
    assert layer.bytes_per_token == 40 * 96 * 2 * 2 == 15_360


# -- weights: every recorded config against transformers' meta build -------------------------------
def _meta_count(raw: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = {k: v for k, v in raw.items() if k not in ("quantization_config", "auto_map")}
    config = transformers.AutoConfig.for_model(raw["model_type"], **{
        k: v for k, v in raw.items() if k != "model_type"
    })  # fmt: skip
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


#: configs kvcalc refuses before weights, as vLLM fails to build them
REFUSED = {
    "synthetic--glm4-moe-defaults.json",
    "synthetic--chatglm-no-original-rope-32k.json",
    "synthetic--step3-text-defaults.json",
    "synthetic--afmoe-no-routing-keys-32k.json",
    "synthetic--dbrx-no-rope-theta-32k.json",
    "synthetic--nemotron-defaults.json",
    "synthetic--longcat-flash-defaults.json",
    "synthetic--hy-v3-defaults.json",
    "synthetic--hy-v3-2-kv-heads-no-head-dim.json",
}
#: model types whose weights kvcalc does not count from config.json (refused, not guessed):
#: the families of registry_families_2026_12.json (their MoE and gates not modelled for weights)
WEIGHTS_NOT_COUNTED = {
    "hrm_text",
    "dory", "beam", "hy_v4", "qwen4_exp_text",
}  # fmt: skip
#: configs whose weights kvcalc does not count though their family's are: Step-3.5 as transformers
#: saves it (``per_layer_config``)
WEIGHTS_NOT_COUNTED_MODELS = {"synthetic--step3p5-flash-shape-saved.json"}
#: model types transformers' AutoModelForCausalLM does not build (Step-3.5: only as Step3p7's text
#: model; MuseGlimmer's text model: only as MuseGlimmerTextModel), checked against vLLM's meta build in ``family_weights_2026_12.json`` and there against
#: Step3p7TextModel (tests/test_vllm_family_weights.py)
NO_CAUSAL_LM_CLASS = {"step3p5", "muse_glimmer_text"}
#: configs of a model type transformers has, but of an architecture it has not (LongCat-Flash's
#: N-gram embedding: LongcatFlashNgramForCausalLM): checked against vLLM's own meta build
#: (``family_weights_2026_12.json``)
NO_TRANSFORMERS_ARCHITECTURE = {
    "synthetic--longcat-flash-ngram-6-layers-vllm-keys.json",
    # head_dim 0 (hidden_size / heads in hy_v3.py): transformers' HYV3Attention fails to build it
    "synthetic--hy-v3-head-dim-0-2-kv-heads.json",
    # head_dim 0 (hidden_size // each layer's heads in laguna.py): transformers' LagunaAttention
    # fails to build it (ZeroDivisionError)
    "synthetic--laguna-head-dim-0-per-layer-heads.json",
}


#: model types whose config class transformers does not have (vLLM's own ``ChatGLMConfig`` and
#: ``Step3TextConfig``): their
#: weights are checked against vLLM's own meta build (``registry_weights.json``) instead
NO_TRANSFORMERS_CLASS = {"chatglm", "step3_text"}
MODEL_TYPES = {name: m["config"]["model_type"] for name, m in DATA["models"].items()}
WEIGHTS = json.loads((FIXTURE.parent / "registry_weights.json").read_text())


@pytest.mark.torch
@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n in set(DATA["models"])
        - REFUSED
        - NO_TRANSFORMERS_ARCHITECTURE
        - WEIGHTS_NOT_COUNTED_MODELS
        if MODEL_TYPES[n] not in NO_TRANSFORMERS_CLASS | WEIGHTS_NOT_COUNTED | NO_CAUSAL_LM_CLASS
    ),  # fmt: skip
)
def test_count_equals_transformers_meta_build(name):
    got = count_parameters(_model(name).weights).total
    expected = _before_5_25(name) or _meta_count(DATA["models"][name]["config"])
    assert got - expected == COUNT_DEVIATIONS.get(name, 0)
    if name in TRANSFORMERS_5_25 and not _before_5_25(name):  # the recorded figure is 5.25's
        assert expected == TRANSFORMERS_5_25[name]


#: transformers 5.25's meta build of LongCat-Flash, the one vLLM 0.33's own build agrees with
#: (family_weights_2026_12.json: 241,539,850,432 B at TP 1 for the 6-layer config); 5.23 and 5.24
#: build its MoE otherwise (159,387,921,408 and 741,053,585,408 parameters), so under them (the
#: floors' transformers) the count is held to 5.25's, recorded here
TRANSFORMERS_5_25 = {
    "synthetic--longcat-flash-6-layers-20-heads-kv-lora-256-vllm-keys.json": 120_733_215_744,
    "synthetic--longcat-flash-vllm-keys.json": 560_664_958_976,
}


def _before_5_25(name: str) -> int:
    import transformers

    version = tuple(int(x) for x in transformers.__version__.split(".")[:2])
    return TRANSFORMERS_5_25.get(name, 0) if version < (5, 25) else 0


#: kvcalc's count minus transformers', and why: A.X K1's dense layer 0 holds a post_mlp_layernorm
#: in vLLM's AXK1DecoderLayer (every layer), in transformers only the MoE blocks do (7,168);
COUNT_DEVIATIONS = {
    "synthetic--axk1-defaults.json": 7_168,
    "synthetic--axk1-20-heads-kv-lora-256-4k.json": 7_168,
    # swa_attention_sink_enabled: laguna.py's sinks on the 30 sliding layers, 48 heads each, which
    # transformers' Laguna does not build
    "synthetic--laguna-swa-per-layer-heads.json": 30 * 48,
}


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n in set(DATA["models"]) - REFUSED
        if MODEL_TYPES[n] in WEIGHTS_NOT_COUNTED or n in WEIGHTS_NOT_COUNTED_MODELS
    ),  # fmt: skip
)
def test_weights_not_counted_are_refused(name):
    try:
        model = _model(name)
    except KvcalcError:  # refused before the weights (vLLM fails building it too)
        return
    with pytest.raises(KvcalcError) as refused:
        count_parameters(model.weights)
    assert refused.value.code == "weights-unknown"


def test_glm4_moe_without_head_dim_is_refused():
    with pytest.raises(KvcalcError) as refused:
        _model("synthetic--glm4-moe-defaults.json")
    assert refused.value.code == "config-invalid" and "head_dim" in refused.value.message


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "hf", "trtllm", "lmdeploy"])
def test_the_other_engines_refuse_what_only_vllm_was_checked_for(engine):
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    model = _model("microsoft--Phi-3-mini-4k-instruct.json")
    with pytest.raises(KvcalcError) as refused:
        get_engine(engine).plan_kv_cache(
            EngineRequest(model=model, max_model_len=4096, available_kv_bytes=20 << 30)
        )
    assert refused.value.code == "unsupported-model"


def test_ernie4_5_moe_layers_from_the_range():
    # moe_layer_start_index 2, end 21, interval 2: (i + 1) % 2 == 0 and 2 <= i <= 21, so layers
    # 3, 5, ..., 21 are MoE (10 of 28), as ernie45_moe.py and transformers pick them
    w = _model("synthetic--ernie4-5-moe-interval-2-8-kv-heads.json").weights
    assert [i for i, f in enumerate(w.ffns) if f == "moe"] == list(range(3, 22, 2))
    assert w.moe.num_experts == 64 and w.moe.experts_per_token == 6
    assert w.moe.shared_intermediate_size == 0
    # the defaults: MoE from layer 1 to the last (end -1 → 27), 2 shared experts of 1,536
    d = _model("synthetic--ernie4-5-moe-defaults.json").weights
    assert d.ffns == ("dense",) + ("moe",) * 27 and d.moe.shared_intermediate_size == 2 * 1536


def test_falcon_kv_heads_follow_falcon_py_not_num_kv_heads():
    # falcon.py: new_decoder_architecture → num_kv_heads; else multi_query → 1; else every query
    # head, whatever num_kv_heads says (the mutant's 8 is not read: 32 KV heads recorded)
    kv = {name: _model(name).layers[0].kv_heads for name in (
        "synthetic--falcon-defaults.json", "synthetic--falcon-new-decoder-8-kv-heads.json",
        "synthetic--falcon-mha-num-kv-heads-8.json")}  # fmt: skip
    assert list(kv.values()) == [1, 8, 32]


def test_falcon_caches_in_the_model_dtype_whatever_the_cache_dtype():
    # falcon.py builds its Attention without cache_config: fp8 sizes as bf16 (recorded)
    rows = DATA["models"]["synthetic--falcon-mha-num-kv-heads-8.json"]["scenarios"]
    blocks = {(r["kv_cache_dtype"], r["tensor_parallel_size"]): r["num_blocks"] for r in rows}
    assert blocks[("fp8", 1)] == blocks[("auto", 1)] == 20 * 2**30 // (24 * 32 * 64 * 2 * 2 * 16)
    row = next(r for r in rows if r["kv_cache_dtype"] == "fp8" and "groups" in r)
    assert any("falcon.py builds its Attention" in n for n in _plan(
        "synthetic--falcon-mha-num-kv-heads-8.json", row).notes)  # fmt: skip


def test_falcon_alibi_caches_like_its_heads_say():
    # Falcon-RW-1B's shape: no multi_query, so every one of the 32 heads is cached, 2,048 / 32 = 64
    # wide: 32 × 64 × 2 (K, V) × 2 B = 8,192 B per token and layer, 24 layers; ALiBi adds nothing
    model = _model("synthetic--falcon-rw-alibi.json")
    assert {(x.kv_heads, x.k_dim) for x in model.layers} == {(32, 64)} and len(model.layers) == 24
    assert model.bytes_per_token == 8_192 * 24


def test_bloom_fp8_refused_where_vllm_picks_flash_attn():
    # recorded: H100 (FLASH_ATTN, whose ALiBi path is FlashAttention 2) refuses fp8; the A100 and
    # the B200 run FlashInfer and size it: 24 layers × 16 heads × 64 × 2 × 1 B = 49,152 B per
    # token, 20 GiB / (16 × 49,152) = 27,306 blocks on both
    rows = {r["gpu"]: r for r in DATA["models"]["bigscience--bloom-560m.json"]["scenarios"]
            if r["kv_cache_dtype"] == "fp8" and r["tensor_parallel_size"] == 1
            and r["max_model_len"] == 4096}  # fmt: skip
    assert (
        "error" in rows["h100"]
        and rows["a100"]["num_blocks"] == rows["b200"]["num_blocks"] == 27_306
    )
    with pytest.raises(KvcalcError) as refused:
        harness_plan(DATA, "bigscience--bloom-560m.json", rows["h100"])
    assert refused.value.code == "unsupported-dtype" and "ALiBi" in refused.value.message
    assert harness_plan(DATA, "bigscience--bloom-560m.json", rows["a100"]).num_blocks == 27_306


def test_dbrx_reads_the_nested_attn_config():
    # attn_config.kv_n_heads 8, heads d_model / n_heads = 2,048 / 16 = 128 wide
    layer = _model("synthetic--dbrx-8-kv-heads.json").layers[0]
    assert (layer.kv_heads, layer.k_dim) == (8, 128)
    raw = dict(DATA["models"]["synthetic--dbrx-8-kv-heads.json"]["config"])
    raw["attn_config"] = {k: v for k, v in raw["attn_config"].items() if k != "rope_theta"}
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="dbrx")
    assert refused.value.code == "config-invalid" and "rope_theta" in refused.value.message


def test_glm4_moe_lite_without_first_k_dense_replace_is_refused():
    # Glm4MoeLiteConfig() writes mlp_layer_types, not the first_k_dense_replace vLLM reads (recorded:
    # AttributeError at TP 1; the defaults' 20 heads are refused at TP 8 before the build)
    raw = dict(DATA["models"]["synthetic--glm4-moe-lite-first-k-dense-1.json"]["config"])
    del raw["first_k_dense_replace"]
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="glm-4.7-flash")
    assert refused.value.code == "config-invalid"
    # MLA: one latent of kv_lora_rank + qk_rope_head_dim = 512 + 64 per token and layer
    layer = _model("synthetic--glm4-moe-lite-first-k-dense-1.json").layers[0]
    assert layer.bytes_per_token == (512 + 64) * 2


# -- weights without a transformers config class: vLLM's own meta build ----------------------------
def test_vllm_meta_builds_cover_the_configs_transformers_cannot_build():
    want = {n for n in set(DATA["models"]) - REFUSED if MODEL_TYPES[n] in NO_TRANSFORMERS_CLASS}
    assert {(r["model"], r["tensor_parallel_size"]) for r in WEIGHTS["records"]} >= {
        (n, tp) for n in want for tp in (1, 2)
    }


@pytest.mark.parametrize(
    "rec", WEIGHTS["records"], ids=lambda r: f"{r['model']}-tp{r['tensor_parallel_size']}"
)
def test_weights_per_rank_equal_vllms_meta_build(rec):
    w = weight_bytes(_model(rec["model"]), tensor_parallel_size=rec["tensor_parallel_size"])
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == rec["target_param_bytes_per_rank"]


def test_chatglm3_weights_by_hand():
    # ChatGLM3-6B's shape at TP 1 in bf16: embedding and output_layer 65,024 × 4,096 each; per
    # layer query_key_value 4,096 × (4,096 + 2 × 2 × 128) with its bias, dense 4,096², the gated
    # MLP 3 × 4,096 × 13,696, two RMSNorms; a final RMSNorm; the RoPE cache 8,192 × 64 (half a
    # head); per layer the attention's four fp32 scales (vLLM's meta build: 448 B of fp32)
    qkv = 4096 + 2 * 2 * 128
    layer = 4096 * qkv + qkv + 4096 * 4096 + 3 * 4096 * 13696 + 2 * 4096
    params = 2 * 65024 * 4096 + 28 * layer + 4096
    rec = WEIGHTS["records"][0]
    assert rec["model"] == "synthetic--chatglm-chatglm3-6b-attention.json"
    assert rec["target_by_dtype"] == {"bfloat16": 2 * (params + 8192 * 64), "float32": 28 * 16}


def test_chatglm_kv_heads_follow_chatglm_py():
    # multi_query_attention → multi_query_group_num (2); else every query head, whatever
    # multi_query_group_num says (the mutant's 2 is not read: 32 KV heads recorded)
    kv = {name: _model(name).layers[0].kv_heads for name in (
        "synthetic--chatglm-chatglm3-6b-attention.json",
        "synthetic--chatglm-mha-group-2-unread.json")}  # fmt: skip
    assert list(kv.values()) == [2, 32]
    with pytest.raises(KvcalcError) as refused:
        _model("synthetic--chatglm-no-original-rope-32k.json")
    assert refused.value.code == "config-invalid" and "original_rope" in refused.value.message
    # LayerNorm (rmsnorm false) and no final norm (post_layer_norm false): weights only
    w = _model("synthetic--chatglm-mha-group-2-unread.json").weights
    assert (w.norm, w.final_norm, w.attention.qkv_bias, w.attention.o_bias) == (
        "layer", False, True, True,
    )  # fmt: skip


def test_granitemoeshared_shared_mlp():
    # shared_intermediate_size 1,024: a gated shared MLP beside the 8 experts; 0 (the defaults): none
    d = _model("synthetic--granitemoeshared-defaults.json").weights.moe
    m = _model("synthetic--granitemoeshared-8-kv-heads-shared-1024.json").weights.moe
    assert (d.shared_intermediate_size, m.shared_intermediate_size) == (0, 1024)
    layer = _model("synthetic--granitemoeshared-8-kv-heads-shared-1024.json").layers[0]
    assert (layer.kv_heads, layer.k_dim) == (8, 4096 // 32)


def test_hyperclovax_reads_head_dim_and_post_norms():
    # head_dim 64 though hidden_size / num_attention_heads is 128; Peri-LN's two post-norms
    layer = _model("synthetic--hyperclovax-8-kv-heads-head-dim-64-no-post-norm.json").layers[0]
    assert (layer.kv_heads, layer.k_dim) == (8, 64)
    assert _model("synthetic--hyperclovax-defaults.json").weights.norms_per_layer == 4
    raw = dict(DATA["models"]["synthetic--hyperclovax-defaults.json"]["config"])
    raw["dual_chunk_attention_config"] = {"chunk_size": 8192}
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="hyperclovax")
    assert refused.value.code == "config-unverified"


def test_step3_text_one_kv_head_and_its_moe_layers():
    # step3_text.py builds num_kv_heads=1 on every layer, head_dim wide: 1 × 256 × 2 × 2 B per token
    # and layer (recorded: a 16,384 B page of 16 tokens at TP 1 and 8, the head replicated)
    model = _model("synthetic--step3-text-moe-layers-string.json")
    assert {(x.kv_heads, x.k_dim) for x in model.layers} == {(1, 256)}
    assert model.layers[0].bytes_per_token * 16 == 16_384
    # "4,5,...,59": layers 4 to 59 MoE of 61; null: every layer but the first
    assert model.weights.ffns == ("dense",) * 4 + ("moe",) * 56 + ("dense",)
    null = _model("synthetic--step3-text-no-moe-layers-20-heads-32k.json").weights.ffns
    assert null == ("dense",) + ("moe",) * 7
    # the config class's own moe_layers_enum (a list in config.json) is refused, as vLLM fails
    with pytest.raises(KvcalcError) as refused:
        _model("synthetic--step3-text-defaults.json")
    assert refused.value.code == "config-invalid" and "moe_layers_enum" in refused.value.message


def test_afmoe_router_and_expert_bias_in_fp32():
    # afmoe.py: GateLinear(params_dtype=torch.float32) and an fp32 expert_bias, on each of the 54
    # MoE layers: 54 × 128 × (1,024 + 1) × 4 B, plus each layer's four fp32 attention scales
    rec = next(r for r in WEIGHTS["records"] if "afmoe" in r["model"])
    assert rec["target_by_dtype"]["float32"] == 54 * 128 * (1024 + 1) * 4 + 56 * 16


def test_afmoe_layer_types_and_its_routing_keys():
    # Trinity-Nano's shape: layer_types from global_attn_every_n_layers 4 (the config class's
    # list), sliding_window 2,048 on the sliding layers, 2 KV heads of 128; MoE from layer 2
    model = _model("synthetic--afmoe-trinity-nano-shape.json")
    windows = [getattr(x, "sliding_window", None) for x in model.layers]
    assert windows[:4] == [2048, 2048, 2048, None] and windows.count(None) == 56 // 4
    assert model.weights.ffns == ("dense",) * 2 + ("moe",) * 54
    # without layer_types, the same pattern from global_attn_every_n_layers
    raw = dict(DATA["models"]["synthetic--afmoe-trinity-nano-shape.json"]["config"])
    del raw["layer_types"]
    again = parse_config(raw, name="trinity")
    assert [getattr(x, "sliding_window", None) for x in again.layers] == windows
    # AfmoeConfig() has no score_func / route_norm / n_group / topk_group: vLLM fails to build it
    with pytest.raises(KvcalcError) as refused:
        _model("synthetic--afmoe-no-routing-keys-32k.json")
    assert refused.value.code == "config-invalid" and "score_func" in refused.value.message


# -- the recurrent families (registry_families_recurrent.json) --------------------------------------
def test_mamba_is_attention_free_one_block_per_request():
    # MambaConfig(): 32 Mamba1 layers of 2 × 768 = 1,536 channels, state 16, kernel 4, bf16: conv
    # (3, 1,536) × 2 B = 9,216 B and SSM (1,536, 16) × 2 B = 49,152 B, 58,368 B per layer; no
    # attention, so prefix caching is off by default and a request holds one block of every layer:
    # 20 GiB / (58,368 × 32) = 11,497 blocks, 11,497 requests, tokens = blocks × max_model_len
    name = "synthetic--mamba-defaults.json"
    model = _model(name)
    assert model.num_attention_heads == 0 and {x.state_bytes for x in model.layers} == {58_368}
    row = next(r for r in RECURRENT_DATA["models"][name]["scenarios"]
               if (r["tensor_parallel_size"], r["max_model_len"]) == (1, 4096))  # fmt: skip
    assert row["num_blocks"] == 20 * 2**30 // (58_368 * 32) == 11_497
    assert row["kv_cache_tokens"] == 11_497 * 4096 and row["max_concurrency"] == 11_497
    assert row["groups"][0][4] == 1


def test_falcon_mamba_7b_reads_intermediate_size_over_expand():
    # falcon-mamba-7b: expand 16 but intermediate_size 8,192 (what the config class keeps and vLLM
    # builds): conv (3, 8,192) + SSM (8,192, 16) in bf16 = 49,152 + 262,144 B per layer
    model = _model("tiiuae--falcon-mamba-7b.json")
    assert {x.intermediate_size for x in model.layers} == {8192}
    assert model.layers[0].state_bytes == 3 * 8192 * 2 + 8192 * 16 * 2 == 311_296


def test_mamba2_one_group_is_replicated_over_tp():
    # mamba2-2.7b's shape: 80 heads of 64 = 5,120 channels, 1 group of state 128; at TP 8 the one
    # group is replicated to 8 (vLLM's extra_groups_for_head_shards): conv (3, (5,120 + 2·8·128)/8
    # = 896) bf16 and SSM (10, 64, 128) bf16
    layer = _model("synthetic--mamba2-2.7b-shape-1-group.json").layers[0]
    assert layer.state_bytes == 3 * (5120 + 2 * 128) * 2 + 80 * 64 * 128 * 2
    assert layer.per_rank(8).state_bytes == 3 * 896 * 2 + 10 * 64 * 128 * 2


def test_zamba2_hybrid_layers_hold_attention_and_mamba2():
    # Zamba2Config(): 54 layers, 9 of them hybrid (a shared block's attention beside Mamba2), 32
    # heads and KV heads of 2 × 2,560 / 32 = 160; Mamba2 of 2 × 2,560 channels, 8 heads of 640
    model = _model("synthetic--zamba2-defaults.json")
    both = [x for x in model.layers if type(x).__name__ == "ParallelHybrid"]
    assert len(both) == 9 and len(model.layers) == 54
    assert (both[0].attention.kv_heads, both[0].attention.k_dim) == (32, 160)
    assert (both[0].mixer.num_heads, both[0].mixer.head_dim) == (8, 640)
    # its weights: the shared block once, each hybrid layer's projection and adapters
    # (tests/test_weights_2026.py, family_weights_2026_12.json)
    assert model.weights.zamba2.hybrid_layers == (6, 12, 18, 24, 30, 36, 42, 47, 51)


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "hf", "trtllm", "lmdeploy"])
@pytest.mark.parametrize(
    "name", ["synthetic--mamba-defaults.json", "synthetic--zamba2-defaults.json"]
)
def test_the_other_engines_refuse_the_recurrent_families(engine, name):
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    with pytest.raises(KvcalcError) as refused:
        get_engine(engine).plan_kv_cache(
            EngineRequest(model=_model(name), max_model_len=4096, available_kv_bytes=20 << 30)
        )
    assert refused.value.code == "unsupported-model"


def test_granite_swa_layer_types_and_sinks():
    # GraniteSWAConfig(): layer_types every 4th layer full from layer 0, the rest slide over 128;
    # 4 KV heads of 2,560 / 20 = 128; each layer's attention keeps one sink per head (weights)
    model = _model("synthetic--granite-swa-defaults.json")
    windows = [getattr(x, "sliding_window", None) for x in model.layers]
    assert windows[:4] == [None, 128, 128, 128] and windows.count(None) == 24 // 4
    assert (model.layers[0].kv_heads, model.layers[0].k_dim) == (4, 128)
    assert model.weights.attention.sinks
    # the MoE model's heads are hidden_size / num_attention_heads wide (granitemoe.py)
    moe = _model("synthetic--granitemoe-swa-defaults.json").layers[1]
    assert (moe.kv_heads, moe.k_dim, moe.sliding_window) == (32, 4096 // 32, 128)


def test_mamba_with_prefix_caching_holds_two_blocks_of_16():
    # --enable-prefix-caching on MambaConfig() (vLLM's deploy_probe.py, 4,096 tokens, TP 1, 20 GiB):
    # align mode, mamba_block_size = the 16-token block, 2 blocks per request: 11,497 blocks,
    # 5,748.5 requests, 23,545,856 tokens
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    p = get_engine("vllm").plan_kv_cache(
        EngineRequest(model=_model("synthetic--mamba-defaults.json"), max_model_len=4096,
                      available_kv_bytes=20 << 30, enable_prefix_caching=True)
    )  # fmt: skip
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (16, 11_497, 23_545_856)
    assert p.max_concurrency == pytest.approx(5748.5)


def test_olmo_hybrid_deltanet_exports_no_prefill_checkpoints():
    # OlmoHybridConfig(): 24 Gated DeltaNet layers (30 key/value heads of 96 / 192) and 8 attention
    # layers of 30 KV heads × 128; olmo_gdn_linear_attn.py exports no prefill checkpoints, so align
    # mode keeps 2 blocks per request (recorded), not Qwen3-Next's 3
    model = _model("synthetic--olmo-hybrid-defaults.json")
    gdn = [x for x in model.layers if type(x).__name__ == "GatedDeltaNetState"]
    assert len(gdn) == 24 and not gdn[0].prefill_checkpoints
    assert (gdn[0].head_k_dim, gdn[0].head_v_dim) == (96, 192)
    rows = RECURRENT_DATA["models"]["synthetic--olmo-hybrid-defaults.json"]["scenarios"]
    assert {g[4] for r in rows if "groups" in r for g in r["groups"] if g[0] == "mamba"} == {2}


# -- the families of registry_families_2026_12.json ------------------------------------------------
#: one recorded config per family added there
LATER_MODELS = [
    "synthetic--step3p5-flash-shape.json",
    "synthetic--hy-v3-vllm-moe-keys.json",
    "synthetic--laguna-swa-per-layer-heads.json",
    "synthetic--axk1-defaults.json",
    "synthetic--muse-glimmer-text-defaults.json",
    "synthetic--hrm-text-4-per-stack-2x2-cycles-16-heads.json",
    "synthetic--dory-defaults.json",
    "synthetic--beam-defaults.json",
    "synthetic--longcat-flash-vllm-keys.json",
]


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "hf", "trtllm", "lmdeploy"])
@pytest.mark.parametrize("name", LATER_MODELS)
def test_the_other_engines_refuse_the_2026_12_families(engine, name):
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    with pytest.raises(KvcalcError) as refused:
        get_engine(engine).plan_kv_cache(
            EngineRequest(model=_model(name), max_model_len=4096, available_kv_bytes=20 << 30)
        )
    assert refused.value.code == "unsupported-model"


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in LATER_MODELS
        if MODEL_TYPES[n] in WEIGHTS_NOT_COUNTED or n in WEIGHTS_NOT_COUNTED_MODELS
    ],
)
def test_the_2026_12_families_weights_are_not_counted(name):
    with pytest.raises(KvcalcError) as refused:
        weight_bytes(_model(name), tensor_parallel_size=1)
    assert "not counted" in refused.value.message


def test_step3p5_padded_layer_types_and_sliding_heads():
    # Step-3.5-Flash's shape: layer_types padded with 3 MTP entries, cut to 45 layers: 0, 4, ...,
    # 44 full (12), the 33 others slide over 512; every layer num_attention_groups 8 KV heads of
    # 128: a 16-token page is 16 × 8 × 128 × 2 (K, V) × 2 B = 65,536 B. vLLM groups the 12 full
    # and 3 × 11 sliding layers, so a block spans 12 layers: 20 GiB / (65,536 × 12) = 27,306
    name = "synthetic--step3p5-flash-shape.json"
    model = _model(name)
    windows = [getattr(x, "sliding_window", None) for x in model.layers]
    assert len(windows) == 45 and windows[:5] == [None, 512, 512, 512, None]
    assert windows.count(None) == 12
    assert {(x.kv_heads, x.k_dim) for x in model.layers} == {(8, 128)}
    assert 16 * model.layers[0].bytes_per_token == 16 * 8 * 128 * 2 * 2 == 65_536
    row = next(r for r in DATA["models"][name]["scenarios"]
               if (r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]) == ("auto", 1, 4096))  # fmt: skip
    assert row["num_blocks"] == 20 * 2**30 // (65_536 * 12) == 27_306
    # attention_other_setting's 96 query heads on the sliding layers: TP must divide them too
    assert model.layer_query_heads == (96,)
    mutant = _model("synthetic--step3p5-sliding-36-heads-4-kv-16k.json")
    assert mutant.layer_query_heads == (36,)  # 36 % 8: refused at TP 8, as vLLM asserts (recorded)
    # the same model as transformers saves it (num_key_value_heads, num_sliding_attention_heads,
    # mlp_layer_types, layer_types cut to 45): the same layers (recorded: the same blocks)
    saved = _model("synthetic--step3p5-flash-shape-saved.json")
    assert (saved.layers, saved.layer_query_heads) == (model.layers, model.layer_query_heads)
    raw = dict(DATA["models"][name]["config"], need_fp32_gate=False)
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="step3p5")
    assert refused.value.code == "config-invalid" and "need_fp32_gate" in refused.value.message


def test_hy_v3_full_attention_and_the_keys_vllm_reads():
    # the keys hy_v3.py reads over HYV3Config(): 80 full-attention layers of 8 KV heads × 128: a
    # 16-token page is 16 × 8 × 128 × 2 × 2 B = 65,536 B, so 20 GiB / (65,536 × 80) = 4,096 blocks
    # of 16 = 65,536 tokens, 16 requests of 4,096 (recorded)
    name = "synthetic--hy-v3-vllm-moe-keys.json"
    model = _model(name)
    assert {(type(x).__name__, x.kv_heads, x.k_dim) for x in model.layers} == {
        ("FullAttention", 8, 128)
    }
    row = next(r for r in DATA["models"][name]["scenarios"]
               if (r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]) == ("auto", 1, 4096))  # fmt: skip
    assert row["num_blocks"] == 20 * 2**30 // (65_536 * 80) == 4_096
    assert row["kv_cache_tokens"] == 4_096 * 16 and row["max_concurrency"] == 16
    # head_dim 0: hidden_size // num_attention_heads = 4,096 // 64 = 64 (recorded: an 8,192 B page
    # of 2 KV heads × 64 × 2 × 2 B × 16)
    assert _model("synthetic--hy-v3-head-dim-0-2-kv-heads.json").layers[0].k_dim == 4096 // 64
    # HYV3Config() itself: no first_k_dense_replace, which vLLM reads (ValueError, recorded)
    with pytest.raises(KvcalcError) as refused:
        _model("synthetic--hy-v3-defaults.json")
    assert (
        refused.value.code == "config-invalid" and "first_k_dense_replace" in refused.value.message
    )


def test_laguna_layer_types_and_per_layer_heads():
    # layer_types every 4th layer full from layer 3, the others slide over 512; 8 KV heads of 128
    # everywhere; num_attention_heads_per_layer 64 (full) and 48 (sliding): TP must divide both
    model = _model("synthetic--laguna-swa-per-layer-heads.json")
    windows = [getattr(x, "sliding_window", None) for x in model.layers]
    assert windows[:4] == [512, 512, 512, None] and windows.count(None) == 40 // 4
    assert {(x.kv_heads, x.k_dim) for x in model.layers} == {(8, 128)}
    assert (model.num_attention_heads, model.layer_query_heads) == (48, (64,))
    # head_dim 0: each layer hidden_size // its own query heads, 2,048 // 64 = 32 on the full and
    # 2,048 // 32 = 64 on the sliding layers; a sliding page of 16 tokens is 16 × 8 × 64 × 2 × 2 B
    # = 32,768 B, and vLLM gives the full layers blocks of 32 to match it: 32 × 8 × 32 × 2 × 2 B
    # (recorded: full_attention block 32, 128 blocks per 4,096-token request)
    name = "synthetic--laguna-head-dim-0-per-layer-heads.json"
    widths = [x.k_dim for x in _model(name).layers]
    assert widths == [64, 64, 64, 32] * 2
    row = next(r for r in DATA["models"][name]["scenarios"]
               if (r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]) == ("auto", 1, 4096))  # fmt: skip
    full = next(g for g in row["groups"] if g[0] == "full_attention")
    assert full[2:5] == [16 * 8 * 64 * 2 * 2, 32, 4096 // 32] == [32 * 8 * 32 * 2 * 2, 32, 128]
    # a config older than transformers' LagunaConfig (no mlp_layer_types): vLLM refuses it
    raw = dict(DATA["models"]["synthetic--laguna-defaults.json"]["config"])
    del raw["mlp_layer_types"]
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="laguna")
    assert refused.value.code == "config-invalid" and "mlp_layer_types" in refused.value.message


def test_axk1_one_mla_latent_per_layer():
    # AXK1Config(): 61 MLA layers of one latent kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576
    # wide, whole on every rank: a 16-token page of 16 × 576 × 2 B = 18,432 B, so 20 GiB /
    # (18,432 × 61) = 19,099 blocks at TP 1 and 8 alike (recorded); fp8: blocks of 64, 36,864 B
    name = "synthetic--axk1-defaults.json"
    model = _model(name)
    assert {x.bytes_per_token for x in model.layers} == {576 * 2} and len(model.layers) == 61
    rows = {(r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]): r
            for r in DATA["models"][name]["scenarios"]}  # fmt: skip
    assert rows[("auto", 1, 4096)]["num_blocks"] == rows[("auto", 8, 4096)]["num_blocks"]
    assert rows[("auto", 1, 4096)]["num_blocks"] == 20 * 2**30 // (18_432 * 61) == 19_099
    assert rows[("fp8", 1, 4096)]["groups"][0][2:4] == [64 * 576, 64]
    # MLA dimensions other than the config class's (vLLM's MLA prefill backends take fixed sets)
    raw = dict(DATA["models"][name]["config"], qk_rope_head_dim=32)
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="axk1")
    assert (
        refused.value.code == "config-unverified" and "qk_rope_head_dim 32" in refused.value.message
    )


def test_muse_glimmer_text_layer_types_from_the_last_layer():
    # MuseGlimmerTextConfig(): 52 layers, every 4th full counted from the last (3, 7, ..., 51), the
    # 39 others slide over 2,048; 2 KV heads of 128: at TP 8 each rank keeps one replicated head,
    # a 16-token page of 16 × 1 × 128 × 2 × 2 B = 8,192 B (recorded)
    name = "synthetic--muse-glimmer-text-defaults.json"
    model = _model(name)
    windows = [getattr(x, "sliding_window", None) for x in model.layers]
    assert windows[:4] == [2048, 2048, 2048, None] and windows[-1] is None
    assert windows.count(None) == 52 // 4
    assert {(x.kv_heads, x.k_dim) for x in model.layers} == {(2, 128)}
    rows = [r for r in DATA["models"][name]["scenarios"]
            if (r["kv_cache_dtype"], r["tensor_parallel_size"]) == ("auto", 8) and "groups" in r]  # fmt: skip
    assert {g[2] for r in rows for g in r["groups"]} == {16 * 1 * 128 * 2 * 2} == {8192}
    # a vision encoder beside a text config's keys: the multimodal config is MuseGlimmerConfig's
    # (muse_glimmer, recorded in registry_multimodal_2026_12c.json), not this model type
    raw = {**DATA["models"][name]["config"], "vision_config": {"hidden_size": 1024}}
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="muse-glimmer")
    assert refused.value.code == "config-unverified"


def test_hrm_text_one_cache_per_recurrence_step():
    # HrmTextConfig(num_hidden_layers=4, H_cycles=2, L_cycles=2) saves num_layers_per_stack 4 and
    # num_hidden_layers 4 × 2 × (2 + 1) = 24: each step's attention keeps its own cache, 16 heads
    # and KV heads (multi-head) × 64: a 16-token page of 16 × 16 × 64 × 2 × 2 B = 65,536 B, so
    # 20 GiB / (65,536 × 24) = 13,653 blocks (recorded)
    name = "synthetic--hrm-text-4-per-stack-2x2-cycles-16-heads.json"
    model = _model(name)
    assert len(model.layers) == 24 and {(x.kv_heads, x.k_dim) for x in model.layers} == {(16, 64)}
    row = next(r for r in DATA["models"][name]["scenarios"]
               if (r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]) == ("auto", 1, 4096))  # fmt: skip
    assert row["num_blocks"] == 20 * 2**30 // (65_536 * 24) == 13_653
    # without num_layers_per_stack, HrmTextConfig would multiply num_hidden_layers again: refused
    raw = dict(DATA["models"][name]["config"])
    del raw["num_layers_per_stack"]
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="hrm-text")
    assert refused.value.code == "config-unverified"


def test_dory_mlp_layers_cache_nothing_and_tp_1_only():
    # DoryConfig(): 72 layers, the 36 odd ones MLP-only (no cache); of the 36 attention layers those
    # with i % 8 == 6 are full (9), the 27 others slide over 1,024; 4 KV heads of 256: a 16-token
    # page of 16 × 4 × 256 × 2 × 2 B = 65,536 B; 9 layers a group, so 20 GiB / (65,536 × 9) =
    # 36,408 blocks (recorded)
    name = "synthetic--dory-defaults.json"
    model = _model(name)
    kinds = [type(x).__name__ for x in model.layers]
    assert kinds[:8] == ["SlidingWindow", "NoCache"] * 3 + ["FullAttention", "NoCache"]
    assert kinds.count("NoCache") == 36 and kinds.count("FullAttention") == 9
    row = next(r for r in DATA["models"][name]["scenarios"]
               if (r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]) == ("auto", 1, 4096))  # fmt: skip
    assert row["num_blocks"] == 20 * 2**30 // (65_536 * 9) == 36_408
    assert model.max_tensor_parallel is not None and model.max_tensor_parallel[0] == 1
    # 3 loops, per_loop: the 8 attention layers among the 16 recurrent ones (4 to 19) keep a cache
    # per loop, 16 more: 2 + 3 × 6 + 1 = 21 sliding and 3 × 2 + 1 = 7 full caches, in groups of 7
    # (recorded: 3 sliding groups and 1 full of 7 layers); last_loop keeps the 12 physical ones
    per_loop = _model("synthetic--dory-3-loops-per-loop-2-kv.json").layers
    kinds = [type(x).__name__ for x in per_loop]
    assert (kinds.count("SlidingWindow"), kinds.count("FullAttention")) == (21, 7)
    last = [type(x).__name__ for x in _model("synthetic--dory-3-loops-last-loop-2-kv.json").layers]
    assert (last.count("SlidingWindow"), last.count("FullAttention")) == (9, 3)


def test_beam_sliding_layers_and_tp_1_only():
    # BeamConfig(): 24 layers, all sliding over 4,096 (the class's layer_types), 4 KV heads of
    # hidden_size // num_attention_heads = 2,048 // 32 = 64: a 16-token page of 16 × 4 × 64 × 2 ×
    # 2 B = 16,384 B; one group of 24 layers: 20 GiB / (16,384 × 24) = 54,613 blocks (recorded)
    name = "synthetic--beam-defaults.json"
    model = _model(name)
    assert {(x.kv_heads, x.k_dim, x.sliding_window) for x in model.layers} == {(4, 64, 4096)}
    row = next(r for r in DATA["models"][name]["scenarios"]
               if (r["kv_cache_dtype"], r["max_model_len"]) == ("auto", 4096))  # fmt: skip
    assert row["num_blocks"] == 20 * 2**30 // (16_384 * 24) == 54_613
    # TP 8 was not recorded (the harness cannot build Beam's fused all-reduce): refused, not guessed
    with pytest.raises(KvcalcError) as refused:
        harness_plan(DATA, name, dict(row, tensor_parallel_size=8))
    assert refused.value.code == "unsupported-parallelism"


def test_longcat_flash_two_mla_latents_per_decoder_layer():
    # LongcatFlashConfig() with the keys vLLM reads: 28 decoder layers of two MLA attentions, 56
    # latents of 512 + 64 = 576 × 2 B, whole on every rank: a 16-token page of 18,432 B, so 20 GiB
    # / (18,432 × 56) = 20,805 blocks at TP 1 and 8 (recorded)
    name = "synthetic--longcat-flash-vllm-keys.json"
    model = _model(name)
    assert len(model.layers) == 2 * 28 and {x.bytes_per_token for x in model.layers} == {576 * 2}
    row = next(r for r in DATA["models"][name]["scenarios"]
               if (r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]) == ("auto", 8, 4096))  # fmt: skip
    assert row["num_blocks"] == 20 * 2**30 // (18_432 * 56) == 20_805
    # the N-gram variant reads the same layers: 6 decoder layers, 12 latents
    assert len(_model("synthetic--longcat-flash-ngram-6-layers-vllm-keys.json").layers) == 12
    # a num_hidden_layers other than 2 × num_layers is not what LongcatFlashConfig derives
    raw = dict(DATA["models"][name]["config"], num_hidden_layers=28)
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="longcat-flash")
    assert refused.value.code == "config-invalid"


@pytest.mark.parametrize("kind", ["deepseek_sparse_attention", "sparse", "sliding_attention"])
def test_hy_v4_layers_other_than_dense_mla_are_refused(kind):
    # models/hy_v4/nvidia/attention.py: a sparse layer_types entry adds a lightning indexer whose
    # key cache the "shared" indexer_types layers reuse — not recorded; any other value is not a
    # type its config class writes
    config = json.loads(
        json.dumps(DATA["models"]["synthetic--hy-v4-full-layer-types.json"]["config"])
    )
    config["layer_types"][3] = kind
    with pytest.raises(KvcalcError) as refused:
        parse_config(config, name="hy-v4-mutant")
    assert refused.value.code == "config-unverified"
    assert "layer_types" in refused.value.message


HY_V4_SPARSE = json.loads(FIXTURE.with_name("registry_families_hy_v4_sparse.json").read_text())


@pytest.mark.parametrize(
    ("name", "dense", "indexers", "index_bytes"),
    [
        ("synthetic--hy-v4-sparse-every-layer.json", 0, 10, 132),  # full at 0, 1, 5, 9, ..., 33
        ("synthetic--hy-v4-sparse-all-full-indexers.json", 0, 34, 132),
        ("synthetic--hy-v4-sparse-from-layer-2.json", 2, 8, 132),  # full among 2-33: 5, 9, ...
        # index_head_dim 64: 64 fp8 values and no fp32 scale (one per 128 values: 64 // 128 = 0)
        ("synthetic--hy-v4-sparse-index-head-dim-64.json", 0, 10, 64),
    ],
)
def test_hy_v4_sparse_layers_equal_vllm(name, dense, indexers, index_bytes):
    # one group, block 64; a sparse layer's latent 1,152 B per token (bf16) or 656 (fp8_ds_mla), a
    # dense one's 1,152 or 576, and a 132-B indexer key on each sparse layer whose indexer_types
    # entry is "full" — e.g. every layer sparse, 10 full indexers, bf16: 20 GiB // (64 × (34 ×
    # 1,152 + 10 × 132)) = 8,287 blocks (recorded). kvcalc plans every layer sparse and equals
    # vLLM; it refuses the mix of dense and sparse layers
    model = HY_V4_SPARSE["models"][name]
    for row in model["scenarios"]:
        fp8 = row["kv_cache_dtype"] == "fp8"
        per_token = dense * (576 if fp8 else 1152) + (34 - dense) * (656 if fp8 else 1152)
        page = 64 * (per_token + indexers * index_bytes)
        assert row["groups"][0][:4] == ["mla_attention", 34 + indexers, page, 64]
        assert row["num_blocks"] == row["available_kv_bytes"] // page
        if dense:
            continue
        p = harness_plan(HY_V4_SPARSE, name, row)
        assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
            row["block_size"], row["num_blocks"], row["kv_cache_tokens"],
        )  # fmt: skip
        assert p.max_concurrency == pytest.approx(row["max_concurrency"], abs=0.005)
        (g,) = p.groups
        total = g.page_bytes if g.uniform_type else g.page_bytes * g.num_layers
        assert (total, g.blocks_per_request) == (page, row["groups"][0][4])
        assert row["log_line"] in p.log_lines
    if dense:
        with pytest.raises(KvcalcError) as refused:
            parse_config(model["config"], name=name)
        assert refused.value.code == "config-unverified" and "mixing" in refused.value.message


def test_hy_v4_sparse_layers_planned_on_hopper_only(tmp_path):
    # the sparse MLA backend its learnable sink takes is chosen per platform: recorded on an H100
    path = tmp_path / "hy-v4-sparse.json"
    path.write_text(
        json.dumps(HY_V4_SPARSE["models"]["synthetic--hy-v4-sparse-every-layer.json"]["config"])
    )
    with pytest.raises(KvcalcError) as refused:
        plan_reference(str(path), PlanInputs(gpu="B200", kv_cache_memory_bytes=20 << 30, max_model_len=4096),
                       with_suggestions=False)  # fmt: skip
    assert refused.value.code == "unsupported-model"


def test_hy_v4_indexer_types_checked_as_vllm_checks_them():
    config = json.loads(
        json.dumps(HY_V4_SPARSE["models"]["synthetic--hy-v4-sparse-every-layer.json"]["config"])
    )
    config["indexer_types"] = ["full"] * 33
    with pytest.raises(KvcalcError) as refused:
        parse_config(config, name="hy-v4-33-indexer-types")
    assert refused.value.code == "config-invalid"


@pytest.mark.parametrize(
    ("key", "value"), [("indexer_n_heads", 16), ("ple_layer_ids", [0, 4]), ("hc_count", 1)]
)
def test_qwen4_exp_what_was_not_recorded_is_refused(key, value):
    # an indexer makes indexed_attention the QSA sparse attention, PLE layers add short-conv
    # states (models/qwen4_exp): neither recorded; hc_count 1 vLLM refuses (ValueError)
    config = dict(DATA["models"]["synthetic--qwen4-exp-text-sigmoid-gate.json"]["config"])
    config[key] = value
    with pytest.raises(KvcalcError) as refused:
        parse_config(config, name="qwen4-exp-mutant")
    code = "config-invalid" if key == "hc_count" else "config-unverified"
    assert refused.value.code == code and key in refused.value.message


def _planned_as_recorded(data: dict, name: str, config: dict) -> None:
    """``config`` (a recorded config with keys left out) plans every recorded scenario of ``name``
    as vLLM sized it: the config class fills the same values (its defaults)."""
    trimmed = {"models": {name: {**data["models"][name], "config": config}}}
    for row in data["models"][name]["scenarios"]:
        if "error" in row:
            continue
        p = harness_plan(trimmed, name, row)
        assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
            row["block_size"], row["num_blocks"], row["kv_cache_tokens"],
        )  # fmt: skip


def test_qwen4_exp_class_defaults_where_config_json_omits_them():
    # Qwen4ExpTextConfig fills num_key_value_heads 2, head_dim 256 and hc_count 4 (the recorded
    # config has exactly these): not hidden_size / heads (128) nor one KV head per query head
    name = "synthetic--qwen4-exp-text-sigmoid-gate.json"
    config = dict(DATA["models"][name]["config"])
    for key in ("num_key_value_heads", "head_dim", "hc_count"):
        del config[key]
    _planned_as_recorded(DATA, name, config)


@pytest.mark.parametrize("layer_types", [["linear_attention"] * 39, ["full_attention"] * 40])
def test_qwen4_exp_layer_types_checked(layer_types):
    # one entry per layer, each linear_attention or indexed_attention (the model file raises on
    # any other type)
    config = dict(DATA["models"]["synthetic--qwen4-exp-text-sigmoid-gate.json"]["config"])
    config["layer_types"] = layer_types
    with pytest.raises(KvcalcError) as refused:
        parse_config(config, name="qwen4-exp-layer-types")
    assert refused.value.code in ("config-invalid", "config-unverified")


def test_hy_v4_class_defaults_where_config_json_omits_them():
    # HYV4Config fills indexer_types (full on 0 and every fourth from 1), index_head_dim 128 and
    # the MLA widths (512, 64, 192, 256) — what the recorded configs carry: the same plans
    name = "synthetic--hy-v4-sparse-every-layer.json"
    config = dict(HY_V4_SPARSE["models"][name]["config"])
    for key in ("indexer_types", "index_head_dim", "kv_lora_rank", "qk_rope_head_dim",
                "qk_nope_head_dim", "v_head_dim"):  # fmt: skip
        del config[key]
    _planned_as_recorded(HY_V4_SPARSE, name, config)
    dense = dict(DATA["models"]["synthetic--hy-v4-defaults.json"]["config"])
    for key in ("kv_lora_rank", "qk_rope_head_dim"):
        del dense[key]
    _planned_as_recorded(DATA, "synthetic--hy-v4-defaults.json", dense)


def test_hy_v4_indexer_types_values_checked():
    config = dict(HY_V4_SPARSE["models"]["synthetic--hy-v4-sparse-every-layer.json"]["config"])
    config["indexer_types"] = ["full"] * 33 + ["dense"]
    with pytest.raises(KvcalcError) as refused:
        parse_config(config, name="hy-v4-dense-indexer")
    assert refused.value.code == "config-invalid"
