"""vLLM 0.33's multimodal settings (``kvcalc.engines.vllm.mm``): the vision tower's weights with
``--limit-mm-per-prompt`` 0 and ``--mm-encoder-tp-mode data``, ``--mm-ipc-gpu-memory-gb`` off the
KV memory, against vLLM's own parameter bytes per rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.engines.vllm.mm import parse_limits
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
RECORDS = {
    r["name"]: r
    for r in json.loads((ROOT / "tests/fixtures/vllm_0_33/multimodal_weights.json").read_text())[
        "records"
    ]
}
OFF = '{"image": 0, "video": 0}'
QWEN25_VL = str(ROOT / "tests/fixtures/configs/Qwen--Qwen2.5-VL-72B-Instruct.json")


def _plan(**kw):
    base = dict(gpu="H100-80GB", max_model_len=32768)
    return plan_reference("qwen3-vl-8b-instruct", PlanInputs(**(base | kw)), with_suggestions=False)


def test_limits_zero_drop_the_tower_as_vllm_does():
    # vLLM: 17,601,946,656 − 16,448,580,160 = 1,153,366,496 B per rank: the tower's weights and its
    # RoPE cache (8,192 × 72/2 × 2 B = 589,824 B, get_rope(max_position=8192, partial 0.5))
    on, off = RECORDS["qwen3-vl-8b-tp1"], RECORDS["qwen3-vl-8b-tp1_off"]
    tower = on["target_param_bytes_per_rank"] - off["target_param_bytes_per_rank"]
    assert tower == 1_153_366_496
    with_tower, without = _plan(), _plan(limit_mm_per_prompt=OFF)
    assert with_tower.weights_bytes - without.weights_bytes == tower
    # no tower, no encoder profile: the vision allowance leaves the band
    assert (without.available_kv_bytes - without.available_kv_bytes_low
            < with_tower.available_kv_bytes - with_tower.available_kv_bytes_low - 2 * GIB)  # fmt: skip
    assert any("no vision tower" in n for n in without.notes)


def test_encoder_tp_data_replicates_the_tower():
    split, data = RECORDS["qwen3-vl-8b-tp2"], RECORDS.get("qwen3-vl-8b-tp2_data")
    if data is None:
        pytest.skip("the TP 2 data-mode record is not in the fixture")
    extra = data["target_param_bytes_per_rank"] - split["target_param_bytes_per_rank"]
    assert (_plan(tensor_parallel_size=2, mm_encoder_tp_mode="data").weights_bytes
            - _plan(tensor_parallel_size=2).weights_bytes) == extra  # fmt: skip


def test_encoder_tp_data_falls_back_where_unsupported():
    # Gemma 4's class has no supports_encoder_tp_data: vLLM keeps the tower split
    kw = dict(gpu="H200", max_model_len=8192, tensor_parallel_size=2)
    model = "nvidia/Gemma-4-31B-IT-NVFP4"
    split = plan_reference(model, PlanInputs(**kw), with_suggestions=False)
    data = plan_reference(
        model, PlanInputs(**kw, mm_encoder_tp_mode="data"), with_suggestions=False
    )
    assert data.weights_bytes == split.weights_bytes
    assert any("falls back to weights" in n for n in data.notes)


def test_ipc_reservation_comes_off_the_kv_memory():
    # reserve_mm_ipc_gpu_memory runs on the given-memory path too: 18 GiB of the 20 left
    plan = _plan(kv_cache_memory_bytes=20 * GIB, mm_ipc_gpu_memory_bytes=2 * GIB)
    assert plan.available_kv_bytes == 18 * GIB
    if "qwen3-vl-8b-ipc" in RECORDS:
        assert plan.num_blocks == RECORDS["qwen3-vl-8b-ipc"]["num_blocks_at_20_gib"]
    assert (
        _plan(kv_cache_memory_bytes=20 * GIB).num_blocks
        == RECORDS["qwen3-vl-8b-tp1"]["num_blocks_at_20_gib"]
    )


def test_text_models_ignore_the_settings_and_say_so():
    plan = plan_reference("llama-3.1-8b", PlanInputs(gpu="H100-80GB", limit_mm_per_prompt=OFF,
                                                     mm_ipc_gpu_memory_bytes=GIB),
                          with_suggestions=False)  # fmt: skip
    base = plan_reference("llama-3.1-8b", PlanInputs(gpu="H100-80GB"), with_suggestions=False)
    assert plan.available_kv_bytes == base.available_kv_bytes
    assert any("text-only model, no effect" in n for n in plan.notes)


def test_limits_parse_as_vllm_reads_them():
    assert parse_limits('{"image": 2}').limit("image") == 2
    assert parse_limits('{"image": 2}').limit("video") == 999  # 0.33's default
    assert parse_limits('{"image": {"count": 0}, "video": 0}').vision_off
    assert parse_limits("image=0,video=0").vision_off
    for bad in ("{not json", "image=x", '{"image": -1}'):
        with pytest.raises(InputError):
            parse_limits(bad)


def test_v0_profile_reads_the_limits_too():
    # the V0 (0.8) Qwen2.5-VL profile takes its images/videos from --limit-mm-per-prompt now
    kw = dict(gpu="H100-80GB", max_model_len=4096, engine_version="0.8")
    a = plan_reference(QWEN25_VL, PlanInputs(**kw, tensor_parallel_size=4,
                       limit_mm_per_prompt='{"image": 1, "video": 0}'), with_suggestions=False)  # fmt: skip
    b = plan_reference(QWEN25_VL, PlanInputs(**kw, tensor_parallel_size=4,
                       engine_options=(("limit_mm_image", 1), ("limit_mm_video", 0))),
                       with_suggestions=False)  # fmt: skip
    assert a.memory.activation_bytes == b.memory.activation_bytes
    with pytest.raises(InputError) as err:
        plan_reference(QWEN25_VL, PlanInputs(**kw, tensor_parallel_size=4,
                       limit_mm_per_prompt='{"image": 1}', engine_options=(("limit_mm_image", 1),)),
                       with_suggestions=False)  # fmt: skip
    assert err.value.code == "conflicting-options"


@pytest.mark.parametrize("name", ["qwen3-vl-8b-tp1", "qwen3-vl-8b-tp2", "qwen3-vl-8b-tp1_off"])
def test_weights_per_rank_equal_vllms_parameter_bytes(name):
    # the tower, the text model, both RoPE caches and the 36 attention layers' four fp32 scales
    # (_k/_v/_q/_prob_scale, 16 B each): vLLM's parameters and buffers per rank, to the byte
    r = RECORDS[name]
    kw = {"limit_mm_per_prompt": OFF} if name.endswith("_off") else {}
    plan = _plan(tensor_parallel_size=r["tensor_parallel_size"], **kw)
    assert plan.weights_bytes == r["target_param_bytes_per_rank"]
