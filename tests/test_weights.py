"""Parameter counts and weight bytes: hand-computed figures, then every bundled model built by
transformers on the meta device (no memory, no download) and compared with kvcalc's count."""

from __future__ import annotations

import json

import pytest
from helpers import bundled_config, bundled_shape, fixture_shape

from kvcalc.errors import InputError
from kvcalc.estimate.weights import count_parameters, pp_layer_counts, weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.sources.bundled import bundled_models

GIB = 1 << 30


def params(ref: str):
    return count_parameters(bundled_shape(ref).weights)


# -- hand-computed counts -------------------------------------------------------------------------
def test_llama_3_1_8b():
    # embed = lm_head = 128,256 × 4,096 = 525,336,576 (untied)
    # layer: q,o 2 × 4,096² + k,v 2 × 1,024 × 4,096 = 41,943,040; MLP 3 × 14,336 × 4,096 =
    #        176,160,768; 2 RMSNorms 8,192 → 218,112,000
    # 32 × 218,112,000 + 2 × 525,336,576 + final norm 4,096 = 8,030,261,248
    c = params("llama-3.1-8b")
    assert c.total == 32 * 218_112_000 + 2 * 525_336_576 + 4_096 == 8_030_261_248
    assert c.embedding == c.lm_head == 525_336_576
    assert c.routed_experts == 0 and c.active_per_token == c.total


def test_llama_2_13b():
    # MHA, 40 layers, hidden 5,120, MLP 13,824, vocab 32,000
    # layer: 4 × 5,120² = 104,857,600 + 3 × 5,120 × 13,824 = 212,336,640 + norms 10,240 = 317,204,480
    # 40 × 317,204,480 + 2 × 32,000 × 5,120 + 5,120 = 13,015,864,320
    assert (
        params("llama-2-13b-hf").total
        == 40 * 317_204_480 + 2 * 163_840_000 + 5_120
        == 13_015_864_320
    )


def test_qwen3_8b_counts_qk_norm():
    # 36 layers, hidden 4,096, 32 q heads / 8 KV heads × 128, MLP 12,288, vocab 151,936, untied
    # layer: q,o 2 × 4,096² = 33,554,432; k,v 2 × 1,024 × 4,096 = 8,388,608; q/k norm 2 × 128;
    #        MLP 3 × 4,096 × 12,288 = 150,994,944; norms 8,192 → 192,946,432
    # 36 × 192,946,432 + 2 × 622,329,856 + 4,096 = 8,190,735,360
    assert params("qwen3-8b").total == 36 * 192_946_432 + 2 * 622_329_856 + 4_096 == 8_190_735_360


def test_qwen2_5_7b_has_qkv_bias_but_no_o_bias():
    # q/k/v biases 3,584 + 512 + 512 = 4,608 per layer, none on o_proj (Qwen2Attention)
    # layer: q,o 2 × 3,584² = 25,690,112; k,v 2 × 512 × 3,584 = 3,670,016; biases 4,608;
    #        MLP 3 × 3,584 × 18,944 = 203,685,888; norms 7,168 → 233,057,792
    # 28 × 233,057,792 + 2 × 152,064 × 3,584 + 3,584 = 7,615,616,512
    assert params("qwen2.5-7b").total == 28 * 233_057_792 + 2 * 544_997_376 + 3_584 == 7_615_616_512


def test_gpt2_learned_positions_biases_and_tied_head():
    # wte 50,257 × 768 = 38,597,376; wpe 1,024 × 768 = 786,432; lm_head tied (no config key: gpt2's
    # default). Layer: 2 LayerNorms 4 × 768 = 3,072; c_attn 768 × 2,304 + 2,304 = 1,771,776;
    # attn c_proj 768² + 768 = 590,592; c_fc 768 × 3,072 + 3,072 = 2,362,368; mlp c_proj
    # 3,072 × 768 + 768 = 2,360,064 → 7,087,872. 12 layers + ln_f 1,536:
    c = params("gpt2")
    assert c.total == 38_597_376 + 786_432 + 12 * 7_087_872 + 1_536 == 124_439_808
    assert c.lm_head == 0 and c.embedding == 38_597_376 + 786_432


