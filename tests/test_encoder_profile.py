"""vLLM V0's multimodal profile run for Qwen2.5-VL (:mod:`kvcalc.estimate.encoder_profile`):
hand-computed against vllm-16570's printed activation peak, and every moment against
``bench/vl_profile_replay.py``'s op-by-op replay of vLLM 0.8.3's forward
(``tests/fixtures/vl_profile_replay.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import fixture_config, fixture_shape

from kvcalc import PlanInputs, plan
from kvcalc.errors import InputError
from kvcalc.estimate.encoder_profile import largest_side, v0_qwen2_5_vl_profile
from kvcalc.estimate.overhead import VISION_BAND_BYTES
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB

REPLAY = json.loads((Path(__file__).parent / "fixtures" / "vl_profile_replay.json").read_text())
VL_72B = "Qwen--Qwen2.5-VL-72B-Instruct"


def profile(name=VL_72B, tp=4, tokens=5_120, seqs=2, images=1, videos=0):
    return v0_qwen2_5_vl_profile(fixture_shape(name).weights, tensor_parallel_size=tp,
                                 max_num_batched_tokens=tokens, max_num_seqs=seqs, images=images,
                                 videos=videos)  # fmt: skip


def test_the_dummy_image_is_the_largest_the_processor_allows():
    # smart_resize of a 9,999,999² image to max_pixels 12,845,056 with factor 28: β = 9,999,999 /
    # 3,584, floor(3,584 / 28) · 28 = 3,584 → 256 × 256 patches of 14, 16,384 tokens after 2 × 2
    assert largest_side(12_845_056, 28) == 3_584
    p = profile()
    assert [(i.modality, i.patches, i.tokens) for i in p.items] == [("image", 65_536, 16_384)]


def test_vllm_16570_text_forward_over_the_image_placeholders():
    # --max-model-len 4096 → max_num_batched_tokens 5,120 (multimodal), max_num_seqs min(2, 5,120 //
    # 16,384) → 1 sequence; V0 does not cut the prompt: 16,384 tokens. Per rank (TP 4): fp32 pixels
    # held twice 2 × 65,536 × 1,176 × 4 = 616,562,688; ids and (3, T) positions 4 × 16,384 × 8 =
    # 524,288; the tower's frequency cache 512 × 20 × 4 = 40,960; the text MLP moment 16,384 × 2 ×
    # (5 × 8,192 + 3 × 7,392) = 2,068,840,448 → 2,685,968,384 B = 2.50 GiB; vLLM printed "PyTorch
    # activation peak memory takes 2.51GiB" on every rank
    p = profile()
    assert (p.sequences, p.prompt_tokens) == (1, 16_384)
    assert p.text_peak_bytes == 616_562_688 + 524_288 + 40_960 + 2_068_840_448 == 2_685_968_384
    assert p.peak_bytes == p.text_peak_bytes > p.tower_peak_bytes
    assert abs(p.peak_bytes / GIB - 2.51) < 0.01


def test_tower_qkv_all_gather_moment():
    # TP 4: the base (fp32 pixels 616,562,688, bf16 pixels 154,140,672, prompt embeddings 16,384 ×
    # 8,192 × 2 = 268,435,456, ids 524,288, rotary table 65,536 × 40 × 4 = 10,485,760, window index
    # 131,072, frequency cache 40,960) + block input and norm 2 × 65,536 × 1,280 × 2 + qkv output
    # 65,536 × 960 × 2 + the gather's buffer and reshaped copy 2 × 65,536 × 3,840 × 2
    base = 616_562_688 + 154_140_672 + 268_435_456 + 524_288 + 10_485_760 + 131_072 + 40_960
    assert profile().tower_peak_bytes == base + 335_544_320 + 125_829_120 + 1_006_632_960


@pytest.mark.parametrize(
    "case", REPLAY["cases"], ids=lambda c: f"{c['config']}-tp{c['tensor_parallel_size']}"
)
def test_equals_the_replay_of_vllm_0_8_3(case):
    p = profile(case["config"], case["tensor_parallel_size"], images=case["images"],
                videos=case["videos"])  # fmt: skip
    assert sum(i.patches for i in p.items) == case["patches"]
    assert (p.tower_peak_bytes, p.text_peak_bytes) == (case["tower_peak_bytes"],
                                                       case["text_peak_bytes"])  # fmt: skip


def test_video_frames_follow_the_room_left():
    # default limits (1 image, 1 video): at 5,120 tokens there is no room beyond the image, so one
    # frame (padded to 2, grid_t 1): 16,384 + 16,384 tokens. At 128,000 (max_model_len 128,000):
    # 128,000 − 16,384 = 111,616 hold 6 × 16,384 → 12 frames → grid_t 6 → 98,304 tokens; one
    # sequence (128,000 // 114,688), its prompt padded to 128,000
    small = profile(videos=1)
    assert [i.tokens for i in small.items] == [16_384, 16_384] and small.prompt_tokens == 32_768
    big = profile(tokens=128_000, seqs=256, videos=1)
    assert [i.grid_t for i in big.items] == [1, 6]
    assert (big.sequences, big.prompt_tokens) == (1, 128_000)


def _plan(version, **options):
    raw = fixture_config(VL_72B)
    return plan(parse_config(raw, name=VL_72B), PlanInputs(
        gpu="A100-40GB", engine_version=version, gpu_memory_utilization=0.95, max_num_seqs=2,
        tensor_parallel_size=4, max_model_len=4096, engine_options=tuple(options.items())),
        with_suggestions=False)  # fmt: skip


def test_v0_plan_uses_the_profile_and_drops_the_vision_allowance():
    v0 = _plan("0.6", limit_mm_image=1, limit_mm_video=0)
    assert v0.memory.activation_bytes == profile().peak_bytes
    assert v0.available_kv_bytes - v0.available_kv_bytes_low == round(0.5 * GIB)  # the V0 band
    # default limits: one video too, the text forward over 32,768 tokens
    assert (
        _plan("0.6").memory.activation_bytes
        == profile(videos=1).peak_bytes
        > v0.memory.activation_bytes
    )
    # V1 (0.19): not modelled, the pessimistic end keeps the allowance
    v1 = _plan("0.19.0", limit_mm_image=1, limit_mm_video=0)
    assert (
        v1.available_kv_bytes - v1.available_kv_bytes_low == round(0.25 * GIB) + VISION_BAND_BYTES
    )


def test_limits_are_counts():
    with pytest.raises(InputError, match="limit_mm_video"):
        _plan("0.6", limit_mm_video=-1)


def test_no_items_no_encoder_profile():
    # --limit-mm-per-prompt image=0,video=0: V0 builds a text-only dummy (max_mm_tokens 0); the
    # era's text estimate stands and the band has no vision allowance
    plain = _plan("0.6", limit_mm_image=0, limit_mm_video=0)
    assert plain.memory.activation_bytes < profile().peak_bytes
    assert plain.available_kv_bytes - plain.available_kv_bytes_low == round(0.5 * GIB)


def test_note_names_the_dummy_items():
    note = profile(videos=1).note()
    assert "image 3584² (65,536 patches, 16,384 tokens)" in note
    assert "video 3584² (65,536 patches, 16,384 tokens)" in note
    assert "the text forward runs over 32,768 tokens" in note
