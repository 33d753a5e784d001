"""vLLM 0.33's multimodal encoder budget (``kvcalc.engines.vllm.mm_budget``) against
``MultiModalBudget`` as vLLM's own code computes it (``tests/fixtures/vllm_0_33/mm_encoder_budget.json``),
and the encoder outputs its profile run holds, as a term of the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.engines.vllm.mm_budget import (
    QWEN_CLASS_DEFAULTS,
    ProcessorSizes,
    encoder_budget,
    most_features,
    smart_resize,
)
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference, resolve_model_cached
from kvcalc.planning.inputs import PlanInputs

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "tests/fixtures/vllm_0_33/mm_encoder_budget.json").read_text())
ROWS = [(m, row) for m in FIXTURE["models"] for row in m["rows"] if row["status"] == "ok"]


def _sizes(model: dict) -> ProcessorSizes:
    """The processor sizes the recording's ``preprocessor_config.json`` gave vLLM."""
    image, video = model["preprocessor_config"], model.get("video_preprocessor_config") or {}
    if "size" not in image and image.get("processor_class") == "Qwen3VLProcessor":
        return QWEN_CLASS_DEFAULTS
    if "size" in image:
        return ProcessorSizes(image_min_pixels=image["size"]["shortest_edge"],
                              image_max_pixels=image["size"]["longest_edge"],
                              video_min_pixels=video["size"]["shortest_edge"],
                              video_max_pixels=video["size"]["longest_edge"],
                              video_temporal_patch_size=video["temporal_patch_size"])  # fmt: skip
    return ProcessorSizes()


@pytest.mark.parametrize(
    ("model", "row"), ROWS, ids=[f"{m['model']}-{i}" for i, (m, _) in enumerate(ROWS)]
)
def test_budget_equals_vllms(model, row):
    assert row["status"] == "ok"
    vision = resolve_model_cached(model["kvcalc_model"]).shape.weights.vision
    limits = {k: v for k, v in (row["engine_args"].get("limit_mm_per_prompt") or {}).items()}
    got = encoder_budget(vision, limits=limits, max_num_batched_tokens=row["max_num_batched_tokens"],
                         max_num_seqs=row["max_num_seqs"], max_model_len=row["max_model_len"],
                         sizes=_sizes(model))  # fmt: skip
    assert got is not None
    assert dict(got.max_tokens_per_item) == row["mm_max_tokens_per_item"]
    assert got.compute_budget_tokens == row["encoder_compute_budget"]
    assert got.cache_size_tokens == row["encoder_cache_size"]
    assert got.budget_tokens == row["encoder_budget"]
    assert dict(got.items_per_prompt) == row["mm_max_items_per_prompt"]
    assert dict(got.items_per_batch) == row["mm_max_items_per_batch"]
    assert got.profiled == row["profiled_modality"]


def test_fixture_covers_the_bundled_towers():
    names = {m["kvcalc_model"] for m in FIXTURE["models"]}
    assert {"qwen3-vl-8b-instruct", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b",
            "llama-4-scout-17b-16e-instruct", "gemma-4-31b-it-nvfp4"} <= names  # fmt: skip
    assert len(ROWS) >= 15


def test_qwen_item_by_hand():
    # 16,777,216 px / (16 · 2)² = 16,384 merged patches: 128 × 128 units of 32 px
    assert most_features(16_777_216, 32) == (4096, 4096)
    assert smart_resize(4096, 4096, factor=32, min_pixels=65_536, max_pixels=16_777_216) == (
        4096,
        4096,
    )
    # 1,003,520 / 32² = 980 = 28 × 35; a prime count falls back to the next with a ratio ≤ 200
    assert most_features(1_003_520, 32) == (28 * 32, 35 * 32)
    assert most_features(983 * 32 * 32, 32) == (9 * 32, 109 * 32)


def _plan(model="qwen3-vl-8b-instruct", **kw):
    base = dict(gpu="H100-80GB", max_model_len=32768)
    return plan_reference(model, PlanInputs(**(base | kw)), with_suggestions=False)


def test_plan_reports_the_budget_and_holds_the_outputs():
    row = FIXTURE["models"][0]["rows"][0]
    plan = _plan()
    assert (
        plan.mm_max_tokens_per_item
        == row["mm_max_tokens_per_item"]
        == {"image": 16384, "video": 12288}
    )
    assert plan.mm_encoder_budget_tokens == row["encoder_compute_budget"] == 16384
    assert plan.mm_encoder_cache_tokens == row["encoder_cache_size"] == 16384
    assert plan.mm_items_per_batch == row["mm_max_items_per_batch"]
    assert plan.mm_profiled_modality == "image"
    # one image of 16,384 tokens, out_hidden_size 4,096 × (1 + 3 DeepStack levels), bf16
    assert plan.mm_encoder_outputs_bytes == 16384 * 4096 * 4 * 2 == 536_870_912
    # images off: the profile runs one video of 12,288 tokens instead, 4,096 tokens less held;
    # planned from the GPU alone the KV budget moves by exactly that
    video = _plan(limit_mm_per_prompt='{"image": 0}')
    assert video.mm_encoder_outputs_bytes == 12288 * 16384 * 2
    held = plan.mm_encoder_outputs_bytes - video.mm_encoder_outputs_bytes
    assert plan.memory.activation_bytes - video.memory.activation_bytes == held
    assert video.available_kv_bytes - plan.available_kv_bytes == held
    assert any("holds their outputs" in n for n in plan.notes)


def test_given_kv_memory_keeps_the_term_on_the_device():
    given = _plan(kv_cache_memory_bytes=20 << 30)
    assert given.mm_encoder_outputs_bytes == 536_870_912
    assert given.memory.activation_bytes == _plan().memory.activation_bytes


def test_limits_zero_leave_no_budget():
    off = _plan(limit_mm_per_prompt='{"image": 0, "video": 0}')
    assert off.mm_encoder_budget_tokens is None and off.mm_encoder_outputs_bytes is None


def test_gemma4_budget_derived_outputs_not():
    plan = _plan("nvidia/Gemma-4-31B-IT-NVFP4", gpu="H200", max_model_len=8192)
    assert plan.mm_max_tokens_per_item == {"image": 280, "video": 32 * 78}
    assert plan.mm_encoder_outputs_bytes is None
    assert any("not derived for this tower" in n for n in plan.notes)


def test_older_profile_has_no_budget():
    old = _plan(engine_version="0.19")
    assert old.mm_encoder_budget_tokens is None


def test_gemma4_item_above_the_batch_is_refused_as_vllm_does():
    # Gemma 4 prefills its items whole (mm-prefix attention forces disable_chunked_mm_input)
    gemma = next(m for m in FIXTURE["models"] if m["kvcalc_model"] == "gemma-4-31b-it-nvfp4")
    row = next(r for r in gemma["rows"] if r["status"] == "error")
    args = row["engine_args"]
    with pytest.raises(InputError) as err:
        _plan("gemma-4-31b-it-nvfp4", gpu="H200", max_model_len=args["max_model_len"],
              max_num_batched_tokens=args["max_num_batched_tokens"], max_num_seqs=args["max_num_seqs"])  # fmt: skip
    assert row["error"].removeprefix("ValueError: ") in str(err.value)