def test_deepseek_v3_total_and_active():
    # MLA per layer: q_a 1,536 × 7,168 = 11,010,048; q_b 128 × 192 × 1,536 = 37,748,736;
    #   kv_a 576 × 7,168 = 4,128,768; kv_b 128 × 256 × 512 = 16,777,216; o 7,168 × 16,384 =
    #   117,440,512; norms 1,536 + 512 + 2 × 7,168 = 16,384 → 187,121,664
    # 3 dense layers: 3 × 18,432 × 7,168 = 396,361,728
    # 58 MoE layers: router 256 × 7,168 = 1,835,008; shared expert 3 × 2,048 × 7,168 = 44,040,192;
    #   256 routed experts × 44,040,192 = 11,274,289,152
    # embed + lm_head 2 × 129,280 × 7,168 = 1,853,358,080; final norm 7,168
    routed = 58 * 256 * 44_040_192
    total = (61 * 187_121_664 + 3 * 396_361_728 + 58 * (1_835_008 + 44_040_192) + routed
             + 1_853_358_080 + 7_168)  # fmt: skip
    c = params("deepseek-v3")
    assert c.total == total == 671_026_404_352  # "671B"; the 14B MTP module is not loaded
    assert c.routed_experts == routed
    # active: 8 of 256 routed experts per token → total − routed + routed · 8/256 ≈ 37.6B ("37B")
    assert c.active_per_token == total - routed + 58 * 8 * 44_040_192 == 37_552_282_624


def test_moe_active_counts_match_model_names():
    # Qwen3-30B-A3B: 48 layers × 128 experts × 3 × 768 × 2,048; 8 active per token
    c = params("qwen3-30b-a3b")
    assert c.routed_experts == 48 * 128 * 3 * 768 * 2048
    assert c.active_per_token == c.total - c.routed_experts + 48 * 8 * 3 * 768 * 2048  # ≈ 3.35B
    assert 3.3e9 < c.active_per_token < 3.4e9
    assert 46.6e9 < params("mixtral-8x7b-v0.1").total < 46.8e9  # "46.7B", 2 of 8 experts active
    assert 12.8e9 < params("mixtral-8x7b-v0.1").active_per_token < 12.95e9
    assert 32.8e9 < params("kimi-k2-instruct").active_per_token < 33e9  # "32B activated"
    assert 1.02e12 < params("kimi-k2-instruct").total < 1.03e12  # "1T"


def test_llama4_scout_vision_tower_and_active():
    # vision: 34 ViT layers of q/k/v/o 4 × (1,408² + 1,408) + fc1/fc2 2 × 1,408 × 5,632 + 5,632 +
    # 1,408 + two LayerNorms 4 × 1,408 = 23,807,872; plus class/pos embeddings 1,408 + 577 × 1,408, patch 1,408 × 588, pre/post
    # LayerNorms 4 × 1,408, adapter 4,096 × 5,632 + 4,096², projector 5,120 × 4,096
    vision = (34 * 23_807_872 + 1_408 + 577 * 1_408 + 1_408 * 588 + 4 * 1_408
              + 4_096 * 5_632 + 4_096 * 4_096 + 5_120 * 4_096)  # fmt: skip
    c = params("llama-4-scout-17b-16e-instruct")
    assert c.vision == vision == 871_932_416
    assert 17.1e9 < c.active_per_token < 17.25e9  # "17B active" (1 of 16 experts + shared expert)


def test_mtp_layers_noted():
    assert any("MTP" in n for n in bundled_shape("deepseek-v3").weights.notes)


