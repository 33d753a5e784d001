"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of the audio architectures Audio Flamingo 3
(``AudioFlamingo3ForConditionalGeneration``), GLM-ASR (``GlmAsrForConditionalGeneration``), MOSS
Transcribe-Diarize (``MossTranscribeDiarizeForConditionalGeneration``) and Qwen3-ASR
(``Qwen3ASRForConditionalGeneration``, ``Qwen3ASRRealtimeGeneration``) and Granite Speech
(``GraniteSpeechForConditionalGeneration``, ``GraniteSpeechPlusForConditionalGeneration``): the text
decoder's KV cache and the audio towers' weights.

``fixtures/vllm_0_33/registry_multimodal_aud2.json`` was recorded with the vLLM reference harness
over auto/fp8 × TP 1/8 × 4,096/32,768 tokens × 20 GiB per GPU, for transformers 5.20's or vLLM
0.33's config-class defaults: block size, blocks, tokens, concurrency, every group and the capacity line equal, every
refusal refused for vLLM's reason. ``multimodal_weights_aud2.json`` holds vLLM's own meta build of
the same configs through ``deploy_probe.py``: parameters and buffers of one TP rank, tower
included, which kvcalc's weights per rank (and buffers) must equal to the byte; with
``--limit-mm-per-prompt '{"audio": 0}'`` as planned (neither class supports
``--mm-encoder-tp-mode data``).
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
DATA = json.loads((FIXTURES / "registry_multimodal_aud2.json").read_text())
WEIGHTS = json.loads((FIXTURES / "multimodal_weights_aud2.json").read_text())
CASES = harness_cases(DATA)
#: vLLM's error texts → the class both sides are mapped to
VLLM_REASONS = {
    "User-specified max_model_len": "max-model-len",  # GLM-ASR's 8,192 positions
    "is not divisible by": "parallelism",  # glmasr.py's QKVParallelLinear: the tower's 20 heads
}
KVCALC_CODES = {"max-model-len-exceeded": "max-model-len", "invalid-parallelism": "parallelism"}
KINDS = {"full_attention": LayerKind.FULL}
AF3, GLMASR = "synthetic--audioflamingo3-defaults.json", "synthetic--glmasr-defaults.json"
MOSS = "synthetic--moss-transcribe-diarize-defaults.json"
QWEN3_ASR = "synthetic--qwen3-asr-vllm-defaults.json"
GRANITE = "synthetic--granite-speech-defaults.json"


def _model(name: str):
    return parse_config(DATA["models"][name]["config"], name=name)


def test_every_architecture_is_recorded():
    archs = {m["config"]["architectures"][0] for m in DATA["models"].values()}
    assert archs == {"AudioFlamingo3ForConditionalGeneration", "GlmAsrForConditionalGeneration",
                     "MossTranscribeDiarizeForConditionalGeneration",
                     "Qwen3ASRForConditionalGeneration", "Qwen3ASRRealtimeGeneration",
                     "GraniteSpeechForConditionalGeneration",
                     "GraniteSpeechPlusForConditionalGeneration"}  # fmt: skip
    grid = {(d, t, n) for d in ("auto", "fp8") for t in (1, 8) for n in (4096, 32768)}
    for name, model in DATA["models"].items():
        assert model["source"], name
        ids = {(r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"])
               for r in model["scenarios"]}  # fmt: skip
        assert grid <= ids, name


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if row["max_model_len"] is None:  # the length vLLM derives (Granite Speech's 2,048)
        assert _model(name).max_model_len == row["derived_max_model_len"]
        row = dict(row, max_model_len=row["derived_max_model_len"])
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
    ids=lambda r: f"{r['model'][11:-5]}-tp{r['tensor_parallel_size']}-audio0",
)
def test_no_audio_leaves_the_tower_out_as_vllm_does(tmp_path, rec):
    # both classes build tower and projector inside _mark_tower_model(vllm_config, "audio")
    kw = {"tensor_parallel_size": rec["tensor_parallel_size"],
          "limit_mm_per_prompt": json.dumps(rec["engine_args"]["limit_mm_per_prompt"])}  # fmt: skip
    assert _plan(tmp_path, rec["model"], **kw).weights_bytes == rec["target_param_bytes_per_rank"]


def _recorded(name: str, tp: int, off: bool) -> int:
    return next(r["target_param_bytes_per_rank"] for r in WEIGHTS["records"]
                if r["model"] == name and r["tensor_parallel_size"] == tp
                and bool(r.get("engine_args")) == off)  # fmt: skip


