"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of Alpamayo 2 Super (``Alpamayo2Super``)
and BAGEL (``BagelForConditionalGeneration``): the text decoder's KV cache and the towers' weights.

``fixtures/vllm_0_33/registry_multimodal_mmmla.json`` was recorded with the vLLM reference harness
over auto/fp8 × TP 1/8 × 4,096/32,768 tokens × 20 GiB per GPU, for vLLM 0.33's config-class
defaults and mutants of them (each model's ``source`` says which): block size, blocks, tokens,
concurrency, every group and the capacity line equal, every refusal refused for vLLM's reason.
``multimodal_weights_mmmla.json`` holds vLLM's own meta build of the same configs through
``deploy_probe.py``: parameters and buffers of one TP rank, tower included, which kvcalc's weights
per rank (and buffers) must equal to the byte; with ``--mm-encoder-tp-mode data`` and
``--limit-mm-per-prompt`` 0 as planned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_sized, harness_cases, harness_plan, refusal_class

from kvcalc.estimate.weights import weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_0_33"
DATA = json.loads((FIXTURES / "registry_multimodal_mmmla.json").read_text())
WEIGHTS = json.loads((FIXTURES / "multimodal_weights_mmmla.json").read_text())
CASES = harness_cases(DATA)
#: vLLM's error texts → the class both sides are mapped to
VLLM_REASONS = {
    "is not divisible by": "parallelism",  # the vision attention's dist_utils.divide: its heads
}
KVCALC_CODES = {"invalid-parallelism": "parallelism"}
KINDS = {"full_attention": LayerKind.FULL}


def _model(name: str):
    return parse_config(DATA["models"][name]["config"], name=name)


def test_every_architecture_is_recorded():
    archs = {m["config"]["architectures"][0] for m in DATA["models"].values()}
    assert archs == {"Alpamayo2Super", "BagelForConditionalGeneration"}
    grid = {(d, t, n) for d in ("auto", "fp8") for t in (1, 8) for n in (4096, 32768)}
    for name, model in DATA["models"].items():
        assert model["source"], name
        ids = {(r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"])
               for r in model["scenarios"]}  # fmt: skip
        assert grid <= ids, name


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if "error" in row:
        want = {c for marker, c in VLLM_REASONS.items() if marker in row["error"]}
        assert len(want) == 1, row["error"]
        assert refusal_class(lambda: harness_plan(DATA, name, row), KVCALC_CODES) == want.pop()
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


@pytest.mark.parametrize(
    "rec",
    [r for r in WEIGHTS["records"] if not r.get("engine_args")],
    ids=lambda r: f"{r['model'][11:-5]}-tp{r['tensor_parallel_size']}",
)
def test_weights_per_rank_equal_vllms_meta_build(rec):
    model = _model(rec["model"])
    w = weight_bytes(model, tensor_parallel_size=rec["tensor_parallel_size"])
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == rec["target_param_bytes_per_rank"]


def _plan(tmp_path, name: str, **kw):
    path = tmp_path / name
    path.write_text(json.dumps(DATA["models"][name]["config"]))
    inputs = PlanInputs(gpu="H200", **{"max_model_len": 4096, **kw})
    return plan_reference(str(path), inputs, with_suggestions=False)


@pytest.mark.parametrize(
    "rec",
    [r for r in WEIGHTS["records"] if r.get("engine_args")],
    ids=lambda r: f"{r['model'][11:-5]}-tp{r['tensor_parallel_size']}-{sorted(r['engine_args'])}",
)
def test_engine_arguments_as_vllm_builds_them(tmp_path, rec):
    # Alpamayo 2 Super inherits Qwen3-VL's supports_encoder_tp_data (the tower whole on each rank)
    # and its image+video tower; BAGEL marks its tower (SigLIP, connector, position table) image
    args = rec["engine_args"]
    kw: dict = {"tensor_parallel_size": rec["tensor_parallel_size"]}
    if "mm_encoder_tp_mode" in args:
        kw["mm_encoder_tp_mode"] = args["mm_encoder_tp_mode"]
    if "limit_mm_per_prompt" in args:
        kw["limit_mm_per_prompt"] = json.dumps(args["limit_mm_per_prompt"])
    assert _plan(tmp_path, rec["model"], **kw).weights_bytes == rec["target_param_bytes_per_rank"]


def test_alpamayo_is_qwen3_vl_by_hand():
    # Alpamayo2SuperConfig() is Qwen3VLConfig()'s shape: 32 layers of 32 KV heads × 128 (bf16:
    # 2 × 32 × 128 × 2 B = 16 KiB per token per layer); 20 GiB / (16 blocks × 32 layers × 16 KiB)
    # = 2,560 blocks at TP 1, as recorded
    model = _model("synthetic--alpamayo2-super-defaults.json")
    assert (model.family, len(model.layers), model.weights.vision.family) == (
        "qwen",
        32,
        "qwen3_vl",
    )
    row = DATA["models"]["synthetic--alpamayo2-super-defaults.json"]["scenarios"][0]
    assert row["num_blocks"] == 20 * 2**30 // (16 * 32 * 2 * 32 * 128 * 2) == 2560
    # the tower: 25,266,179,040 B at TP 1 with it, 24,131,691,008 B without (limits 0), recorded
    rec = {(r["tensor_parallel_size"], json.dumps(r.get("engine_args"))): r
           for r in WEIGHTS["records"] if r["model"].startswith("synthetic--alpamayo")}  # fmt: skip
    off = json.dumps({"limit_mm_per_prompt": {"image": 0, "video": 0}})
    assert (
        rec[(1, "null")]["target_param_bytes_per_rank"]
        - rec[(1, off)]["target_param_bytes_per_rank"]
        == 1_134_488_032
    )


def test_bagel_tower_by_hand():
    # BagelConfig()'s SigLIP (hv 768, 12 layers, MLP 3,072, patch 16 at 224 px: 196 positions):
    # per layer the biased q/k/v/out (4 × (768² + 768)) and fc1/fc2 (2 × 768 × 3,072 + 3,072 +
    # 768), two LayerNorms (4 × 768): 7,087,872; the biased patch convolution (3 × 16² × 768 +
    # 768), 196 position rows, the post-LayerNorm; the connector 768 → 4,096 → 4,096 with biases
    from kvcalc.estimate.vision_tensors import vision_tensors

    v = _model("synthetic--bagel-defaults.json").weights.vision
    hv, inter, h = 768, 3072, 4096
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 12 * layer + 3 * 16 * 16 * hv + hv + 196 * hv + 2 * hv
    tower += hv * h + h + h * h + h
    assert layer == 7_087_872 and tower == 105_728_256
    assert sum(t.numel for t in vision_tensors(v)) == tower
    # and the buffers: 196 int64 position_ids and the 70 × 70 × 4,096 fp32 sin-cos table, as
    # vLLM's meta build holds them (float32 80,282,112 B less the text's 512, int64 1,568 B)
    rec = next(r for r in WEIGHTS["records"] if r["model"] == "synthetic--bagel-defaults.json")
    assert rec["target_by_dtype"]["int64"] == 196 * 8
    assert rec["target_by_dtype"]["float32"] - 512 == 70 * 70 * h * 4


def test_bagel_builds_26_of_27_layers_and_no_tower_without_understanding():
    # bagel.py rewrites vit_config.num_hidden_layers 27 → 26 (the checkpoint's), and builds no
    # tower when visual_und is false: the text model alone (= limit image 0, recorded)
    assert _model("synthetic--bagel-so400m-980.json").weights.vision.num_layers == 26
    assert _model("synthetic--bagel-no-understanding.json").weights.vision is None


def test_other_engines_refuse_them():
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest
    from kvcalc.errors import InputError

    for name in ("synthetic--alpamayo2-super-defaults.json", "synthetic--bagel-defaults.json"):
        request = EngineRequest(model=_model(name), max_model_len=4096, kv_cache_dtype="auto",
                                tensor_parallel_size=1, available_kv_bytes=20 << 30)  # fmt: skip
        with pytest.raises(InputError) as refused:
            get_engine("sglang").plan_kv_cache(request)
        assert refused.value.code == "unsupported-model"