# -- every bundled model against transformers on the meta device -----------------------------------
def _meta_count(raw: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = {k: v for k, v in raw.items() if k not in ("quantization_config", "auto_map")}
    arch = (raw.get("architectures") or [None])[0]
    cls = getattr(transformers, arch or "", None)
    assert cls is not None, f"transformers {transformers.__version__} has no class {arch}"
    config = cls.config_class.from_dict(raw)  # DeepseekV3Config also reads Kimi-K2's config
    with torch.device("meta"):
        model = cls._from_config(config)
    return sum(p.numel() for p in model.parameters())


#: bundled configs whose architecture transformers has no class for, and where their parameter
#: counts are checked instead (never skipped: each is named here)
NOT_IN_TRANSFORMERS = {
    # an EAGLE-3 draft head (vLLM's own class): its bytes equal vLLM 0.33's draft parameter bytes
    # in tests/test_speculative.py::test_draft_weights_match_vllm
    "LlamaForCausalLMEagle3",
}


def _architecture(bundled) -> str | None:
    return (bundled.load().get("architectures") or [None])[0]


def test_every_bundled_model_is_counted_against_transformers_or_named():
    transformers = pytest.importorskip("transformers")
    for bundled in bundled_models():
        arch = _architecture(bundled)
        built = getattr(transformers, arch or "", None) is not None
        assert built != (arch in NOT_IN_TRANSFORMERS), (bundled.alias, arch)


@pytest.mark.torch
@pytest.mark.parametrize(
    "bundled",
    [b for b in bundled_models() if _architecture(b) not in NOT_IN_TRANSFORMERS],
    ids=lambda b: b.alias,
)
def test_count_matches_transformers_meta_build(bundled):
    expected = _meta_count(bundled.load())
    got = count_parameters(parse_config(bundled.load(), name=bundled.hf_id).weights).total
    assert abs(got - expected) <= 0.005 * expected, (got, expected)


# -- bytes: quantized checkpoints ------------------------------------------------------------------
def test_deepseek_v3_fp8_block_scales():
    # bf16: embed + lm_head 1,853,358,080; routers 58 × 1,835,008 = 106,430,464; norms 61 × 16,384 +
    #   7,168 = 1,006,592 → 1,960,795,136 params × 2 B = 3,921,590,272 B
    # fp8: the other 671,026,404,352 − 1,960,795,136 = 669,065,609,216 params × 1 B
    # fp32 scales, one per 128×128 block: per layer q_a 12·56 + q_b 192·12 + kv_a 5·56 + kv_b
    #   256·4 + o 56·128 = 11,448; dense MLP 288·56 + 56·144 = 24,192; MoE layer 257 experts
    #   (256 routed + shared) × (32·56 + 56·16) = 690,816
    #   61 · 11,448 + 3 · 24,192 + 58 · 690,816 = 40,838,232 scales × 4 B = 163,352,928 B
    w = weight_bytes(bundled_shape("deepseek-v3"))
    assert w.by_dtype == {"bf16": 3_921_590_272, "fp8": 669_065_609_216, "fp32": 163_352_928}
    assert w.weights_bytes == 673_150_552_416  # 627 GiB; + MTP module ≈ the published 688.6 GB
    assert 642e9 <= w.weights_bytes <= 690e9
    assert w.quantization == "fp8" and w.source == "config estimate"


def test_gpt_oss_mxfp4_experts_only():
    # experts: 36 layers × 128 × (2,880 × 5,760 + 2,880 × 2,880) = 114,661,785,600 values at 4 bits
    #   + one e8m0 byte per 32 → × 17/32 = 60,914,073,600 B; expert biases, attention, router,
    #   embeddings and lm_head (modules_to_not_convert) stay bf16: (116,829,156,672 −
    #   114,661,785,600) × 2 = 4,334,742,144 B → 65,248,815,744 B = 60.77 GiB (published ~60.8 GiB)
    w = weight_bytes(bundled_shape("gpt-oss-120b"))
    assert w.weights_bytes == 60_914_073_600 + 4_334_742_144 == 65_248_815_744
    assert w.by_dtype["fp4"] == 114_661_785_600 // 2 and w.by_dtype["e8m0"] == 114_661_785_600 // 32
    # gpt-oss-20b: 24 × 32 × 24,883,200 = 19,110,297,600 → 10,152,345,600 + bf16 3,608,919,168
    assert weight_bytes(bundled_shape("gpt-oss-20b")).weights_bytes == 13_761_264_768  # 12.82 GiB
    assert 12.7 * GIB < 13_761_264_768 < 12.9 * GIB


def test_gpt_oss_loaded_as_vllm_pads_it():
    # vLLM's Marlin/TRT-LLM mxfp4 MoE tiles: hidden 2,880 → 3,072, expert width 2,880 → 2,944.
    # One expert: gate_up 5,888 × 3,072 at 4 bits = 9,043,968 B + 5,888 × 96 scales = 565,248;
    # down 3,072 × 2,944 = 4,521,984 + 3,072 × 92 = 282,624; bf16 biases (5,888 + 3,072) × 2 = 17,920
    # → 14,431,744 B vs the checkpoint's 13,236,480: × 128 experts × 36 layers = +5,507,776,512 B
    w = weight_bytes(bundled_shape("gpt-oss-120b"))
    assert w.layout_padding_bytes_per_gpu == (14_431_744 - 13_236_480) * 128 * 36 == 5_507_776_512
    assert w.weights_bytes_per_gpu == 65_248_815_744 + 5_507_776_512
    # + the 16 MiB RoPE cache = 65.91 GiB; vLLM logged "Model loading took 65.9651 GiB" (vllm-23278)
    assert abs((w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu) / GIB - 65.9651) <= 0.06
    # gpt-oss-20b at TP 2 (expert width 1,440 per rank → 1,536): 7.08 GiB; logged 7.01
    # (repolog-llmd-gpt-oss-20b-2xh100-tp2); the checkpoint's share alone would be 6.43
    w = weight_bytes(bundled_shape("gpt-oss-20b"), tensor_parallel_size=2)
    assert abs((w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu) / GIB - 7.01) <= 0.08
    assert any("mxfp4 experts as vLLM loads them" in n for n in w.notes)


def test_siglip_and_pixtral_towers_counted():
    # Gemma 3 27B's SigLIP: per layer 4 × (1,152² + 1,152) attention + 2 × 1,152 × 4,304 + 5,456
    # MLP + 4 × 1,152 norms = 15,239,504, × 27 = 411,466,608; patch 677,376 + 1,152, positions
    # 4,096 × 1,152 = 4,718,592, post-LN 2,304; projector 5,376 × 1,152 + 1,152 → 423,060,336
    gemma = parse_config({
        "model_type": "gemma3", "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
                        "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
                        "head_dim": 128, "vocab_size": 262208, "sliding_window": 1024},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                          "num_hidden_layers": 27, "image_size": 896, "patch_size": 14},
    }, name="gemma-3-27b")  # fmt: skip
    assert count_parameters(gemma.weights).vision == 423_060_336
    # Mistral Small 3.1's Pixtral: per layer 4 × 1,024² + 3 × 1,024 × 4,096 + 2 × 1,024 = 16,779,264,
    # × 24 = 402,702,336; patch 602,112, ln_pre 1,024; projector norm 1,024, merger 1,024 × 4,096,
    # linear_1 5,120 × 1,024, linear_2 5,120² → 438,958,080, kept bf16 by the w8a8 checkpoint
    mistral = parse_config({
        "model_type": "mistral3", "torch_dtype": "bfloat16", "spatial_merge_size": 2,
        "text_config": {"model_type": "mistral", "hidden_size": 5120, "intermediate_size": 32768,
                        "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
                        "head_dim": 128, "vocab_size": 131072, "max_position_embeddings": 131072},
        "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "intermediate_size": 4096,
                          "num_hidden_layers": 24, "image_size": 1540, "patch_size": 14},
        "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {
            "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}}},
            "ignore": ["lm_head"]},
    }, name="mistral-small-3.1-w8a8")  # fmt: skip
    assert count_parameters(mistral.weights).vision == 438_958_080
    w = weight_bytes(mistral)
    # logged "Model loading took 24.07 GiB" (repolog-llmd-mistral-small31-24b-w8a8-h100-tp1)
    assert abs((w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu) / GIB - 24.07) <= 0.02