def test_audio_flamingo3_tower_by_hand():
    # AudioFlamingo3Config(): Qwen2-Audio's encoder (d 1,280, 128 mel bins, 32 layers, MLP 5,120,
    # 1,500 positions: 636,968,960, as test_vllm_registry_multimodal's Qwen2-Audio) and two
    # biased projector layers 1,280 → 4,096 → 4,096: 5,246,976 + 16,781,312; in bf16
    # 1,317,994,496 B, which vLLM's build without the tower (audio 0) lacks, recorded
    from kvcalc.estimate.vision_tensors import vision_tensors

    d, mel, ffn, h = 1280, 128, 5120, 4096
    layer = 4 * d * d + 3 * d + 2 * d * ffn + ffn + d + 4 * d
    tower = d * mel * 3 + d + d * d * 3 + d + 1500 * d + 32 * layer + 2 * d
    projector = h * d + h + h * h + h
    assert (tower, projector) == (636_968_960, 22_028_288)
    assert sum(t.numel for t in vision_tensors(_model(AF3).weights.vision)) == tower + projector
    assert _recorded(AF3, 1, False) - _recorded(AF3, 1, True) == 2 * (tower + projector)


def test_glmasr_tower_by_hand():
    # GlmAsrConfig()'s encoder (glmasr.py): the biased convolutions 128 → 1,280 → 1,280 (kernel
    # 3): 492,800 + 4,916,480; 32 layers, each the biased fused qkv (20 heads and 20 KV heads of
    # 64) 3 × (1,280² + 1,280), o_proj 1,280² + 1,280, fc1/fc2 2 × 1,280 × 5,120 + 5,120 + 1,280,
    # two LayerNorms 4 × 1,280: 19,677,440; the final LayerNorm 2,560; the projector 5,120 →
    # 2 × 2,048 → 2,048, biased: 20,975,616 + 8,390,656; in bf16, with the fp32 inv_freq of the
    # rotary's 32 (64 × 0.5) / 2 = 16 values: 1,328,912,448 B, what audio 0 leaves out, recorded
    from kvcalc.estimate.vision_tensors import vision_tensors

    d, mel, ffn, h = 1280, 128, 5120, 2048
    layer = 3 * (d * d + d) + d * d + d + 2 * d * ffn + ffn + d + 4 * d
    tower = d * mel * 3 + d + d * d * 3 + d + 32 * layer + 2 * d
    projector = 2 * h * ffn + 2 * h + h * 2 * h + h
    assert (layer, tower, projector) == (19_677_440, 635_089_920, 29_366_272)
    v = _model(GLMASR).weights.vision
    assert sum(t.numel for t in vision_tensors(v)) == tower + projector
    assert 2 * (tower + projector) + 16 * 4 == 1_328_912_448
    assert _recorded(GLMASR, 1, False) - _recorded(GLMASR, 1, True) == 1_328_912_448


def test_glmasr_text_is_llama_by_hand():
    # GlmAsrConfig()'s Llama text_config: 28 layers of 4 KV heads × 128 (bf16: 2 × 4 × 128 × 2 B
    # = 2 KiB per token per layer); 20 GiB / (16 × 28 × 2 KiB) = 23,405 blocks at TP 1, recorded
    model = _model(GLMASR)
    assert (model.family, len(model.layers)) == ("llama", 28)
    row = DATA["models"][GLMASR]["scenarios"][0]
    assert row["num_blocks"] == 20 * 2**30 // (16 * 28 * 2 * 4 * 128 * 2) == 23_405


def test_moss_transcribe_diarize_tower_by_hand():
    # MossTranscribeDiarizeConfig()'s Whisper audio_config through vLLM's WhisperEncoder: the
    # biased convolutions 80 → 1,024 → 1,024 (kernel 3): 246,784 + 3,146,752; 24 layers, each the
    # biased fused qkv (q, k and v biased) 3 × (1,024² + 1,024), out_proj 1,024² + 1,024, fc1/fc2
    # 2 × 1,024 × 4,096 + 4,096 + 1,024, two LayerNorms 4 × 1,024: 12,596,224; the final
    # LayerNorm 2,048 and 1,500 position rows: 307,240,960; the vq_adaptor 4,096 → 1,024 → 1,024,
    # biased, and its LayerNorm: 5,246,976; in bf16 624,975,872 B, what audio 0 leaves out
    from kvcalc.estimate.vision_tensors import vision_tensors

    d, mel, ffn, h = 1024, 80, 4096, 1024
    layer = 3 * (d * d + d) + d * d + d + 2 * d * ffn + ffn + d + 4 * d
    tower = d * mel * 3 + d + d * d * 3 + d + 24 * layer + 2 * d + 1500 * d
    adaptor = h * 4096 + h + h * h + h + 2 * h
    assert (layer, tower, adaptor) == (12_596_224, 307_240_960, 5_246_976)
    assert sum(t.numel for t in vision_tensors(_model(MOSS).weights.vision)) == tower + adaptor
    assert _recorded(MOSS, 1, False) - _recorded(MOSS, 1, True) == 2 * (tower + adaptor)
    # its Qwen3 text_config: 28 layers of 8 KV heads × 128: 20 GiB / (16 × 28 × 4 KiB) = 11,702
    assert (
        DATA["models"][MOSS]["scenarios"][0]["num_blocks"]
        == 20 * 2**30 // (16 * 28 * 2 * 8 * 128 * 2)
        == 11_702
    )


