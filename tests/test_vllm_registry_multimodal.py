"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of the multimodal architectures added from
its registry: the text decoder's KV cache and the vision tower's weights.

``fixtures/vllm_0_33/registry_multimodal.json`` was recorded with the vLLM reference harness over
auto/fp8 × TP 1/8 × 4,096/32,768 tokens × 20 GiB per GPU (as ``registry_families.json``), for
transformers' config-class defaults and mutants of them (each model's ``source`` says which):
block size, blocks, tokens, concurrency, every group and the capacity line equal, every refusal
refused for vLLM's reason. ``multimodal_weights_2.json`` holds vLLM's own meta build of the same
configs through ``deploy_probe.py``: parameters and buffers of one TP rank, tower included, which
kvcalc's weights per rank (and buffers) must equal to the byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_sized, harness_cases, harness_plan, refusal_class

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import KvcalcError
from kvcalc.estimate.weights import weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_0_33"
#: the recordings, each file its own (``registry_multimodal_2026_12.json`` and
#: ``registry_multimodal_2026_12b.json``: the architectures added after the first ones, recorded
#: apart; their weights in ``multimodal_weights_3.json`` and ``multimodal_weights_4.json``); one
#: ``models`` mapping over them (``registry_multimodal_mmremote.json``, with its weights in
#: ``multimodal_weights_mmremote.json``: remote-code config classes, through stand-ins)
_RECORDED = [json.loads((FIXTURES / f).read_text())
             for f in ("registry_multimodal.json", "registry_multimodal_2026_12.json",
                       "registry_multimodal_2026_12b.json", "registry_multimodal_2026_12c.json",
                       "registry_multimodal_mmremote.json",
                       "registry_multimodal_internvl.json")]  # fmt: skip
DATA = {"models": {n: m for d in _RECORDED for n, m in d["models"].items()}}
_WEIGHED = [json.loads((FIXTURES / f).read_text())
            for f in ("multimodal_weights_2.json", "multimodal_weights_3.json",
                      "multimodal_weights_4.json", "multimodal_weights_5.json",
                      "multimodal_weights_mmremote.json",
                      "multimodal_weights_internvl.json")]  # fmt: skip
WEIGHTS = {"records": [r for d in _WEIGHED for r in d["records"]]}
CASES = harness_cases(DATA)

LENGTH, PARALLELISM, CONFIG, KV_MEMORY = "max-model-len", "parallelism", "config", "kv-memory"
#: vLLM's error texts → the class both sides are mapped to
VLLM_REASONS = {
    "User-specified max_model_len": LENGTH,  # config/model.py _get_and_verify_max_len
    "must be divisible by tensor parallel size": PARALLELISM,  # config/parallel.py: the heads
    "is not divisible by": PARALLELISM,  # the vision attention's dist_utils.divide: its heads
    # linear.py MergedColumnParallelLinear: the tower's gated MLP (EXAONE 4.5's 3,420 at TP 8)
    "assert all(output_size % self.tp_size == 0": PARALLELISM,
    "object has no attribute 'head_dim'": CONFIG,  # glm4_moe.py reads config.head_dim
    "object has no attribute 'use_qk_norm'": CONFIG,  # glm4_moe.py reads config.use_qk_norm
    "object has no attribute 'norm_topk_prob'": CONFIG,  # qwen3_moe.py reads it
    "object has no attribute 'vision_feature_layer'": CONFIG,  # mistral3.py (LightOnOCR) reads it
    "object has no attribute 'block_dim'": CONFIG,  # lfm2.py (LFM2-VL's text) reads it
    "object has no attribute 'force_image_size'": CONFIG,  # internvl.py (Qianfan-OCR) reads it
    "object has no attribute 'ps_version'": CONFIG,  # internvl.py (InternVL chat) reads it
    "No model architectures are specified": CONFIG,  # step3_vl.py: text_config names none
    "object has no attribute 'strip'": CONFIG,  # step3_text.py splits moe_layers_enum, a str
    "object has no attribute 'tie_word_embeddings'": CONFIG,  # chatglm.py (GLM-4V) reads it
    # idefics2_vision_model.py and lfm2_siglip2.py: the tower's heads over TP, a bare assert
    "assert self.num_heads % tp_size == 0": PARALLELISM,
    "To serve at least one request with the model's max seq len": KV_MEMORY,  # kv_cache_utils
}
KVCALC_CODES = {
    "max-model-len-exceeded": LENGTH,
    "invalid-parallelism": PARALLELISM,
    "config-invalid": CONFIG,
}
KINDS = {"full_attention": LayerKind.FULL, "sliding_window": LayerKind.SLIDING,
         "mamba": LayerKind.RECURRENT, "mla_attention": LayerKind.MLA}  # fmt: skip


def vllm_reason(text: str) -> str:
    classes = {c for marker, c in VLLM_REASONS.items() if marker in text}
    assert len(classes) == 1, f"vLLM's refusal maps to no single reason class: {text}"
    return classes.pop()


def _model(name: str):
    return parse_config(DATA["models"][name]["config"], name=name)


def _plan(name: str, row: dict):
    if row["max_model_len"] is None:
        assert _model(name).max_model_len == row["derived_max_model_len"]
        row = dict(row, max_model_len=row["derived_max_model_len"])
    return harness_plan(DATA, name, row)


def test_every_family_is_recorded():
    types = {m["config"]["model_type"] for m in DATA["models"].values()}
    assert {"qwen2_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "llava", "llava_next",
            "llava_onevision", "llava_next_video", "cohere2_vision", "idefics3",
            "smolvlm", "exaone4_5", "glm_ocr", "lighton_ocr", "lfm2_vl",
            "internvl", "paligemma", "qianfan_ocr", "paddleocr_vl", "minicpmv4_6",
            "minicpmv4_7", "step3_vl", "blip-2", "kimi_vl", "chatglm",
            "qwen2_audio", "hyperclovax_vision_v2", "cosmos3_omni",
            "qwen2_5_omni", "muse_glimmer", "qwen3_omni_moe", "aria",
            "cosmos3_edge", "internvl_chat", "NVLM_D", "h2ovl_chat"} <= types  # fmt: skip
    assert all(m["source"] for m in DATA["models"].values())