def test_rope_caches_linear_scaling_and_gemma3_local():
    # vLLM's LinearScalingRotaryEmbedding caches max_position × factor rows; Gemma 3's sliding layers
    # keep a second, unscaled cache: (131,072 × 8 + 131,072) × 128 × 2 B = 301,989,888 B (288 MiB).
    # With it Gemma 3 27B loads 51.38 GiB; vLLM logged 51.45 (repolog-llmd-gemma3-27b-h100-tp1)
    gemma = parse_config({
        "model_type": "gemma3", "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
                        "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
                        "head_dim": 128, "vocab_size": 262208, "sliding_window": 1024,
                        "max_position_embeddings": 131072, "rope_local_base_freq": 10000.0,
                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                          "num_hidden_layers": 27, "image_size": 896, "patch_size": 14},
    }, name="gemma-3-27b")  # fmt: skip
    w = weight_bytes(gemma)
    # (+ 62 attention layers' four fp32 scales, 16 B each)
    assert w.buffers_bytes_per_gpu == (131_072 * 8 + 131_072) * 128 * 2 + 62 * 16 == 301_990_880
    assert abs((w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu) / GIB - 51.45) <= 0.08


def test_vocabulary_padded_per_rank():
    # gpt2: 50,257 rows → 50,304 (a multiple of 64) → 25,152 per rank at TP 2 instead of 25,129:
    # 23 rows × 768 × 2 B = 35,328 B more on each GPU; the whole-checkpoint figure is unchanged
    w = weight_bytes(bundled_shape("gpt2"), tensor_parallel_size=2)
    assert w.layout_padding_bytes_per_gpu == 23 * 768 * 2 == 35_328
    assert weight_bytes(bundled_shape("gpt2")).weights_bytes == w.weights_bytes
    # Llama's 128,256 rows are already a multiple of 64: no padding
    assert (
        weight_bytes(
            bundled_shape("llama-3.1-8b"), tensor_parallel_size=4
        ).layout_padding_bytes_per_gpu
        == 0
    )