def test_qwen3_asr_tower_by_hand():
    # Qwen3ASRConfig()'s thinker_config.audio_config (Qwen3OmniMoeAudioEncoder): three biased 3 × 3
    # Conv2d 1 → 480 → 480 → 480: 4,800 + 2 × 2,074,080; the unbiased conv_out 480 × 16 (128 mel
    # bins halved thrice) → 1,280: 9,830,400; 32 layers of 1,280 (20 heads, MLP 5,120) as
    # GLM-ASR's: 19,677,440 each; ln_post 2,560; proj1 1,280² + 1,280 and proj2 1,280 → 3,584
    # (output_dim) + 3,584: 649,894,784; in bf16, with the fp32 1,500 × 1,280 sinusoid table:
    # 1,307,469,568 B, what audio 0 leaves out (recorded)
    from kvcalc.estimate.vision_tensors import vision_tensors

    d, c, ffn, out = 1280, 480, 5120, 3584
    layer = 3 * (d * d + d) + d * d + d + 2 * d * ffn + ffn + d + 4 * d
    tower = c * 9 + c + 2 * (c * c * 9 + c) + c * 16 * d + 32 * layer + 2 * d
    tower += d * d + d + out * d + out
    assert (layer, tower) == (19_677_440, 649_894_784)
    assert sum(t.numel for t in vision_tensors(_model(QWEN3_ASR).weights.vision)) == tower
    table = 1500 * d * 4
    assert _recorded(QWEN3_ASR, 1, False) - _recorded(QWEN3_ASR, 1, True) == 2 * tower + table


def test_qwen3_asr_layers_are_whole_where_tp_does_not_divide_the_heads():
    # Qwen3OmniMoeAudioAttention and its layer's fc1/fc2: disable_tp where 20 % TP: at TP 8 each
    # rank holds the whole 649,894,784-parameter tower (and vLLM plans it: no heads assert); at
    # TP 2 the layers' qkv, out_proj, fc1 and fc2 halve (their row-split biases stay whole):
    # 32 × (3 × (1,280² + 1,280) + 1,280² + 2 × 1,280 × 5,120 + 5,120) / 2 = 314,716,160 fewer
    from kvcalc.engines.base import EngineRequest
    from kvcalc.engines.vllm.setup import check_tower_tp
    from kvcalc.estimate.vision_tensors import vision_tensors

    model = _model(QWEN3_ASR)
    tensors = vision_tensors(model.weights.vision)

    def per_rank(tp: int) -> int:
        return sum(r * c * t.copies for t in tensors for r, c in [t.shape_per_rank(tp)])

    d, ffn = 1280, 5120
    assert per_rank(8) == per_rank(1) == 649_894_784
    assert per_rank(1) - per_rank(2) == 32 * (3 * (d * d + d) + d * d + 2 * d * ffn + ffn) // 2
    assert 32 * (3 * (d * d + d) + d * d + 2 * d * ffn + ffn) // 2 == 314_716_160
    check_tower_tp(EngineRequest(model=model, max_model_len=4096, tensor_parallel_size=8,
                                 available_kv_bytes=20 << 30))  # fmt: skip
    # the 1.7B shape's 16 heads divide TP 8: its 24 layers of 1,024 split (recorded at TP 8 too)
    shape = vision_tensors(_model("synthetic--qwen3-asr-1.7b-shape.json").weights.vision)
    layers = [t for t in shape if ".layers." in t.name]
    whole = sum(t.numel for t in layers)
    split = sum(r * c * t.copies for t in layers for r, c in [t.shape_per_rank(8)])
    d, ffn = 1024, 4096
    per_layer = 3 * (d * d + d) + d * d + 2 * d * ffn + ffn  # what TP splits, 7 / 8 of it gone
    assert whole - split == 24 * per_layer * 7 // 8