def test_grid_is_complete():
    grid = {(d, t, n) for d in ("auto", "fp8") for t in (1, 8) for n in (4096, 32768)}
    for name, model in DATA["models"].items():
        ids = {(r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"])
               for r in model["scenarios"]}  # fmt: skip
        assert grid <= ids, name


def _tower_first(name: str, row: dict) -> bool:
    """vLLM builds the vision tower before the text model: at a TP size the tower's heads do not
    divide it stops there, before the text keys it fails on at TP 1 — and it checks the text
    model's heads against the TP size (``VllmConfig``) before it builds any of it; kvcalc reads
    (and refuses) the config before any TP. Both refuse; each names the first reason it meets."""
    tp1 = [r for r in DATA["models"][name]["scenarios"] if r["tensor_parallel_size"] == 1]
    tower = (
        "is not divisible by", "assert self.num_heads % tp_size == 0",
        "must be divisible by tensor parallel size",
    )  # fmt: skip
    return any(t in row["error"] for t in tower) and all(
        "error" in r and vllm_reason(r["error"]) == CONFIG for r in tp1
    )


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if "error" in row:
        got = refusal_class(lambda: _plan(name, row), KVCALC_CODES)
        want = CONFIG if _tower_first(name, row) else vllm_reason(row["error"])
        assert got == want, row["error"]
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


# -- weights per rank: vLLM's own meta build, tower included ---------------------------------------
def test_weights_cover_every_family_at_tp_1_and_2():
    types = {DATA["models"][r["model"]]["config"]["model_type"]: set() for r in WEIGHTS["records"]}
    for r in WEIGHTS["records"]:
        types[DATA["models"][r["model"]]["config"]["model_type"]].add(r["tensor_parallel_size"])
    assert {t: tps for t, tps in types.items() if {1, 2} <= tps}.keys() >= {
        "qwen2_vl", "qwen3_vl_moe", "glm4v", "glm4v_moe", "llava", "llava_next", "llava_onevision",
        "llava_next_video", "cohere2_vision", "idefics3", "smolvlm", "exaone4_5", "glm_ocr",
        "lighton_ocr", "lfm2_vl", "internvl", "paligemma", "qianfan_ocr", "paddleocr_vl",
        "minicpmv4_6", "minicpmv4_7", "step3_vl", "blip-2", "kimi_vl", "chatglm", "qwen2_audio",
        "hyperclovax_vision_v2", "cosmos3_omni", "qwen2_5_omni", "muse_glimmer", "qwen3_omni_moe",
        "aria", "cosmos3_edge", "internvl_chat", "NVLM_D", "h2ovl_chat",
    }  # fmt: skip


@pytest.mark.parametrize(
    "rec",
    [r for r in WEIGHTS["records"] if not r.get("engine_args")],
    ids=lambda r: f"{r['model'][11:-5]}-tp{r['tensor_parallel_size']}",
)
def test_weights_per_rank_equal_vllms_meta_build(rec):
    model = _model(rec["model"])
    assert model.weights.vision is not None, model.weights.notes
    w = weight_bytes(model, tensor_parallel_size=rec["tensor_parallel_size"])
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == rec["target_param_bytes_per_rank"]


def test_qwen2_vl_tower_by_hand():
    # Qwen2-VL-7B's tower (the config class's vision defaults): 32 blocks of embed_dim 1,280 with
    # LayerNorms (weight + bias), a biased fused qkv, proj, fc1/fc2 5,120 wide; the unbiased
    # 3 × 2 × 14 × 14 patch embedding; the merger's LayerNorm and 5,120 → 5,120 → 3,584 MLP:
    # 675,759,104 parameters
    v = _model("synthetic--qwen2-vl-7b-shape.json").weights.vision
    hv, merged = 1280, 1280 * 4
    block = 4 * hv + (3 * hv * hv + 3 * hv) + (hv * hv + hv) + 2 * 5120 * hv + 5120 + hv
    tower = 3 * 2 * 14 * 14 * hv + 32 * block + 2 * hv + merged * merged + merged
    tower += 3584 * merged + 3584
    assert (v.family, v.hidden_size, v.intermediate_size, v.num_layers) == (
        "qwen2_vl",
        hv,
        5120,
        32,
    )
    assert tower == 675_759_104
    from kvcalc.estimate.vision_tensors import vision_tensors

    assert sum(t.numel for t in vision_tensors(v)) == tower


def test_glm4v_text_bias_follows_vllms_getattr_default():
    # glm4.py builds q/k/v with getattr(config, "attention_bias", False): Glm4vTextConfig sets
    # none, so the config class's defaults have no bias and a config saying true has one
    # (40 layers × (4,096 + 2 × 2 × 128) values)
    plain = weight_bytes(_model("synthetic--glm4v-defaults.json"), tensor_parallel_size=1)
    biased = weight_bytes(_model("synthetic--glm4v-attention-bias.json"), tensor_parallel_size=1)
    assert biased.weights_bytes_per_gpu - plain.weights_bytes_per_gpu == 40 * (4096 + 512) * 2


@pytest.mark.parametrize(
    ("name", "key"),
    [("synthetic--glm4v-moe-defaults.json", "head_dim"),
     ("synthetic--glm4v-moe-head-dim-128.json", "use_qk_norm"),
     ("synthetic--qwen3-vl-moe-defaults.json", "norm_topk_prob"),
     ("synthetic--lighton-ocr-defaults.json", "vision_feature_layer"),
     ("synthetic--qianfan-ocr-defaults.json", "force_image_size"),
     ("synthetic--step3-vl-defaults.json", "architectures"),
     ("synthetic--step3-vl-text-architecture.json", "moe_layers_enum"),
     ("synthetic--glm4v-9b-vision.json", "tie_word_embeddings")],
)  # fmt: skip
def test_config_class_defaults_vllm_cannot_build_are_refused(name, key):
    # transformers 5.20's Glm4vMoeTextConfig and Qwen3VLMoeTextConfig set no head_dim,
    # use_qk_norm, norm_topk_prob; vLLM's glm4_moe.py and qwen3_moe.py read them as attributes
    with pytest.raises(KvcalcError) as refused:
        _model(name)
    assert refused.value.code == "config-invalid" and key in refused.value.message


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "hf", "trtllm", "lmdeploy"])
@pytest.mark.parametrize(
    "name",
    ["synthetic--qwen2-vl-defaults.json", "synthetic--qwen3-vl-moe-norm-topk-prob.json",
     "synthetic--glm4v-defaults.json", "synthetic--glm4v-moe-head-dim-128-no-qk-norm.json",
     "synthetic--llava-4k.json", "synthetic--llava-next-4k.json",
     "synthetic--llava-onevision-defaults.json", "synthetic--cohere2-vision-defaults.json",
     "synthetic--idefics3-32k.json", "synthetic--smolvlm-32k.json",
     "synthetic--llava-next-video-4k.json", "synthetic--exaone4-5-32k.json",
     "synthetic--glm-ocr-defaults.json", "synthetic--lighton-ocr-mistral3-keys.json",
     "synthetic--lfm2-vl-hybrid.json", "synthetic--internvl-defaults.json",
     "synthetic--paligemma-defaults.json", "synthetic--paligemma-gemma2.json",
     "synthetic--qianfan-ocr-internvl-keys.json", "synthetic--paddleocr-vl-defaults.json",
     "synthetic--minicpmv4-6-defaults.json", "synthetic--minicpmv4-7-defaults.json",
     "synthetic--step3-vl-moe-layers-string.json", "synthetic--blip2-defaults.json",
     "synthetic--kimi-vl-grouped-topk.json", "synthetic--glm4v-9b-untied.json",
     "synthetic--qwen2-audio-defaults.json"],
)  # fmt: skip
def test_the_other_engines_refuse_what_only_vllm_was_checked_for(engine, name):
    request = EngineRequest(model=_model(name), max_model_len=4096, available_kv_bytes=20 << 30)
    with pytest.raises(KvcalcError) as refused:
        get_engine(engine).plan_kv_cache(request)
    assert refused.value.code == "unsupported-model"


def _plan_config(tmp_path, name: str, **kw):
    from kvcalc.planning.api import plan_reference
    from kvcalc.planning.inputs import PlanInputs

    path = tmp_path / name
    path.write_text(json.dumps(DATA["models"][name]["config"]))
    inputs = PlanInputs(gpu="H200", **{"max_model_len": 4096, **kw})
    return plan_reference(str(path), inputs, with_suggestions=False)


def test_glm4v_tower_whole_on_every_rank_builds_at_tp_8(tmp_path):
    # --mm-encoder-tp-mode data: glm4_1v.py builds the tower with disable_tp (its attention's
    # tp_size 1), so its 12 heads no longer meet TP 8; vLLM's meta build at TP 8 (recorded)
    rec = next(r for r in WEIGHTS["records"] if "mm_encoder_tp_mode" in r.get("engine_args", {})
               and r["model"] == "synthetic--glm4v-defaults.json")  # fmt: skip
    assert rec["engine_args"] == {"mm_encoder_tp_mode": "data"} and rec["tensor_parallel_size"] == 8
    name = rec["model"]
    with pytest.raises(KvcalcError) as refused:
        _plan_config(tmp_path, name, tensor_parallel_size=8)
    assert (
        refused.value.code == "invalid-parallelism"
        and "12 attention heads" in refused.value.message
    )
    plan = _plan_config(tmp_path, name, tensor_parallel_size=8, mm_encoder_tp_mode="data")
    assert plan.weights_bytes == rec["target_param_bytes_per_rank"]
    off = _plan_config(tmp_path, name, tensor_parallel_size=8,
                       limit_mm_per_prompt='{"image": 0, "video": 0}')  # fmt: skip
    assert off.weights_bytes < plan.weights_bytes