def test_hypothetical_awq_gptq_bnb_fp8_on_llama_8b():
    # linear values: 32 × 218,103,808 = 6,979,321,856; the rest (embed, lm_head, norms)
    # 1,050,939,392 stays bf16 = 2,101,878,784 B
    m, lin, rest = bundled_shape("llama-3.1-8b"), 6_979_321_856, 2_101_878_784
    # AWQ: 4 bits = lin/2; fp16 scale + 4-bit zero per 128 values: lin/128 · 2.5 B
    assert (
        weight_bytes(m, quantization="awq").weights_bytes == lin // 2 + lin // 128 * 5 // 2 + rest
    )
    # GPTQ adds an int32 g_idx per input column: q, k, v, o, gate, up read 4,096 inputs, down 14,336
    gidx = 32 * 4 * (6 * 4_096 + 14_336)
    assert (
        weight_bytes(m, quantization="gptq").weights_bytes
        == lin // 2 + lin // 128 * 5 // 2 + gidx + rest
    )
    # bitsandbytes nf4: 4 bits + fp32 absmax per 64 values; lm_head skipped (stays bf16 in `rest`)
    assert weight_bytes(m, quantization="bnb").weights_bytes == lin // 2 + lin // 64 * 4 + rest
    # online fp8: 1 byte + one fp32 scale per matrix (q, k, v, o, gate, up, down × 32 layers)
    assert weight_bytes(m, quantization="fp8").weights_bytes == lin + 7 * 32 * 4 + rest
    assert weight_bytes(m, quantization="none").weights_bytes == 2 * 8_030_261_248


def test_mxfp4_override_leaves_dense_models_unquantized():
    # vLLM's Mxfp4Config has no linear method: a dense model keeps every weight in bf16
    assert (
        weight_bytes(bundled_shape("qwen3-8b"), quantization="mxfp4").weights_bytes
        == 2 * 8_190_735_360
    )