def test_granite_speech_tower_by_hand():
    # GraniteSpeechConfig()'s CTC encoder (granite_speech.py): 10 conformer blocks of 1,024, each
    # two feed-forwards (a LayerNorm, biased 1,024 → 4,096 → 1,024: 8,395,776), the attention (a
    # LayerNorm, unbiased to_q and to_kv 1,024 → 8 × 128, 2 × 1,024, the biased to_out, 1,025 × 128
    # relative positions: 4,328,576), the convolution module (a LayerNorm, the biased pointwise
    # 1,024 → 2 × 2,048, the unbiased depthwise 2,048 × 15, a BatchNorm with its running mean and
    # variance 4 × 2,048, the biased 2,048 → 1,024: 6,337,536) and a LayerNorm: 27,459,712; the
    # biased input_linear 160 → 1,024, out 1,024 → 42 and out_mid 42 → 1,024: 274,849,066 in all.
    # The projector: 3 (15 / 5) queries of 768, the Q-Former's LayerNorm and 12 layers (self
    # attention, every second one cross-attending 1,408 wide, the query MLP 3,072 wide) and the
    # biased 768 → 4,096: 108,289,792. In bf16 with 10 int64 num_batches_tracked: 766,277,796 B,
    # what audio 0 leaves out (recorded)
    from kvcalc.estimate.vision_tensors import vision_tensors

    h, ffn, inner, conv = 1024, 4096, 1024, 2048
    ff = 2 * h + ffn * h + ffn + h * ffn + h
    attn = 2 * h + 3 * inner * h + h * inner + h + 1025 * 128
    module = 2 * h + 2 * conv * h + 2 * conv + conv * 15 + 4 * conv + h * conv + h
    block = 2 * ff + attn + module + 2 * h
    encoder = 160 * h + h + 10 * block + 42 * h + 42 + h * 42 + h
    qh, qi = 768, 3072

    def qformer_attention(kv: int) -> int:
        return 2 * (qh * qh + qh) + 2 * (qh * kv + qh) + 2 * qh

    layers = sum(qformer_attention(qh) + (qformer_attention(1408) if i % 2 == 0 else 0)
                 + qi * qh + qi + qh * qi + qh + 2 * qh for i in range(12))  # fmt: skip
    projector = 3 * qh + 2 * qh + layers + 4096 * qh + 4096
    assert (ff, attn, module, block) == (8_395_776, 4_328_576, 6_337_536, 27_459_712)
    assert (encoder, projector) == (274_849_066, 108_289_792)
    got = sum(t.numel for t in vision_tensors(_model(GRANITE).weights.vision))
    assert got == encoder + projector
    assert 2 * (encoder + projector) + 10 * 8 == 766_277_796
    assert _recorded(GRANITE, 1, False) - _recorded(GRANITE, 1, True) == 766_277_796


def test_granite_speech_2b_shape_text_by_hand():
    # its Granite text_config: 40 layers of 4 KV heads × 128 (2,048 / 16): 2 × 4 × 128 × 2 B = 2 KiB
    # per token per layer; 20 GiB / (16 × 40 × 2 KiB) = 16,384 blocks at 4,096 tokens, TP 1; its
    # CTC out layer's 348 columns fail at TP 8 (348 / 8 is not whole: refused, recorded and tested
    # in test_matches_vllm)
    name = "synthetic--granite-speech-2b-shape.json"
    rows = {(r["kv_cache_dtype"], r["tensor_parallel_size"], r["max_model_len"]): r
            for r in DATA["models"][name]["scenarios"]}  # fmt: skip
    assert rows[("auto", 1, 4096)]["num_blocks"] == 20 * 2**30 // (16 * 40 * 2 * 4 * 128 * 2)
    assert rows[("auto", 1, 4096)]["num_blocks"] == 16_384
    assert "error" in rows[("auto", 8, 4096)] and 348 % 8
    assert _model(name).weights.vision.projector_output_dim == 348


def test_other_engines_refuse_them():
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest
    from kvcalc.errors import InputError

    for name in (AF3, GLMASR, MOSS, QWEN3_ASR, GRANITE):
        request = EngineRequest(model=_model(name), max_model_len=4096, kv_cache_dtype="auto",
                                tensor_parallel_size=1, available_kv_bytes=20 << 30)  # fmt: skip
        with pytest.raises(InputError) as refused:
            get_engine("sglang").plan_kv_cache(request)
        assert refused.value.code == "unsupported-model"


def test_glmasr_at_tp_8_is_refused_unless_the_audio_tower_is_left_out(tmp_path):
    # its 20 tower heads do not divide TP 8 (vLLM fails, recorded): the hint names the modality
    # its class marks ({"audio": 0}), with which vLLM builds no tower and kvcalc plans it
    from kvcalc.errors import InputError

    with pytest.raises(InputError) as refused:
        _plan(tmp_path, GLMASR, tensor_parallel_size=8, max_model_len=2048)
    assert refused.value.code == "invalid-parallelism"
    assert '{"audio": 0}' in (refused.value.hint or "")
    plan = _plan(tmp_path, GLMASR, tensor_parallel_size=8, max_model_len=2048,
                 limit_mm_per_prompt='{"audio": 0}')  # fmt: skip
    assert plan.weights_bytes < _recorded(GLMASR, 1, True)