def test_llava_builds_clip_up_to_the_feature_layer():
    # LlavaConfig's CLIP-L/14 at 336 px: vision_feature_layer -2 of 24 layers, so vLLM's
    # init_vision_tower_for_llava builds 23 (get_layer_index), and no post-layernorm
    # (require_post_norm=False); per layer the biased fused qkv and out_proj (4 × (1,024² + 1,024)),
    # fc1/fc2 (2 × 1,024 × 4,096 + 4,096 + 1,024), two LayerNorms (4 × 1,024); the embeddings
    # (class 1,024, the unbiased 3 × 14² patch convolution, 577 position rows), the pre-LayerNorm;
    # the projector 1,024 → 4,096 → 4,096 with biases
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--llava-4k.json").weights.vision
    hv, inter, h = 1024, 4096, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 23 * layer + hv + 3 * 14 * 14 * hv + 577 * hv + 2 * hv
    projector = h * hv + h + h * h + h
    assert (v.tower, v.num_layers) == ("clip", 23)
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector


def test_cohere2_vision_tower_by_hand():
    # Cohere2VisionConfig's SigLIP at 512 px, patch 16 (1,024 positions), 27 layers of 1,152, all
    # built (SiglipVisionModel: so the post-LayerNorm): per layer the biased fused qkv and
    # out_proj 4 × (1,152² + 1,152), fc1/fc2 2 × 1,152 × 3,072 + 3,072 + 1,152, two LayerNorms
    # 4 × 1,152 = 12,399,744; the biased 3 × 16² patch convolution, 1,024 position rows, the
    # post-LayerNorm: 336,860,928. The projector after the 2 × 2 pixel shuffle: linear_1 4,608 →
    # 2 × 18,432 and linear_2 18,432 → 8,192, both biased: 320,909,312
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--cohere2-vision-defaults.json").weights.vision
    hv, inter, h, align = 1152, 3072, 8192, 36864
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 16 * 16 * hv + hv + 1024 * hv + 27 * layer + 2 * hv
    projector = align * 4 * hv + align + h * (align // 2) + h
    assert (layer, tower, projector) == (12_399_744, 336_860_928, 320_909_312)
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector


def test_idefics3_tower_by_hand():
    # Idefics3Config's tower at 224 px, patch 32 (49 positions), 12 layers of 1,152, all built
    # with the post-LayerNorm (Idefics2VisionTransformer); per layer 4 × (1,152² + 1,152) +
    # 2 × 1,152 × 3,072 + 3,072 + 1,152 + 4 × 1,152 = 12,399,744; the biased 3 × 32² patch
    # convolution, 49 position rows (no position_ids buffer), the post-LayerNorm: 152,395,776. The
    # connector: one unbiased 4,608 → 4,096 projection (1,152 × 2², scale_factor 2): 18,874,368
    from kvcalc.estimate.vision_tensors import vision_tensors

    hv, inter, h = 1152, 3072, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 32 * 32 * hv + hv + 49 * hv + 12 * layer + 2 * hv
    assert (tower, h * 4 * hv) == (152_395_776, 18_874_368)
    for name in ("synthetic--idefics3-32k.json", "synthetic--smolvlm-32k.json"):
        v = _model(name).weights.vision
        assert sum(t.numel for t in vision_tensors(v)) == tower + h * 4 * hv


OMNI = "synthetic--qwen2-5-omni-defaults.json"


@pytest.mark.parametrize(
    "rec",
    [r for r in WEIGHTS["records"] if "limit_mm_per_prompt" in r.get("engine_args", {})],
    ids=lambda r: f"{r['model'][11:-5]}-{json.dumps(r['engine_args']['limit_mm_per_prompt'])}",
)  # fmt: skip
def test_the_tower_is_built_for_the_modalities_its_class_marks(tmp_path, rec):
    # _mark_tower_model skips a tower whose modalities are all limited to 0: LLaVA-1.5 marks its
    # tower for images (image 0: no tower, 13,477,880,320 B, the text model alone), LLaVA-NeXT-Video
    # for video (video 0: none; image 0: all of its 14,101,662,728 B), vLLM's meta build;
    # Qwen2.5-Omni its audio encoder for audio and its vision tower for image and video (audio 0:
    # 20,317,512,640 B; image and video 0: 15,436,601,792 B; all three 0: 14,149,627,328 B)
    limits = json.dumps(rec["engine_args"]["limit_mm_per_prompt"])
    plan = _plan_config(tmp_path, rec["model"], limit_mm_per_prompt=limits)
    assert plan.weights_bytes == rec["target_param_bytes_per_rank"]


def test_llava_next_video_projector_whole_and_no_image_newline():
    # LlavaNextVideoConfig's CLIP-L/14 at 336 px up to vision_feature_layer -2: 23 layers of
    # 4 × (1,024² + 1,024) + 2 × 1,024 × 4,096 + 4,096 + 1,024 + 4 × 1,024 = 12,596,224, the
    # embeddings (class 1,024, the 3 × 14² convolution, 577 position rows) and the pre-LayerNorm:
    # 290,909,184; the projector's nn.Linears 1,024 → 4,096 → 4,096 with biases, 20,979,712, whole
    # on every rank (llava_next_video.py), and no image_newline (its loader skips it)
    from kvcalc.estimate.vision_tensors import vision_tensors

    tensors = vision_tensors(_model("synthetic--llava-next-video-4k.json").weights.vision)
    hv, inter, h = 1024, 4096, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 23 * layer + hv + 3 * 14 * 14 * hv + 577 * hv + 2 * hv
    projector = h * hv + h + h * h + h
    assert (layer, tower, projector) == (12_596_224, 290_909_184, 20_979_712)
    assert sum(t.numel for t in tensors) == tower + projector
    proj = [t for t in tensors if t.name.startswith("multi_modal_projector")]
    assert sum(t.numel for t in proj) == projector and {t.split for t in proj} == {"replicated"}


def test_llava_next_video_pool_modes_vllm_builds():
    # LlavaNextVideoPooler builds AvgPool2d or MaxPool2d; any other spatial_pool_mode raises
    # ("Unknown pooling mode", the conv pool's weights are not loaded)
    config = DATA["models"]["synthetic--llava-next-video-4k.json"]["config"]
    assert parse_config(dict(config, spatial_pool_mode="max"), name="max").weights.vision
    with pytest.raises(KvcalcError) as refused:
        parse_config(dict(config, spatial_pool_mode="conv"), name="conv")
    assert refused.value.code == "config-invalid" and "spatial_pool_mode" in refused.value.message


def test_exaone4_5_tower_by_hand():
    # Exaone4_5_VisionConfig's tower (Qwen2.5-VL's with its blocks rebuilt by exaone4_5.py): the
    # unbiased 3 × 2 × 14² patch embedding of 3,584 (4,214,784); per block two RMSNorms, q
    # 3,584² + 3,584, k and v 2 × 8 KV heads × 224 = 3,584 rows of 3,584 + 3,584, proj
    # 3,584² + 3,584, the biased gated MLP 2 × (3,420 × 3,584 + 3,420) + 3,584 × 3,420 + 3,584:
    # 75,335,352, 32 blocks; the merger's RMSNorm and 14,336 → 14,336 → 3,584 MLP: 256,922,624
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--exaone4-5-32k.json").weights.vision
    hv, kv, inter, merged = 3584, 8 * 224, 3420, 3584 * 4
    block = 2 * hv + 2 * (hv * hv + hv) + (2 * kv * hv + 2 * kv) + 3 * inter * hv + 2 * inter + hv
    merger = hv + merged * merged + merged + hv * merged + hv
    assert (block, merger) == (75_335_352, 256_922_624)
    assert (v.num_heads, v.num_kv_heads, v.head_dim) == (16, 8, 224)
    assert sum(t.numel for t in vision_tensors(v)) == 3 * 2 * 14 * 14 * hv + 32 * block + merger


def test_glm_ocr_tower_by_hand():
    # GlmOcrVisionConfig's tower as glm_ocr.py builds it: the biased 3 × 2 × 14² patch embedding
    # of 1,024 (no position table, no post-conv norm); per block two RMSNorms, q/k norms 2 × 64,
    # the biased qkv 3 × (1,024² + 1,024) and proj, the biased gated MLP 4,096 wide: 16,792,704,
    # 24 blocks; the post-block RMSNorm, the biased 2 × 2 downsampling convolution 1,024 → 1,536,
    # and the unbiased merger (1,536² projection, a LayerNorm, gate/up/down as wide as the text
    # model's intermediate_size, 4,096): 431,760,896 in all
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--glm-ocr-defaults.json").weights.vision
    hv, inter, out, text_inter = 1024, 4096, 1536, 4096
    block = 2 * hv + 2 * 64 + 4 * (hv * hv + hv) + 3 * inter * hv + 2 * inter + hv
    tower = 3 * 2 * 14 * 14 * hv + hv + 24 * block + hv + (out * hv * 4 + out)
    tower += out * out + 2 * out + 3 * text_inter * out
    assert (block, tower) == (16_792_704, 431_760_896)
    assert sum(t.numel for t in vision_tensors(v)) == tower


@pytest.mark.parametrize(
    "name",
    ["synthetic--exaone4-5-32k.json", "synthetic--glm-ocr-defaults.json",
     "synthetic--qianfan-ocr-internvl-keys.json", "synthetic--minicpmv4-6-defaults.json",
     "synthetic--step3-vl-moe-layers-string.json", "synthetic--kimi-vl-moe-1408.json",
     "synthetic--cosmos3-defaults.json", "synthetic--cosmos3-edge-defaults.json"],
)  # fmt: skip
def test_tower_whole_on_every_rank_with_encoder_tp_data(tmp_path, name):
    # exaone4_5.py and glm_ocr.py subclass Qwen2.5-VL's and GLM-4.1V's classes, qianfan_ocr.py
    # InternVLChatModel, which declare supports_encoder_tp_data, as minicpmv4_6.py and step3_vl.py
    # do (cosmos3.py subclasses Qwen3-VL's): --mm-encoder-tp-mode data builds their towers whole
    # at TP 2 (vLLM's meta build, recorded), more per rank than split
    rec = next(r for r in WEIGHTS["records"] if r["model"] == name
               and "mm_encoder_tp_mode" in r.get("engine_args", {}))  # fmt: skip
    assert rec["engine_args"] == {"mm_encoder_tp_mode": "data"} and rec["tensor_parallel_size"] == 2
    n = min(4096, _model(name).max_model_len)  # Kimi-VL's class defaults: 2,048 (probed there)
    data = _plan_config(tmp_path, name, tensor_parallel_size=2, mm_encoder_tp_mode="data",
                        max_model_len=n)  # fmt: skip
    split = _plan_config(tmp_path, name, tensor_parallel_size=2, max_model_len=n)
    assert data.weights_bytes == rec["target_param_bytes_per_rank"] > split.weights_bytes


def test_exaone4_5_tower_mlp_width_over_tp(tmp_path):
    # Qwen2_5_VisionMLP's MergedColumnParallelLinear asserts 3,420 % TP == 0: vLLM fails at TP 8
    # (recorded), builds at TP 4; --mm-encoder-tp-mode data builds the tower unsplit
    name = "synthetic--exaone4-5-32k.json"
    with pytest.raises(KvcalcError) as refused:
        _plan_config(tmp_path, name, tensor_parallel_size=8)
    assert refused.value.code == "invalid-parallelism" and "MLP width 3420" in refused.value.message
    assert _plan_config(tmp_path, name, tensor_parallel_size=4).weights_bytes > 0
    assert _plan_config(tmp_path, name, tensor_parallel_size=8, mm_encoder_tp_mode="data")


def test_lighton_ocr_tower_by_hand():
    # LightOnOcrConfig's Pixtral (mistral3.py's init_vision_tower_for_mistral3, all 24 layers at
    # vision_feature_layer -1): per layer 4 × 1,024² + 3 × 1,024 × 4,096 + 2 × 1,024 = 16,779,264;
    # the unbiased 3 × 14² patch convolution (602,112, whole on every rank) and ln_pre; Mistral 3's
    # projector: RMSNorm, the 2 × 2 patch merger 4,096 → 1,024, linear_1/linear_2 1,024² without
    # bias: 409,597,952 in all; and its axial RoPE's two fp32 inv_freq buffers, 2 × 32 × 4 = 256 B
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--lighton-ocr-mistral3-keys.json").weights.vision
    hv, inter = 1024, 4096
    layer = 4 * hv * hv + 3 * hv * inter + 2 * hv
    tower = 24 * layer + 3 * 14 * 14 * hv + hv + hv + 4 * hv * hv + 2 * hv * hv
    assert (layer, tower) == (16_779_264, 409_597_952)
    assert (v.family, v.num_layers, v.head_dim) == ("pixtral", 24, 64)
    assert sum(t.numel for t in vision_tensors(v)) == tower


def test_multimodal_top_level_tie_word_embeddings_wins():
    # vLLM's VllmConfig.with_hf_config gives the language model the top-level
    # tie_word_embeddings: LightOnOcrConfig says true, its text_config false, and vLLM ties the
    # Qwen3 lm_head (no 151,936 × 1,024 bf16 copy: 311,164,928 B; the meta build, recorded)
    name = "synthetic--lighton-ocr-mistral3-keys.json"
    config = DATA["models"][name]["config"]
    assert config["tie_word_embeddings"] and not config["text_config"]["tie_word_embeddings"]
    tied = weight_bytes(_model(name), tensor_parallel_size=1)
    untied = weight_bytes(parse_config(dict(config, tie_word_embeddings=False), name="untied"),
                          tensor_parallel_size=1)  # fmt: skip
    assert untied.weights_bytes_per_gpu - tied.weights_bytes_per_gpu == 151936 * 1024 * 2


def test_lfm2_vl_tower_by_hand():
    # Lfm2VlConfig's SigLIP2 (lfm2_siglip2.py, every layer and the post-LayerNorm; the config with
    # the block_dim vLLM's lfm2.py reads): per layer
    # 4 × (768² + 768) + 2 × 768 × 3,072 + 3,072 + 768 + 4 × 768 = 7,087,872, 12 layers; the
    # biased linear patch embedding 3 × 16² → 768 and 256 position rows (num_patches): 85,843,200.
    # The projector after the 2 × 2 pixel shuffle (3,072 wide): its LayerNorm, linear_1 → 2,560 and
    # linear_2 → 2,560 (the text width), biased, whole on every rank: 14,429,184
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--lfm2-vl-block-dim.json").weights.vision
    hv, inter, shuffled, inner, h = 768, 3072, 3072, 2560, 2560
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 16 * 16 * hv + hv + 256 * hv + 12 * layer + 2 * hv
    projector = 2 * shuffled + inner * shuffled + inner + h * inner + h
    assert (layer, tower, projector) == (7_087_872, 85_843_200, 14_429_184)
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector


def test_lfm2_vl_conv_state_is_the_text_width():
    # lfm2_vl.py get_mamba_state_shape_from_config: short_conv_state_shape(intermediate_size=
    # text hidden_size): (conv_L_cache − 1, 2,048) per conv layer, whatever conv_dim says; a
    # text_config with conv layers and no conv_dim (Lfm2Config's) fails in lfm2.py: refused
    from kvcalc.model.recurrent_layouts import ShortConvState

    name = "synthetic--lfm2-vl-hybrid.json"
    config = DATA["models"][name]["config"]
    narrow = dict(config, text_config=dict(config["text_config"], conv_dim=1024))
    convs = [x for x in parse_config(narrow, name="narrow").layers if isinstance(x, ShortConvState)]
    assert len(convs) == 10 and {(c.conv_kernel, c.conv_dim) for c in convs} == {(3, 2048)}
    text = {k: v for k, v in config["text_config"].items() if k != "conv_dim"}
    with pytest.raises(KvcalcError) as refused:
        parse_config(dict(config, text_config=text), name="no-conv-dim")
    assert refused.value.code == "config-invalid" and "conv_dim" in refused.value.message
    with pytest.raises(KvcalcError) as refused:  # Lfm2VlConfig() itself: no block_dim (recorded)
        _model("synthetic--lfm2-vl-defaults.json")
    assert refused.value.code == "config-invalid" and "block_dim" in refused.value.message


def test_internvl_tower_by_hand():
    # InternVLConfig's tower (interns1_vit.py, all 24 layers of 1,024): per layer q/k/v
    # nn.Linears without bias 3 × 1,024², the biased projection_layer, fc1/fc2
    # 2 × 1,024 × 4,096 + 4,096 + 1,024, two LayerNorms 4 × 1,024 and the two layer-scale vectors:
    # 12,595,200; the class token, the biased 3 × 14² patch convolution, 32² + 1 = 1,025 position
    # rows (448 / 14 per side), no final LayerNorm (use_mean_pooling): 303,938,560. The projector
    # on 1,024 × (1 / 0.5)² = 4,096: its LayerNorm, linear_1 → 4,096, linear_2: 33,570,816
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--internvl-defaults.json").weights.vision
    hv, inter, h = 1024, 4096, 4096
    layer = 4 * hv * hv + hv + 2 * hv * inter + inter + hv + 4 * hv + 2 * hv
    tower = hv + 3 * 14 * 14 * hv + hv + 1025 * hv + 24 * layer
    projector = 2 * 4 * hv + h * 4 * hv + h + h * h + h
    assert (layer, tower, projector) == (12_595_200, 303_938_560, 33_570_816)
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector


def test_paligemma_tower_by_hand():
    # PaliGemmaConfig's SigLIP at 224 px, patch 14 (256 positions), 27 layers of 1,152, all built
    # (SiglipVisionModel: the post-LayerNorm): per layer 4 × (1,152² + 1,152) + 2 × 1,152 × 4,096
    # + 4,096 + 1,152 + 4 × 1,152 = 14,760,064; the biased 3 × 14² convolution, 256 position rows,
    # the post-LayerNorm: 399,497,472; the projector, one biased nn.Linear 1,152 → 2,048
    # (projection_dim): 2,361,344; the int64 position_ids 256 × 8 B and Gemma's bf16 normalizer
    # scalar (2 B) are the buffers beside them
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--paligemma-defaults.json").weights.vision
    hv, inter = 1152, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 14 * 14 * hv + hv + 256 * hv + 27 * layer + 2 * hv
    assert (layer, tower, 2048 * hv + 2048) == (14_760_064, 399_497_472, 2_361_344)
    assert sum(t.numel for t in vision_tensors(v)) == tower + 2048 * hv + 2048


def test_qianfan_ocr_intern_vit_by_hand():
    # QianfanOCRConfig's InternViT (intern_vit.py) with select_layer -1: all 24 layers of 1,024;
    # per layer the biased fused qkv 3 × (1,024² + 1,024), the biased proj 1,024² + 1,024, fc1/fc2
    # 2 × 1,024 × 4,096 + 4,096 + 1,024, two LayerNorms 4 × 1,024, ls1/ls2 2 × 1,024: 12,598,272;
    # the class embedding, the biased 3 × 14² patch convolution, (448 / 14)² + 1 = 1,025 positions,
    # no final norm: 304,012,288. mlp1 on 1,024 × (1 / 0.5)² = 4,096 into Qwen3's 4,096: its
    # LayerNorm 2 × 4,096, two biased nn.Linears 2 × (4,096² + 4,096): 33,570,816
    from kvcalc.estimate.vision_tensors import vision_tensors

    hv, inter, h = 1024, 4096, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv + 2 * hv
    tower = hv + 3 * 14 * 14 * hv + hv + 1025 * hv + 24 * layer
    projector = 2 * 4 * hv + 2 * (h * h + h)
    assert (layer, tower, projector) == (12_598_272, 304_012_288, 33_570_816)
    v = _model("synthetic--qianfan-ocr-internvl-keys.json").weights.vision
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector
    # select_layer -4 builds 21 layers; use_qk_norm adds two 1,024 RMSNorms per layer, rms_norm
    # drops the two norm biases, attention_bias false the 3 × 1,024 qkv bias: 12,595,200 each
    v = _model("synthetic--qianfan-ocr-qk-norm-rms.json").weights.vision
    mutant = layer + 2 * hv - 2 * hv - 3 * hv
    assert sum(t.numel for t in vision_tensors(v)) == tower - 24 * layer + 21 * mutant + projector


def test_intern_vit_heads_not_dividing_tp_build_the_attention_whole(tmp_path):
    # intern_vit.py: heads not dividing TP make vLLM build the tower's attention (qkv, proj) whole
    # on every rank, its MLP still split (recorded: the 25-head tower of
    # synthetic--internvl-chat-vit6b-style-qwen3.json at TP 2 and 8, multimodal_weights_internvl
    # .json); fc1's ColumnParallelLinear asserts its width % TP (vLLM fails)
    from kvcalc.estimate.vision_tensors import vision_tensors
    from kvcalc.planning.api import plan_reference
    from kvcalc.planning.inputs import PlanInputs

    config = json.loads(json.dumps(DATA["models"]["synthetic--qianfan-ocr-internvl-keys.json"]))
    config = config["config"]
    config["vision_config"]["num_attention_heads"] = 8
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    plan = plan_reference(str(path), PlanInputs(gpu="H200", max_model_len=4096,
                                                tensor_parallel_size=16), with_suggestions=False)  # fmt: skip
    assert plan.weights_bytes > 0
    tensors = {t.name: t for t in vision_tensors(parse_config(config, name="m").weights.vision)}
    hv = config["vision_config"]["hidden_size"]  # 1,024: the fused qkv 3,072 rows whole at TP 16
    assert tensors["vision_model.encoder.layers.0.attn.qkv"].shape_per_rank(16) == (3 * hv, hv)
    assert tensors["vision_model.encoder.layers.0.attn.qkv"].shape_per_rank(8) == (3 * hv // 8, hv)
    assert tensors["vision_model.encoder.layers.0.attn.proj"].shape_per_rank(16) == (hv, hv)
    config["vision_config"]["intermediate_size"] = 4104  # not a multiple of 16
    path.write_text(json.dumps(config))
    with pytest.raises(KvcalcError) as refused:
        plan_reference(str(path), PlanInputs(gpu="H200", max_model_len=4096,
                                             tensor_parallel_size=16), with_suggestions=False)  # fmt: skip
    assert refused.value.code == "invalid-parallelism" and "MLP width 4104" in refused.value.message


def test_paddleocr_vl_tower_by_hand():
    # PaddleOCRVLConfig's tower (paddleocr_vl.py SiglipVisionModel): 27 layers of 1,152, each the
    # biased fused qkv and out_proj 4 × (1,152² + 1,152), fc1/fc2 2 × 1,152 × 4,304 + 4,304 + 1,152,
    # two LayerNorms 4 × 1,152: 15,239,504; the biased 3 × 14² patch convolution, (384 / 14)² = 729
    # position rows, the post-LayerNorm: 412,987,248. mlp_AR: its LayerNorm on 1,152, linear_1
    # 4,608 → 4,608 and linear_2 → ERNIE's 1,024, biased: 25,960,192. Buffers: 729 int64
    # position_ids (5,832 B, recorded) and the 2D RoPE's inv_freq, 72 / 4 = 18 fp32 (72 B)
    from kvcalc.estimate.vision_tensors import vision_tensors
    from kvcalc.estimate.weights import _vision_rope_bytes

    hv, inter, h = 1152, 4304, 1024
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 14 * 14 * hv + hv + 729 * hv + 27 * layer + 2 * hv
    projector = 2 * hv + (4 * hv) ** 2 + 4 * hv + h * 4 * hv + h
    assert (layer, tower, projector) == (15_239_504, 412_987_248, 25_960_192)
    model = _model("synthetic--paddleocr-vl-defaults.json")
    assert sum(t.numel for t in vision_tensors(model.weights.vision)) == tower + projector
    assert _vision_rope_bytes(model.weights, 2) == 729 * 8 + 18 * 4


def test_minicpmv_tower_and_mergers_by_hand():
    # MiniCPMV4_6Config's tower (Idefics2VisionTransformer): 12 layers of 768, each 4 × (768² +
    # 768) + 2 × 768 × 3,072 + 3,072 + 768 + 4 × 768 = 7,087,872; the biased 3 × 16² convolution,
    # (224 / 16)² = 196 positions, the post-LayerNorm: 85,797,120. vit_merger: the window
    # attention's biased qkv and out_proj 4 × (768² + 768), its LayerNorm 2 × 768, the 2 × 2
    # window's LayerNorm 2 × 3,072 and biased 3,072 → 12,288 → 768: 49,569,024. merger: a
    # LayerNorm 2 × 3,072 and biased 3,072 → 3,072 → 4,096: 22,033,408. 4.7's class builds the
    # same; 4.6 with drop_vision_last_layer one layer fewer
    from kvcalc.estimate.vision_tensors import vision_tensors

    hv, inter, h = 768, 3072, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 16 * 16 * hv + hv + 196 * hv + 12 * layer + 2 * hv
    window = 4 * (hv * hv + hv) + 2 * hv + 2 * 4 * hv + 4 * hv * 4 * inter + 4 * inter
    window += 4 * inter * hv + hv
    merger = 2 * 4 * hv + (4 * hv) ** 2 + 4 * hv + h * 4 * hv + h
    assert (layer, tower, window, merger) == (7_087_872, 85_797_120, 49_569_024, 22_033_408)
    for name, drop in [("synthetic--minicpmv4-6-defaults.json", 0),
                       ("synthetic--minicpmv4-7-defaults.json", 0),
                       ("synthetic--minicpmv4-6-drop-last-layer.json", 1)]:  # fmt: skip
        v = _model(name).weights.vision
        assert sum(t.numel for t in vision_tensors(v)) == tower - drop * layer + window + merger


def test_step3_vl_tower_and_downsamplers_by_hand():
    # Step3VLConfig's tower (step3_vl.py): 63 layers of 1,792, each 4 × (1,792² + 1,792) + 2 ×
    # 1,792 × 3,072 + 3,072 + 1,792 + 4 × 1,792 = 23,874,304; the class embedding, the biased
    # 3 × 14² convolution, (728 / 14)² + 1 = 2,705 positions: 1,509,985,792. The biased 2 × 2
    # convolution 1,792 → 4,096, the 3 × 3 one 4,096 → 8,192 and the biased projector 8,192 → 7,168
    # (projector_bias): 390,089,728. Buffer: 2,705 int64 position_ids
    from kvcalc.estimate.vision_tensors import vision_tensors
    from kvcalc.estimate.weights import _vision_rope_bytes

    hv, inter, out, h = 1792, 3072, 4096, 7168
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = hv + 3 * 14 * 14 * hv + hv + 2705 * hv + 63 * layer
    rest = out * hv * 4 + out + 2 * out * out * 9 + 2 * out + h * 2 * out + h
    assert (layer, tower, rest) == (23_874_304, 1_509_985_792, 390_089_728)
    model = _model("synthetic--step3-vl-moe-layers-string.json")
    assert sum(t.numel for t in vision_tensors(model.weights.vision)) == tower + rest
    assert _vision_rope_bytes(model.weights, 2) == 2705 * 8


def test_blip2_tower_and_qformer_by_hand():
    # Blip2Config's tower (blip.py BlipVisionModel, every layer so the post-LayerNorm): 39 layers of
    # 1,408, each the biased qkv and projection 4 × (1,408² + 1,408), fc1/fc2 2 × 1,408 × 6,144 +
    # 6,144 + 1,408, two LayerNorms 4 × 1,408: 25,250,176; the class embedding, the biased 3 × 14²
    # convolution, (224 / 14)² + 1 = 257 positions: 985,952,256. 32 query tokens of 768. The
    # Q-Former's embedding LayerNorm and 12 layers of 768 (self-attention 4 × (768² + 768) with its
    # LayerNorm; the query MLP 768 → 3,072 → 768 with its LayerNorm), a cross-attention on layers
    # 0, 2, ..., 10 (cross_attention_frequency 2: key/value from 1,408): 105,137,664. The biased
    # language_projection 768 → OPT's 768: 590,592
    from kvcalc.estimate.vision_tensors import vision_tensors

    hv, inter, qh, qi, h = 1408, 6144, 768, 3072, 768
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = hv + 3 * 14 * 14 * hv + hv + 257 * hv + 39 * layer + 2 * hv
    self_attention = 4 * (qh * qh + qh) + 2 * qh
    cross = 2 * (qh * qh + qh) + 2 * (hv * qh + qh) + 2 * qh
    mlp = qh * qi + qi + qi * qh + qh + 2 * qh
    qformer = 2 * qh + 12 * (self_attention + mlp) + 6 * cross
    assert (layer, tower, qformer) == (25_250_176, 985_952_256, 105_137_664)
    v = _model("synthetic--blip2-defaults.json").weights.vision
    assert sum(t.numel for t in vision_tensors(v)) == tower + 32 * qh + qformer + h * qh + h


def test_kimi_vl_moonvit_by_hand():
    # KimiVLConfig's MoonViT (moonvit.py): 27 layers of 1,152, each the biased wqkv and wo
    # 4 × (1,152² + 1,152), fc0/fc1 2 × 1,152 × 4,304 + 4,304 + 1,152, two LayerNorms 4 × 1,152:
    # 15,239,504; the biased 3 × 14² patch convolution, the 64 × 64 learned position table, the
    # final LayerNorm: 416,866,032. The projector: a LayerNorm on 1,152, linear_1 4,608 → 4,608
    # and linear_2 → the text's 4,096, biased: 40,119,040
    from kvcalc.estimate.vision_tensors import vision_tensors

    hv, inter, h = 1152, 4304, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 14 * 14 * hv + hv + 64 * 64 * hv + 27 * layer + 2 * hv
    projector = 2 * hv + (4 * hv) ** 2 + 4 * hv + h * 4 * hv + h
    assert (layer, tower, projector) == (15_239_504, 416_866_032, 40_119_040)
    v = _model("synthetic--kimi-vl-moe-1408.json").weights.vision
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector


def test_kimi_vl_shared_experts_over_tp():
    # deepseek_v2.py's shared experts (DeepseekV2MLP: a MergedColumnParallelLinear) are
    # moe_intermediate_size × n_shared_experts wide: KimiVLConfig's 1,407 × 2 = 2,814 fails at
    # TP 8 (recorded), 1,408 × 2 = 2,816 builds (recorded)
    # checked where vLLM builds them: after the first layer's attention (recorded on the A100:
    # an fp8 cache fails TRITON_MLA before them, registry_a100_b200_sweep.json)
    from kvcalc.engines.vllm.setup import check_shared_experts

    with pytest.raises(KvcalcError) as refused:
        check_shared_experts(_model("synthetic--kimi-vl-grouped-topk.json"), 8)
    assert refused.value.code == "invalid-parallelism" and "2814" in refused.value.message
    check_shared_experts(_model("synthetic--kimi-vl-moe-1408.json"), 8)


def test_glm4v_9b_eva2clip_by_hand():
    # GLM-4V's tower (glm4v.py EVA2CLIPModel) on a GLM-4V-9B-type vision_config: 63 layers of 1,792,
    # each the biased query_key_value and dense 4 × (1,792² + 1,792), fc1/fc2 2 × 1,792 × 15,360 +
    # 15,360 + 1,792, two LayerNorms 4 × 1,792: 67,926,784; the biased 3 × 14² convolution, the
    # class embedding, 6,401 positions: 4,291,915,264. The biased 2 × 2 convolution 1,792 → 4,096,
    # the GLU (an unbiased 4,096², its LayerNorm, the unbiased gate/up 2 × 13,696 and down
    # projections) and boi/eoi: 214,454,272
    from kvcalc.estimate.vision_tensors import vision_tensors

    hv, inter, h, ffn = 1792, 15360, 4096, 13696
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 3 * 14 * 14 * hv + hv + hv + 6401 * hv + 63 * layer
    rest = h * hv * 4 + h + h * h + 2 * h + 2 * ffn * h + ffn * h + 2 * h
    assert (layer, tower, rest) == (67_926_784, 4_291_915_264, 214_454_272)
    v = _model("synthetic--glm4v-9b-untied.json").weights.vision
    assert sum(t.numel for t in vision_tensors(v)) == tower + rest


def test_glm4v_9b_tower_is_built_whatever_the_limits(tmp_path):
    # glm4v.py builds its EVA2CLIP tower outside _mark_tower_model: image and video limited to 0
    # leave it in (the weights do not change)
    name = "synthetic--glm4v-9b-untied.json"
    plan = _plan_config(tmp_path, name, max_model_len=2048)
    off = _plan_config(tmp_path, name, max_model_len=2048,
                       limit_mm_per_prompt='{"image": 0, "video": 0}')  # fmt: skip
    assert off.weights_bytes == plan.weights_bytes


def test_qwen2_audio_tower_by_hand():
    # Qwen2AudioConfig's encoder (transformers' Qwen2AudioEncoder, built by qwen2_audio.py): the
    # biased convolutions 128 → 1,280 and 1,280 → 1,280 (kernel 3), 1,500 learned positions; 32
    # layers, each q/v/out_proj with biases and an unbiased k_proj 4 × 1,280² + 3 × 1,280, fc1/fc2
    # 2 × 1,280 × 5,120 + 5,120 + 1,280, two LayerNorms 4 × 1,280: 19,676,160; the final
    # LayerNorm: 636,968,960. The projector 1,280 → Qwen2's 4,096, biased: 5,246,976. Limited to
    # {"audio": 0} it is not built (vLLM's meta build: 1,284,431,872 B fewer, recorded)
    from kvcalc.estimate.vision_tensors import vision_tensors

    d, mel, ffn, h = 1280, 128, 5120, 4096
    layer = 4 * d * d + 3 * d + 2 * d * ffn + ffn + d + 4 * d
    tower = d * mel * 3 + d + d * d * 3 + d + 1500 * d + 32 * layer + 2 * d
    assert (layer, tower, h * d + h) == (19_676_160, 636_968_960, 5_246_976)
    v = _model("synthetic--qwen2-audio-defaults.json").weights.vision
    assert sum(t.numel for t in vision_tensors(v)) == tower + h * d + h


def test_hyperclovax_vision_v2_tower_by_hand():
    # HyperCLOVAXVisionV2Config()'s tower as hyperclovax_vision_v2.py builds it: Qwen2.5-VL's
    # (qwen2_5_vl_vision defaults: 3,584 wide, 32 blocks, 16 heads, MLP 3,420) — the unbiased
    # 3 × 2 × 14² patch embedding (4,214,784); per block two RMSNorms, the biased qkv
    # 3 × (3,584² + 3,584), proj 3,584² + 3,584, the biased gated MLP 2 × (3,420 × 3,584 + 3,420)
    # + 3,584 × 3,420 + 3,584: 88,183,992; the merger's RMSNorm and 14,336 → 14,336 → 3,584 MLP:
    # 256,922,624 — then mm_projector, nn.Linear(3,584, 4,096) with its bias: 14,684,160.
    # 3,097,709,312 parameters, 6,195,418,624 B, and the vision RoPE's 8,192 × 224 / 2 × 2 B
    # = 1,835,008 B: 6,197,253,632 B, vLLM's TP-1 build less its build with image and video 0
    # (19,412,989,952 − 13,215,736,320, multimodal_weights_5.json)
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--hyperclovax-vision-v2-defaults.json").weights.vision
    hv, inter, merged, text = 3584, 3420, 3584 * 4, 4096
    block = 2 * hv + 3 * (hv * hv + hv) + (hv * hv + hv) + 3 * inter * hv + 2 * inter + hv
    merger = hv + merged * merged + merged + hv * merged + hv
    assert (block, merger) == (88_183_992, 256_922_624)
    params = sum(t.numel for t in vision_tensors(v))
    assert params == 3 * 2 * 14 * 14 * hv + 32 * block + merger + text * hv + text
    assert params == 3_097_709_312
    on = [r for r in WEIGHTS["records"] if r["model"] == "synthetic--hyperclovax-vision-v2-defaults.json"
          and r["tensor_parallel_size"] == 1]  # fmt: skip
    full, off = sorted(r["target_param_bytes_per_rank"] for r in on)[::-1]
    assert full - off == 2 * params + 8192 * 224 // 2 * 2


def test_hyperclovax_vision_v2_other_text_models_refused(tmp_path):
    # vLLM builds text_config as whatever model it registers (llama and gpt2 included); only the
    # hyperclovax one was recorded
    config = json.loads(
        json.dumps(DATA["models"]["synthetic--hyperclovax-vision-v2-defaults.json"]["config"])
    )
    config["text_config"]["model_type"] = "llama"
    with pytest.raises(KvcalcError) as err:
        parse_config(config, name="hcx-llama")
    assert err.value.code == "config-unverified"
    assert "text_config.model_type 'llama'" in str(err.value)


def test_qwen2_5_omni_audio_encoder_by_hand():
    # Qwen2_5OmniAudioConfig's defaults, transformers' Qwen2_5OmniAudioEncoder: convolutions
    # 1,280 × 128 × 3 + 1,280 and 1,280 × 1,280 × 3 + 1,280; per layer q, v, out 1,280² + 1,280,
    # k 1,280², two LayerNorms 4 × 1,280, fc1 5,120 × 1,280 + 5,120, fc2 1,280 × 5,120 + 1,280:
    # 19,676,160, 32 layers; ln_post 2 × 1,280, proj 3,584 × 1,280 + 3,584, the bos/eos rows
    # 2 × 3,584: 639,647,232 (transformers' meta build), and the fp32 sinusoids 1,500 × 1,280 × 4
    # = 7,680,000 B (vLLM's meta build: float32 7,680,448 B with the 28 text layers' 16-B scales)
    from kvcalc.estimate.aud2_tensors import qwen2_5_omni_audio_tensors, tower_buffer_bytes
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model(OMNI).weights.vision
    d, ffn, out = 1280, 5120, 3584
    layer = 3 * (d * d + d) + d * d + 4 * d + ffn * d + ffn + d * ffn + d
    assert layer == 19_676_160
    audio = d * 128 * 3 + d + d * d * 3 + d + 32 * layer + 2 * d + out * d + out + 2 * out
    assert audio == 639_647_232
    assert v.companion is not None
    assert sum(t.numel for t in qwen2_5_omni_audio_tensors(v.companion)) == audio
    tensors = [t for t in vision_tensors(v) if t.name.startswith("audio_tower")]
    assert sum(t.numel for t in tensors) == audio and {t.split for t in tensors} == {"replicated"}
    assert tower_buffer_bytes(v.companion) == 1500 * 1280 * 4


def test_muse_glimmer_vision_encoder_by_hand():
    # MuseGlimmerConfig()'s encoder as muse_glimmer.py builds it: conv1_linear 2 × 3 × 14² → 1,536
    # unbiased (1,806,336), the 32 × 32 position rows (1,572,864), ln_pre; per block two
    # LayerNorms, the biased qkv 3 × (1,536² + 1,536) and o_proj 1,536² + 1,536, the biased MLP
    # 2 × 8,960 × 1,536 + 8,960 + 1,536: 36,985,088, 50 blocks; ln_post; the adapter 6,144 → 4,096
    # → 4,096 and the projection 4,096 → 6,656, unbiased: 69,206,016 — 1,921,845,760 parameters,
    # the 3,843,691,520 B vLLM's build loses with image and video 0 (59,586,808,640 − 55,743,117,120)
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--muse-glimmer-defaults.json").weights.vision
    h, inter = 1536, 8960
    block = 4 * h + 4 * (h * h + h) + 2 * inter * h + inter + h
    adapter = 6144 * 4096 + 4096 * 4096 + 4096 * 6656
    assert (block, adapter) == (36_985_088, 69_206_016)
    tower = 2 * 3 * 14 * 14 * h + 32 * 32 * h + 2 * h + 50 * block + 2 * h + adapter
    assert sum(t.numel for t in vision_tensors(v)) == tower == 1_921_845_760
    tp1 = [r["target_param_bytes_per_rank"] for r in WEIGHTS["records"]
           if r["model"] == "synthetic--muse-glimmer-defaults.json" and r["tensor_parallel_size"] == 1]  # fmt: skip
    assert max(tp1) - min(tp1) == 2 * tower


def test_qwen3_omni_moe_towers_are_qwen3_vls_and_qwen3_asrs():
    # qwen3_omni_moe_thinker.py: Qwen3Omni_VisionTransformer (Qwen3-VL's blocks and DeepStack
    # mergers, a position table of (768 / 16)² = 2,304 rows) and Qwen3OmniMoeAudioEncoder, the
    # encoder Qwen3-ASR builds (aud2: its tensors and fp32 sinusoids). vLLM's meta build without
    # the audio encoder is 1,303,534,336 B lighter (63,462,410,208 − 62,158,875,872)
    from kvcalc.estimate.weights import weight_bytes

    name = "synthetic--qwen3-omni-moe-48-layers-head-dim-128.json"
    v = _model(name).weights.vision
    assert (v.family, v.num_positions, v.deepstack_layers) == ("qwen3_omni", 2304, 3)
    assert v.companion is not None and v.companion.family == "qwen3_asr"
    tp1 = {json.dumps(r.get("engine_args")): r["target_param_bytes_per_rank"]
           for r in WEIGHTS["records"] if r["model"] == name and r["tensor_parallel_size"] == 1}  # fmt: skip
    audio = tp1["null"] - tp1[json.dumps({"limit_mm_per_prompt": {"audio": 0}})]
    assert weight_bytes(_model(name), tensor_parallel_size=1).companion_bytes_per_gpu == audio
    assert audio == 1_303_534_336


def test_aria_tower_and_projector_by_hand():
    # AriaConfig()'s tower (idefics3_vision: 1,152 wide, 12 layers, MLP 3,072, 32-pixel patches
    # over 224: 49 positions): the biased patch convolution 1,152 × 3 × 32² + 1,152 (3,540,096),
    # 49 × 1,152 position rows (56,448), per layer the biased qkv and out_proj 4 × (1,152² +
    # 1,152), fc1/fc2 2 × 3,072 × 1,152 + 3,072 + 1,152, two LayerNorms 4 × 1,152: 12,399,744 per
    # layer; no post-LayerNorm. The projector: 256 × 1,152 queries (294,912), unbiased q/k/v
    # 3 × 1,152², the MultiheadAttention's in_proj 3 × (1,152² + 1,152) and out_proj 1,152² +
    # 1,152, the biased linear 1,152² + 1,152, three LayerNorms 6 × 1,152, the feed-forward
    # 4,096 × 1,152 + 4,096²: 184,813,696 parameters, the 369,627,392 B vLLM's build loses with
    # image 0 (37,404,291,840 − 37,034,664,448)
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--aria-defaults.json").weights.vision
    hv, inter, text = 1152, 3072, 4096
    layer = 4 * (hv * hv + hv) + 2 * inter * hv + inter + hv + 4 * hv
    assert layer == 12_399_744
    tower = hv * 3 * 32 * 32 + hv + 49 * hv + 12 * layer
    projector = 256 * hv + 3 * hv * hv + 3 * (hv * hv + hv) + (hv * hv + hv) + (hv * hv + hv)
    projector += 6 * hv + text * hv + text * text
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector == 184_813_696


def test_cosmos3_edge_text_weights_by_hand():
    # Cosmos3EdgeConfig()'s text model as cosmos3_edge.py rebuilds it (Nemotron-H attention/MLP
    # pairs): per pair q 2,048 × 2,048, k and v 2 × 1,024 × 2,048, o 2,048², the relu2 MLP
    # 2 × 9,216 × 2,048 (no gate), two RMSNorms: 50,335,744; 28 pairs, the final norm, the
    # 131,072 × 2,048 embedding and untied head: 1,946,273,792 parameters; with the MRoPE cache
    # (131,072 × 4 × 128 × 2 B) and the fp32 scales, vLLM's build with image and video 0
    # (4,026,765,760 B)
    from kvcalc.estimate.weights import weight_bytes

    m = _model("synthetic--cosmos3-edge-defaults.json")
    h, kv, inter = 2048, 8 * 128, 9216
    pair = h * h + 2 * kv * h + h * h + 2 * inter * h + 2 * h
    assert pair == 50_335_744
    text = 28 * pair + h + 2 * 131072 * h
    w = weight_bytes(m, tensor_parallel_size=1)
    assert 2 * text + 131072 * 4 * 128 * 2 + 28 * 16 == 4_026_765_760
    assert (
        w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu - w.vision_bytes_per_gpu == 4_026_765_760
    )


def test_cosmos3_edge_class_defaults_where_config_json_omits_them():
    # Cosmos3EdgeTextConfig fills num_key_value_heads 8 and head_dim 128 whatever the query heads
    # (not one KV head per query head): the recorded config without them plans the same blocks
    name = "synthetic--cosmos3-edge-defaults.json"
    config = json.loads(json.dumps(DATA["models"][name]["config"]))
    del config["text_config"]["num_key_value_heads"], config["text_config"]["head_dim"]
    trimmed = {"models": {name: {**DATA["models"][name], "config": config}}}
    for row in DATA["models"][name]["scenarios"]:
        p = harness_plan(trimmed, name, row)
        assert (p.num_blocks, p.kv_cache_tokens) == (row["num_blocks"], row["kv_cache_tokens"])
    # and the weights vLLM's meta build has for the recorded config, k/v projections included
    (rec,) = [r for r in WEIGHTS["records"]
              if r["model"] == name and r["tensor_parallel_size"] == 1 and not r.get("engine_args")]  # fmt: skip
    w = weight_bytes(parse_config(config, name=name), tensor_parallel_size=1)
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == rec["target_param_bytes_per_rank"]


@pytest.mark.parametrize(("pp", "refused"), [(2, False), (3, True), (4, False), (8, True)])
def test_cosmos3_edge_pipeline_split_is_vllms_or_refused(pp, refused):
    # vLLM's get_pp_indices splits 56 modules (28 attention/MLP pairs, even indices attention):
    # at PP 3 into 19, 19, 18 modules — 10, 9, 9 attention modules, the embedding on the first —
    # where kvcalc's split of 28 layers is 9, 10, 9; at PP 2 and 4 (dividing 28) both are equal
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    request = EngineRequest(model=_model("synthetic--cosmos3-edge-defaults.json"),
                            max_model_len=4096, available_kv_bytes=20 << 30,
                            pipeline_parallel_size=pp)  # fmt: skip
    if not refused:
        assert get_engine("vllm").plan_kv_cache(request).num_blocks > 0
        return
    with pytest.raises(KvcalcError) as caught:
        get_engine("vllm").plan_kv_cache(request)
    assert caught.value.code == "unsupported-parallelism"


def test_nvlm_d_padding_heads_and_mlp1_by_hand():
    # nvlm_d.py: InternViT with num_dummy_heads=7 — 25 + 7 = 32 heads of 800 / 25 = 32 wide, so
    # every attention tensor is 1,024 wide: qkv 3 · 1,024 × 800 (no bias), proj 800 × 1,024 + 800,
    # the q/k RMSNorms 2 × 1,024; mlp1 through the text model's 2,816: 3,200 × 2 (LayerNorm on
    # 800 · 2²) + 3,200 × 2,816 + 2,816 × 1,024, no biases
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--nvlm-d-internvit6b-style.json").weights.vision
    assert (v.num_heads, v.dummy_heads, v.projector_output_dim) == (25, 7, 2816)
    t = {x.name: x for x in vision_tensors(v)}
    layer = "vision_model.encoder.layers.0.attn"
    assert (t[f"{layer}.qkv"].rows, t[f"{layer}.qkv"].cols) == (3 * 1024, 800)
    assert f"{layer}.qkv.bias" not in t
    assert (t[f"{layer}.proj"].rows, t[f"{layer}.proj"].cols) == (800, 1024)
    assert t[f"{layer}.qk_norm"].numel == 2 * 1024
    assert t[f"{layer}.qkv"].shape_per_rank(8) == (3 * 1024 // 8, 800)  # 32 heads split at TP 8
    mlp1 = sum(x.numel for n, x in t.items() if n.startswith("mlp1"))
    assert mlp1 == 3200 * 2 + 3200 * 2816 + 2816 * 1024


@pytest.mark.parametrize(
    ("name", "tower"),
    [
        ("OpenGVLab--InternVL3-1B.json", "intern_vit_6b"),
        ("synthetic--nvlm-d-internvit6b-style.json", "intern_vit_6b"),
    ],
)
def test_a_tower_of_another_kind_is_refused(name, tower):
    config = json.loads(json.dumps(DATA["models"][name]["config"]))
    config["vision_config"]["model_type"] = "siglip_vision_model"
    with pytest.raises(KvcalcError) as refused:
        weight_bytes(parse_config(config, name=name), tensor_parallel_size=1)
    # the weights are refused (not counted), naming the tower kvcalc counts for this model
    assert refused.value.code == "weights-unknown" and tower in refused.value.message