def test_dtype_override_and_float32_configs():
    assert (
        weight_bytes(bundled_shape("llama-3.1-8b"), dtype="fp32").weights_bytes == 4 * 8_030_261_248
    )
    w = weight_bytes(bundled_shape("gpt2"))  # no torch_dtype: served in 16 bits
    assert w.weights_bytes == 2 * 124_439_808 and w.dtype == "bf16"


def _with_quant(ref: str, quant: dict):
    raw = dict(bundled_config(ref), quantization_config=quant)
    return parse_config(raw, name=ref)


def test_compressed_tensors_w4a16_and_ignore_list():
    quant = {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group",
                                           "group_size": 128, "symmetric": True}}}}  # fmt: skip
    w = weight_bytes(_with_quant("llama-3.1-8b", quant))
    # symmetric: no zero points; bf16 group scales lin/128 · 2 B
    assert w.weights_bytes == 6_979_321_856 // 2 + 6_979_321_856 // 128 * 2 + 2_101_878_784


def test_checkpoint_skip_modules_and_unsupported_method():
    # vLLM 0.33's fp8 skips whole modules by name (ignored_layers_match_mode "exact"): a glob or a
    # substring ("self_attn", MiniMax-M2.5's "gate") skips nothing
    skips = ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj", "self_attn",
             "model.layers.*.mlp", "gate"]  # fmt: skip
    w = weight_bytes(_with_quant("llama-3.1-8b", {"quant_method": "fp8",
                                                  "modules_to_not_convert": skips}))  # fmt: skip
    # layer 0's q and o stay bf16: 2 × 4,096² = 33,554,432 values × 2 B; the other 32 · 7 − 2 = 222
    # matrices fp8 (32 × 218,103,808 − 33,554,432 values × 1 B) + one fp32 scale each
    kept = 2 * 4_096**2
    assert w.weights_bytes == 2 * kept + (32 * 218_103_808 - kept) + 222 * 4 + 2_101_878_784
    with pytest.raises(InputError) as err:
        weight_bytes(_with_quant("llama-3.1-8b", {"quant_method": "hqq"}))
    assert err.value.code == "unsupported-quantization"
    assert weight_bytes(
        _with_quant("llama-3.1-8b", {"quant_method": "hqq"}), quantization="none"
    ).weights_bytes


# -- bytes per GPU: tensor and pipeline parallelism ------------------------------------------------
def test_llama_70b_tp4_pp2():
    # one rank of one layer: q,o 2 × 8,192² / 4; k,v 2 × 1,024 × 8,192 / 4; MLP 3 × 28,672 × 8,192 / 4;
    # norms 2 × 8,192 replicated → 213,925,888 values = 427,851,776 B; 40 layers per stage
    layers = 40 * 427_851_776
    embed = 128_256 * 8_192 // 4 * 2  # vocab-split embedding (first stage) and lm_head (last)
    w = weight_bytes(
        bundled_shape("llama-3.1-70b"), tensor_parallel_size=4, pipeline_parallel_size=2
    )
    assert w.stage_bytes_per_gpu == (layers + embed, layers + embed + 2 * 8_192)
    assert w.weights_bytes_per_gpu == layers + embed + 16_384 == 17_639_424_000


def test_kv_heads_replicated_when_fewer_than_tp():
    # TP 16, 8 KV heads: each rank keeps one whole head (128 × 4,096) of k and of v
    # layer per rank: q,o 2 × 4,096² / 16 + k,v 2 × 128 × 4,096 + MLP 3 × 896 × 4,096 + norms 8,192
    layer = 2_097_152 + 1_048_576 + 11_010_048 + 8_192
    w = weight_bytes(bundled_shape("llama-3.1-8b"), tensor_parallel_size=16)
    assert w.weights_bytes_per_gpu == 2 * (32 * layer + 2 * 8_016 * 4_096 + 4_096) == 1_037_836_288
    assert any("replicated KV head" in n for n in w.notes)


def test_pp_split_follows_vllm_get_pp_indices():
    assert pp_layer_counts(61, 4) == (15, 15, 16, 15)  # remainder 1 → partition [-2]
    assert pp_layer_counts(80, 3) == (27, 27, 26)  # remainder 2 → [-2], [-3]
    assert pp_layer_counts(32, 4) == (8, 8, 8, 8)


def test_tied_embeddings_under_pp_get_a_second_copy():
    # Qwen3-0.6B ties lm_head to the embedding; with PP 2 the last stage builds its own copy
    one = weight_bytes(bundled_shape("qwen3-0.6b"))
    two = weight_bytes(bundled_shape("qwen3-0.6b"), pipeline_parallel_size=2)
    assert sum(two.stage_bytes_per_gpu) == one.weights_bytes + 151_936 * 1_024 * 2


def test_rope_cache_buffer():
    # vLLM keeps max_position × rotary_dim cos/sin values in the model dtype: Qwen3-0.6B
    # 40,960 × 128 × 2 B = 10 MiB, why it logs 1.1201 GiB for 1.1102 GiB of weights (vllm-24577)
    w = weight_bytes(bundled_shape("qwen3-0.6b"))
    # (+ 28 attention layers' four fp32 scales, _k/_v/_q/_prob_scale: 16 B each)
    assert w.buffers_bytes_per_gpu == 40_960 * 128 * 2 + 28 * 16
    # 1,192,099,840 + 10,485,760 B = 1.11998 GiB; the printed 1.1201 lies 0.07-0.18 MiB above
    assert abs(w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu - 1.1201 * GIB) < (1 << 20)


def test_rope_cache_reads_the_nested_partial_rotary_factor():
    # Qwen3.5 nests partial_rotary_factor 0.25 in rope_parameters, where vLLM's get_rope reads it
    # (rotary_embedding/__init__.py: rotary_dim = int(head_size * partial_rotary_factor)):
    # 262,144 positions × int(256 × 0.25) = 64 × 2 B = 33,554,432 B (not × 256: 134,217,728),
    # plus the vision tower's 8,192 × 72 / 2 × 2 B = 589,824 B
    w = weight_bytes(fixture_shape("Qwen--Qwen3.5-35B-A3B"), tensor_parallel_size=2)
    # (+ the 10 attention layers' four fp32 scales, 16 B each; the 30 Gated DeltaNet layers have none)
    assert w.buffers_bytes_per_gpu == 262_144 * 64 * 2 + 8_192 * 36 * 2 + 10 * 16 == 34_144_416
    # vLLM 0.33 (speculative.json q35_mtp1, deploy_probe, TP 2): 35,167,171,408 B of parameters and
    # buffers per rank, to the byte — with the 30 Gated DeltaNet layers' A_log in fp32, as vLLM
    # creates it (qwen_gdn_linear_attn.py, dtype=torch.float32): 16 heads per rank × 4 B each (in
    # bf16 the estimate was 30 × 16 × 2 = 960 B short)
    recorded = 35_167_171_408
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == recorded
    assert w.by_dtype["fp32"] == 30 * 32 * 4  # the whole model: 32 value heads per layer


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"tensor_parallel_size": 0}, "invalid-parallelism"),
        ({"pipeline_parallel_size": 33}, "invalid-parallelism"),
        ({"quantization": "int3"}, "unknown-quantization"),
        ({"dtype": "fp12"}, "unknown-dtype"),
    ],
)
def test_bad_inputs(kwargs, code):
    with pytest.raises(InputError) as err:
        weight_bytes(bundled_shape("llama-3.1-8b"), **kwargs)
    assert err.value.code == code


def test_config_without_sizes_still_parses_but_cannot_be_weighed():
    raw = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}
    model = parse_config(json.loads(json.dumps(raw)), name="tiny")
    assert model.num_layers == 2
    with pytest.raises(InputError) as err:
        weight_bytes(model)
    assert err.value.code == "weights-unknown"
