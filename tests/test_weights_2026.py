"""Parameter counts of the 2026 families: hand-computed layers, then every config in the vLLM
reference fixtures against transformers 5.24 built on the meta device — equal to the parameter, or
refused (``weights-unknown``) where kvcalc does not count the family, or listed with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.errors import InputError
from kvcalc.estimate.tensors import inventory
from kvcalc.estimate.weights import count_parameters
from kvcalc.hfconfig import parse_config

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_0_33"
CONFIGS: dict[str, dict] = {}
for _file in ("reference_configs.json", "attention_families.json", "hybrid_families.json"):
    for _name, _model in json.loads((FIXTURES / _file).read_text())["models"].items():
        CONFIGS.setdefault(_name, _model["config"])

#: transformers 5.24 has no class for these architectures (nothing to compare with)
NO_TRANSFORMERS_CLASS = {
    "XiaomiMiMo--MiMo-7B-Base.json",  # MiMoForCausalLM (remote code)
    "moonshotai--Kimi-K2.5.json",  # KimiK25ForConditionalGeneration (remote code)
    "stepfun-ai--Step-3.7-Flash.json",  # Step3p7FlashForCausalLM; refused as config-unverified
    "synthetic--minimax-text-01-defaults.json",  # MiniMaxText01ForCausalLM; config-unsupported
}
#: kvcalc does not count these families' weights from config.json: ``weights-unknown``, and the
#: user passes --weights-memory (or plans from safetensors headers)
NOT_COUNTED: set[str] = set()
#: refused before weights (config-unsupported): vLLM 0.33 cannot build them either
REFUSED = {"synthetic--minimax-defaults-MiniMaxForCausalLM.json"}
#: kvcalc's count minus transformers', and why
DEVIATIONS = {
    # no vision_config in this copy: transformers builds Llama4VisionConfig()'s default tower
    # (415,856,640) and projector (5,120 × 7,680 = 39,321,600); kvcalc counts no tower it is not told
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct.json": -(415_856_640 + 39_321_600),
}


def shape(name: str):
    return parse_config(CONFIGS[name], name=name).weights


def shape_of_registry(name: str):
    """A config of ``registry_families_2026_12.json`` (its families' own recordings)."""
    models = json.loads((FIXTURES / "registry_families_2026_12.json").read_text())["models"]
    return parse_config(models[name]["config"], name=name).weights


def shape_of_registry_recurrent(name: str):
    """A config of ``registry_families_recurrent.json``."""
    models = json.loads((FIXTURES / "registry_families_recurrent.json").read_text())["models"]
    return parse_config(models[name]["config"], name=name).weights


def layer_params(w, i: int) -> int:
    """The parameters of layer ``i`` (not the tensors only vLLM allocates, as Gemma 4's V slot)."""
    return sum(t.numel for t in inventory(w) if t.layer == i and not t.engine_only)


# -- hand-computed layers -------------------------------------------------------------------------
def test_qwen3_5_attention_output_gate_and_qk_norm():
    # Qwen3.5-35B-A3B full-attention layer 3: q_proj 2 × 16 heads × 256 × 2,048 = 16,777,216 (query
    # and output gate); k, v 2 × 512 × 2,048 = 2,097,152; o 2,048 × 4,096 = 8,388,608; q/k norm
    # 2 × 256; MoE: router 256 × 2,048 = 524,288; experts 256 × (1,024 + 512) × 2,048 =
    # 805,306,368; shared 3 × 512 × 2,048 + gate 2,048 = 3,147,776; norms 2 × 2,048 → 836,246,016
    w = shape("Qwen--Qwen3.5-35B-A3B.json")
    assert layer_params(w, 3) == (16_777_216 + 2_097_152 + 8_388_608 + 512 + 524_288
                                  + 805_306_368 + 3_147_776 + 4_096) == 836_246_016  # fmt: skip


def test_qwen3_5_vision_tower():
    # 27 blocks of LayerNorms 4 × 1,152, qkv 3,456 × 1,152 + 3,456, proj 1,152² + 1,152, fc1 4,304 ×
    # 1,152 + 4,304, fc2 1,152 × 4,304 + 1,152 = 15,239,504 each; patch 1,152 × 3·2·16·16 + 1,152;
    # positions 2,304 × 1,152; merger 2 × 1,152 + 4,608² + 4,608 + 2,048 × 4,608 + 2,048
    c = count_parameters(shape("Qwen--Qwen3.5-35B-A3B.json"))
    merger = 2 * 1_152 + 4_608**2 + 4_608 + 2_048 * 4_608 + 2_048
    assert c.vision == (27 * 15_239_504 + 1_152 * 1_536 + 1_152 + 2_304 * 1_152
                        + merger) == 446_571_248  # fmt: skip


def test_gemma4_global_layers_share_k_and_v():
    # sliding layer 0: q 8,192 × 5,376, k, v 2 × 4,096 × 5,376, o 5,376 × 8,192, q/k norm 2 × 256,
    #   MLP 3 × 21,504 × 5,376, four norms 4 × 5,376 → 478,959,104
    # global layer 5: q 16,384 × 5,376, k 2,048 × 5,376 and no v (attention_k_eq_v), o 5,376 ×
    #   16,384, q/k norm 2 × 512, same MLP and norms → 534,009,856
    w = shape("nvidia--Gemma-4-31B-IT-NVFP4.json")
    mlp, norms = 3 * 21_504 * 5_376, 4 * 5_376
    assert layer_params(w, 0) == 2 * 8_192 * 5_376 + 2 * 4_096 * 5_376 + 512 + mlp + norms
    assert layer_params(w, 5) == 2 * 16_384 * 5_376 + 2_048 * 5_376 + 1_024 + mlp + norms
    assert (layer_params(w, 0), layer_params(w, 5)) == (478_959_104, 534_009_856)


def test_deepseek_v4_compressors_indexer_and_hyper_connections():
    # sliding layer 0 (ratio 0): q_a 1,024 × 4,096 + norm 1,024; q_b 32,768 × 1,024; kv 512 ×
    #   4,096 + norm 512; o_a 8,192 × 4,096; o_b 4,096 × 8,192; sinks 64; MoE router 256 × 4,096,
    #   experts 256 × (4,096 + 2,048) × 4,096, shared 3 × 2,048 × 4,096; norms 2 × 4,096;
    #   hyper-connections 2 × (24 × 16,384 + 24 + 3) → 6,576,416,374
    # HCA layer 3 (ratio 128): + kv and gate 2 × 512 × 4,096, position bias 128 × 512, kv_norm 512
    # CSA layer 2 (ratio 4): + kv and gate 2 × 1,024 × 4,096, position bias 4 × 1,024, kv_norm 512;
    #   indexer kv and gate 2 × 256 × 4,096, position bias 4 × 256, kv_norm 128, q_b 8,192 × 1,024,
    #   weights 64 × 4,096
    w = shape("deepseek-ai--DeepSeek-V4-Flash.json")
    base = (4_194_304 + 1_024 + 33_554_432 + 2_097_152 + 512 + 2 * 33_554_432 + 64 + 1_048_576
            + 256 * 6_144 * 4_096 + 3 * 8_388_608 + 8_192 + 2 * (393_216 + 27))  # fmt: skip
    hca = 2 * 2_097_152 + 65_536 + 512
    csa = 2 * 4_194_304 + 4_096 + 512 + 2 * 1_048_576 + 1_024 + 128 + 8_388_608 + 262_144
    assert (layer_params(w, 0), layer_params(w, 3), layer_params(w, 2)) == (
        base, base + hca, base + csa) == (6_576_416_374, 6_580_676_726, 6_595_558_646)  # fmt: skip


def test_nemotron_3_super_latent_moe():
    # MoE layer 1: router 512 × 4,096; 512 experts of up 2,688 × 1,024 and down 1,024 × 2,688 (the
    # latent width, not the hidden size); shared expert 2 × 5,376 × 4,096; latent projections
    # 2 × 1,024 × 4,096; one norm 4,096 → 2,873,102,336 (was 4× too many with experts on 4,096)
    w = shape("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json")
    assert layer_params(w, 1) == (2_097_152 + 512 * 2 * 2_688 * 1_024 + 2 * 22_020_096
                                  + 2 * 4_194_304 + 4_096) == 2_873_102_336  # fmt: skip


def test_lfm2_short_convolution_layers():
    # LFM2-1.2B conv layer 0: in_proj 3 × 2,048 × 2,048 = 12,582,912; depthwise conv 2,048 × 3;
    #   out_proj 2,048²; FFN (block_ff_dim 12,288 → 2/3 = 8,192) 3 × 8,192 × 2,048; 2 norms
    # attention layer 2: q, o 2 × 2,048²; k, v 2 × 512 × 2,048; q/k layernorms 2 × 64; same FFN
    w = shape("LiquidAI--LFM2-1.2B.json")
    ffn, norms = 3 * 8_192 * 2_048, 2 * 2_048
    assert layer_params(w, 0) == 12_582_912 + 6_144 + 2_048**2 + ffn + norms == 67_119_104
    assert layer_params(w, 2) == (2 * 2_048**2 + 2 * 512 * 2_048 + 128 + ffn
                                  + norms) == 60_821_632  # fmt: skip


def test_granite_4_h_mamba2_moe_and_shared_mlp():
    # transformers' GraniteMoeHybridConfig() layout, Mamba2 layer 0: inner 2 × 4,096 = 8,192 over
    #   128 heads × 64; conv_dim 8,192 + 2 × 256 = 8,704; in_proj (2 × 8,192 + 2 × 256 + 128) × 4,096
    #   = 69,730,304; conv 8,704 × 4 + bias 8,704; dt_bias, A_log, D 3 × 128; norm 8,192; out_proj
    #   4,096 × 8,192; MoE router 8 × 4,096, experts 8 × 3 × 11,008 × 4,096; shared MLP 3 × 1,024 ×
    #   4,096; 2 norms
    w = shape("synthetic--granite-4.0-h-defaults.json")
    moe = 32_768 + 8 * 3 * 11_008 * 4_096 + 3 * 1_024 * 4_096 + 2 * 4_096
    mamba = 69_730_304 + 34_816 + 8_704 + 384 + 8_192 + 33_554_432
    assert layer_params(w, 0) == mamba + moe
    # attention layer 5: q, o 2 × 4,096²; k, v 2 × 1,024 × 4,096
    assert layer_params(w, 5) == 2 * 4_096**2 + 2 * 1_024 * 4_096 + moe


def test_jamba_mamba1_and_experts_every_other_layer():
    # Jamba-1.5-Mini Mamba1 layer 0 (dense FFN): in_proj 2 × 8,192 × 4,096; conv 8,192 × 4 + bias;
    #   x_proj (256 + 2 × 16) × 8,192; dt_proj 8,192 × 256 + bias 8,192; A_log 8,192 × 16; D 8,192;
    #   out_proj 4,096 × 8,192; dt/B/C norms 256 + 16 + 16; MLP 3 × 14,336 × 4,096; 2 norms
    # layer 1 (expert_layer_offset 1, period 2): 16 experts 3 × 14,336 × 4,096 + router 16 × 4,096
    w = shape("ai21labs--AI21-Jamba-1.5-Mini.json")
    mamba = (67_108_864 + 32_768 + 8_192 + 2_359_296 + 2_097_152 + 8_192 + 131_072 + 8_192
             + 33_554_432 + 288)  # fmt: skip
    mlp, norms = 3 * 14_336 * 4_096, 2 * 4_096
    assert layer_params(w, 0) == mamba + mlp + norms
    assert layer_params(w, 1) == mamba + 16 * mlp + 16 * 4_096 + norms
    # attention layer 4 (attn_layer_offset 4): q, o 2 × 4,096², k, v 2 × 1,024 × 4,096; dense MLP
    assert layer_params(w, 4) == 2 * 4_096**2 + 2 * 1_024 * 4_096 + mlp + norms


def test_falcon_h1_attention_and_mamba2_side_by_side():
    # FalconH1Config() layer 0: attention q, o 2 × 4,096², k, v 2 × 1,024 × 4,096; Mamba2 of
    #   mamba_d_ssm 1,024 (128 heads × 8): in_proj (2 × 1,024 + 2 × 256 + 128) × 4,096 =
    #   11,010,048, conv (1,024 + 512) × 4 + bias 1,536, dt_bias/A_log/D 3 × 128, out_proj 4,096 ×
    #   1,024, no gated norm (mamba_rms_norm false); MLP 3 × 14,336 × 4,096; 2 norms
    w = shape("synthetic--falcon-h1-defaults.json")
    attention = 2 * 4_096**2 + 2 * 1_024 * 4_096
    mamba = 11_010_048 + 6_144 + 1_536 + 384 + 4_194_304
    assert layer_params(w, 0) == attention + mamba + 3 * 14_336 * 4_096 + 2 * 4_096


def test_dsa_indexer_weights():
    # GLM-5 layer: indexer wq_b 32 × 128 × 2,048 = 8,388,608, wk 128 × 6,144 = 786,432, k_norm
    # (LayerNorm) 256, weights_proj 32 × 6,144 = 196,608 → 9,371,904 beside the MLA projections
    w = shape("zai-org--GLM-5.json")
    indexer = sum(t.numel for t in inventory(w) if t.layer == 0 and ".indexer." in t.name)
    assert indexer == 8_388_608 + 786_432 + 256 + 196_608 == 9_371_904


def test_mimo_v2_flash_layer_types_and_moe_layer_freq():
    # full layer 0 (dense: moe_layer_freq[0] = 0): q 64 × 192 × 4,096 = 50,331,648; k 4 × 192 ×
    #   4,096 = 3,145,728; v 4 × 128 × 4,096 = 2,097,152 (v_head_dim); o 4,096 × 64 × 128 =
    #   33,554,432; MLP 3 × 16,384 × 4,096 = 201,326,592; 2 norms 8,192 → 290,463,744
    # sliding layer 1 (MoE): q 50,331,648; k 8 × 192 × 4,096 = 6,291,456; v 8 × 128 × 4,096 =
    #   4,194,304; o 33,554,432; sinks 64; router 256 × 4,096 = 1,048,576; experts 256 × 3 ×
    #   2,048 × 4,096 = 6,442,450,944; 2 norms → 6,537,879,616
    w = shape("XiaomiMiMo--MiMo-V2-Flash.json")
    assert layer_params(w, 0) == (50_331_648 + 3_145_728 + 2_097_152 + 33_554_432 + 201_326_592
                                  + 8_192) == 290_463_744  # fmt: skip
    assert layer_params(w, 1) == (50_331_648 + 6_291_456 + 4_194_304 + 33_554_432 + 64
                                  + 1_048_576 + 6_442_450_944 + 8_192) == 6_537_879_616  # fmt: skip


def test_gemma3n_altup_laurel_and_per_layer_embeddings():
    # E2B layer 0: q 2,048² = 4,194,304 and q_norm 256; k, v 2 × 512 × 2,048 = 2,097,152 and
    #   k_norm 256; o 4,194,304; MLP (intermediate_size[0]) 3 × 8,192 × 2,048 = 50,331,648; AltUp
    #   correction 4 × 4 + prediction 16 × 4 + router 4 × 2,048 + router norm 2,048 + output scale
    #   2,048 = 12,368; LAuReL 2 × 64 × 2,048 + norm 2,048 = 264,192; per-layer input gate and
    #   projection 2 × 256 × 2,048 = 1,048,576; five norms 10,240 → 62,153,296
    # KV-shared layer 20 (num_kv_shared_layers 10 of 30): no k, v, k_norm → 62,153,296 − 2,097,408
    w = shape("gemma-3n-text.json")
    layer = (4_194_304 + 256 + 2_097_152 + 256 + 4_194_304 + 50_331_648 + 12_368 + 264_192
             + 1_048_576 + 10_240)  # fmt: skip
    assert (layer_params(w, 0), layer_params(w, 20)) == (layer, layer - 2_097_408)
    assert (layer, layer - 2_097_408) == (62_153_296, 60_055_888)
    # per model: embed_tokens_per_layer 262,144 × 30 · 256; its projection 7,680 × 2,048; its norm
    #   256; 3 AltUp projections and 3 unembed projections 6 × 2,048²
    extras = sum(t.numel for t in inventory(w)
                 if t.layer is None and ("altup" in t.name or "per_layer" in t.name))  # fmt: skip
    assert extras == 262_144 * 7_680 + 7_680 * 2_048 + 256 + 6 * 2_048**2 == 2_054_160_640


def test_kimi_linear_kda_and_nope_mla_layers():
    # Kimi-Linear-48B-A3B KDA layer 1 (32 heads × 128 = 4,096): q, k, v 3 × 4,096 × 2,304 =
    #   28,311,552; beta 32 × 2,304 = 73,728; forget gate f_a 128 × 2,304 = 294,912, f_b 4,096 ×
    #   128 = 524,288, dt_bias 4,096, A_log 32; conv 3 × 4,096 × 4 = 49,152; output gate g_a
    #   294,912, g_b 524,288; o_norm 128; o_proj 2,304 × 4,096 = 9,437,184 → 39,514,272
    # MoE (first_k_dense_replace 1): router 256 × 2,304 = 589,824; experts 256 × 3 × 1,024 ×
    #   2,304 = 1,811,939,328; one shared expert 3 × 1,024 × 2,304 = 7,077,888; 2 norms 4,608
    # MLA layer 3 (no q LoRA, no RoPE): q 32 × 192 × 2,304 = 14,155,776; kv_a 576 × 2,304 =
    #   1,327,104; kv_a norm 512; kv_b 32 × 256 × 512 = 4,194,304; o 9,437,184 → 29,114,880
    w = shape("moonshotai--Kimi-Linear-48B-A3B-Instruct.json")
    kda = (28_311_552 + 73_728 + 294_912 + 524_288 + 4_096 + 32 + 49_152 + 294_912 + 524_288
           + 128 + 9_437_184)  # fmt: skip
    moe = 589_824 + 1_811_939_328 + 7_077_888 + 4_608
    mla = 14_155_776 + 1_327_104 + 512 + 4_194_304 + 9_437_184
    assert (kda, mla) == (39_514_272, 29_114_880)
    assert (layer_params(w, 1), layer_params(w, 3)) == (kda + moe, mla + moe)
    assert (w.rope_cache_positions, w.moe.experts_per_token) == (0, 8)


def test_lfm2_moe_dense_layers_then_experts():
    # LFM2-MoE defaults, conv layer 0 (num_dense_layers 2: dense): in_proj 3 × 2,048² =
    #   12,582,912; conv 2,048 × 3 = 6,144; out_proj 2,048² = 4,194,304; MLP 3 × 7,168 × 2,048 =
    #   44,040,192 (intermediate_size, no 2/3 adjustment); 2 norms 4,096 → 60,827,648
    # conv layer 3 (MoE): the same mixer; router 32 × 2,048 = 65,536; experts 32 × 3 × 1,792 ×
    #   2,048 = 352,321,536; 2 norms → 369,174,528
    # attention layer 2 (MoE): q, o 2 × 2,048²; k, v 2 × 512 × 2,048; q/k layernorms 2 × 64
    w = shape("synthetic--lfm2-moe-defaults.json")
    conv, moe = 12_582_912 + 6_144 + 4_194_304, 65_536 + 352_321_536 + 4_096
    assert layer_params(w, 0) == conv + 44_040_192 + 4_096 == 60_827_648
    assert layer_params(w, 3) == conv + moe == 369_174_528
    assert layer_params(w, 2) == 2 * 2_048**2 + 2 * 512 * 2_048 + 128 + moe == 362_877_056


def test_bamba_mamba2_layers_and_attention_at_indices():
    # BambaConfig() layer 0 (Mamba2: 128 heads × 64 = 8,192, one group of state 256): in_proj
    #   (2 × 8,192 + 2 × 256 + 128) × 4,096 = 69,730,304; conv (8,192 + 512) × 4 = 34,816 and bias
    #   8,704; dt_bias, A_log, D 3 × 128; gated norm 8,192; out_proj 4,096 × 8,192 = 33,554,432;
    #   MLP 3 × 14,336 × 4,096 = 176,160,768; 2 norms 8,192 → 279,505,792
    # attention layer 9 (attn_layer_indices): q, o 2 × 4,096², k, v 2 × 1,024 × 4,096
    w = shape("synthetic--bamba-defaults.json")
    mlp = 176_160_768 + 8_192
    mamba = 69_730_304 + 34_816 + 8_704 + 384 + 8_192 + 33_554_432
    assert layer_params(w, 0) == mamba + mlp == 279_505_792
    assert layer_params(w, 9) == 2 * 4_096**2 + 2 * 1_024 * 4_096 + mlp


def test_longcat_flash_two_attentions_and_mlps_per_decoder_layer():
    # LongCat-Flash (6 decoder layers, 20 heads, kv_lora_rank 256) as 12 kvcalc layers. MLA:
    #   q_a 1,536 × 6,144 = 9,437,184 and norm 1,536; q_b 20 × 192 × 1,536 = 5,898,240; kv_a
    #   (256 + 64) × 6,144 = 1,966,080 and norm 256; kv_b 20 × 256 × 256 = 1,310,720; o 6,144 ×
    #   20 × 128 = 15,728,640 → 34,342,656; MLP 3 × 12,288 × 6,144 = 226,492,416; 2 norms 12,288
    # the even layer adds the MoE: router over 512 + 256 zero experts (768 × 6,144 = 4,718,592)
    #   and 512 experts 3 × 2,048 × 6,144 = 19,327,352,832; the two are transformers' decoder
    #   layer 0 (19,853,766,144)
    w = shape_of_registry("synthetic--longcat-flash-6-layers-20-heads-kv-lora-256-vllm-keys.json")
    odd = (9_437_184 + 1_536 + 5_898_240 + 1_966_080 + 256 + 1_310_720 + 15_728_640
           + 226_492_416 + 12_288)  # fmt: skip
    assert layer_params(w, 1) == odd == 260_847_360
    assert layer_params(w, 0) == odd + 4_718_592 + 19_327_352_832 == 19_592_918_784
    assert w.num_layers == 12 and layer_params(w, 0) + layer_params(w, 1) == 19_853_766_144


def test_step3p5_layer_types_head_gate_and_shared_expert():
    # Step-3.5-Flash's shape, full layer 0 (dense): q 64 × 128 × 4,096 = 33,554,432; k, v 2 × 8 ×
    #   128 × 4,096 = 8,388,608; o 33,554,432; q/k norms 2 × 128; head-wise gate g_proj 64 ×
    #   4,096 = 262,144; MLP 3 × 11,264 × 4,096 = 138,412,032; 2 norms 8,192
    # sliding layer 3 (96 query heads, MoE): q, o 2 × 96 × 128 × 4,096 = 100,663,296; k, v
    #   8,388,608; norms 256; g_proj 96 × 4,096 = 393,216; router 288 × 4,096 = 1,179,648;
    #   experts 288 × 3 × 1,280 × 4,096 = 4,529,848,320; shared expert 3 × 1,280 × 4,096 =
    #   15,728,640; 2 norms 8,192
    w = shape_of_registry("synthetic--step3p5-flash-shape.json")
    assert layer_params(w, 0) == (2 * 33_554_432 + 8_388_608 + 256 + 262_144 + 138_412_032
                                  + 8_192) == 214_180_096  # fmt: skip
    assert layer_params(w, 3) == (100_663_296 + 8_388_608 + 256 + 393_216 + 1_179_648
                                  + 4_529_848_320 + 15_728_640 + 8_192) == 4_656_210_176  # fmt: skip


def test_zamba2_shared_block_once_and_adapters_per_hybrid_layer():
    # Zamba2Config() Mamba2 layer 0: in_proj (2 × 5,120 + 2 × 64 + 8) × 2,560 = 26,562,560; conv
    #   (5,120 + 128) × 4 = 20,992 and bias 5,248; dt_bias, A_log, D 3 × 8; gated norm 5,120;
    #   out_proj 2,560 × 5,120 = 13,107,200; one norm 2,560 → 39,703,704
    # hybrid layer 6 (the shared block's first use): + linear 2,560² = 6,553,600; the block q, k,
    #   v 3 × 5,120² (2 × hidden in), o 2,560 × 5,120, MLP 3 × 10,240 × 2,560, norms 5,120 +
    #   2,560 = 170,401,280; its gate_up LoRA 128 × 2,560 + 20,480 × 128 = 2,949,120
    # hybrid layer 12: the block is shared, so only the linear and its own adapter
    w = shape_of_registry_recurrent("synthetic--zamba2-defaults.json")
    mamba, own = 39_703_704, 6_553_600 + 2_949_120
    block = 3 * 5_120**2 + 2_560 * 5_120 + 3 * 10_240 * 2_560 + 5_120 + 2_560
    assert block == 170_401_280
    assert (layer_params(w, 0), layer_params(w, 6), layer_params(w, 12)) == (
        mamba, mamba + own + block, mamba + own)  # fmt: skip


def test_olmo_hybrid_deltanet_and_full_qk_norms():
    # OlmoHybridConfig() DeltaNet layer 0 (30 key and value heads of 96 and 192): q, k 2 × 2,880
    #   × 3,840; v and the output gate g 2 × 5,760 × 3,840; a, b 2 × 30 × 3,840 = 230,400; conv
    #   (2 × 2,880 + 5,760) × 4 = 46,080; dt_bias, A_log 2 × 30; o_norm 192; o_proj 3,840 × 5,760
    # attention layer 3: q, k, v, o 4 × 3,840²; q/k norms over all heads 2 × 3,840
    # both: MLP 3 × 11,008 × 3,840 = 126,812,160 and 2 norms 7,680
    w = shape_of_registry_recurrent("synthetic--olmo-hybrid-defaults.json")
    mlp = 126_812_160 + 7_680
    gdn = (2 * 11_059_200 + 2 * 22_118_400 + 230_400 + 46_080 + 60 + 192
           + 22_118_400)  # fmt: skip
    assert layer_params(w, 0) == gdn + mlp == 215_570_172
    assert layer_params(w, 3) == 4 * 3_840**2 + 2 * 3_840 + mlp == 185_809_920


def test_hy_v3_dense_first_layer_then_experts():
    # Hunyuan V3 (vLLM's keys) layer 0 (first_k_dense_replace 1): q, o 2 × 8,192 × 4,096; k, v
    #   2 × 1,024 × 4,096; q/k norms 2 × 128 (qk_norm) → 75,497,728; MLP 3 × 13,312 × 4,096 =
    #   163,577,856; 2 norms 8,192
    # layer 1: router 192 × 4,096 = 786,432; 192 experts of expert_hidden_dim 1,536: 3 × 1,536 ×
    #   4,096 each = 3,623,878,656; one shared expert as wide 18,874,368
    w = shape_of_registry("synthetic--hy-v3-vllm-moe-keys.json")
    attention = 2 * 33_554_432 + 2 * 4_194_304 + 256
    assert attention == 75_497_728
    assert layer_params(w, 0) == attention + 163_577_856 + 8_192
    assert layer_params(w, 1) == attention + 786_432 + 3_623_878_656 + 18_874_368 + 8_192


def test_axk1_mla_and_a_post_mlp_norm_in_every_layer():
    # A.X K1 defaults layer 0 (dense): q_a 1,536 × 7,168 = 11,010,048 and norm 1,536; q_b 64 ×
    #   192 × 1,536 = 18,874,368; kv_a 576 × 7,168 = 4,128,768 and norm 512; kv_b 64 × 256 × 512
    #   = 8,388,608; o 7,168 × 8,192 = 58,720,256; MLP 3 × 18,432 × 7,168 = 396,361,728; three
    #   norms 3 × 7,168 (vLLM's post_mlp_layernorm too, which transformers builds in MoE layers only)
    w = shape_of_registry("synthetic--axk1-defaults.json")
    mla = 11_010_048 + 1_536 + 18_874_368 + 4_128_768 + 512 + 8_388_608 + 58_720_256
    assert layer_params(w, 0) == mla + 396_361_728 + 3 * 7_168 == 497_507_328
    assert [f for f in w.ffns[:3]] == ["dense", "moe", "moe"] and w.moe.score_bias


# -- every recorded config against transformers' meta build ----------------------------------------
def _meta_count(raw: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = {k: v for k, v in raw.items() if k not in ("quantization_config", "auto_map")}
    cls = getattr(transformers, raw["architectures"][0])
    config = cls.config_class.from_dict(raw)
    with torch.device("meta"):
        model = cls._from_config(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(set(CONFIGS) - NO_TRANSFORMERS_CLASS))
def test_count_equals_transformers_meta_build(name):
    if name in REFUSED:
        with pytest.raises(Exception) as info:
            shape(name)
        assert getattr(info.value, "code", None) == "config-unsupported"
        return
    if name in NOT_COUNTED:
        with pytest.raises(InputError) as info:
            count_parameters(shape(name))
        assert info.value.code == "weights-unknown"
        return
    got = count_parameters(shape(name)).total
    assert got - _meta_count(CONFIGS[name]) == DEVIATIONS.get(name, 0)


def test_the_lists_name_recorded_configs():
    listed = NO_TRANSFORMERS_CLASS | NOT_COUNTED | REFUSED | set(DEVIATIONS)
    assert listed <= set(CONFIGS)


def test_muse_glimmer_output_gate_and_four_norms():
    # MuseGlimmer text defaults layer 0: q 32 × 128 × 6,656 = 27,262,976 and its full-width
    #   output gate as much; k, v 2 × 2 × 128 × 6,656 = 3,407,872; o 6,656 × 4,096 = 27,262,976;
    #   unweighted q/k norms; MLP 3 × 19,968 × 6,656 = 398,721,024; four norms 4 × 6,656
    w = shape_of_registry("synthetic--muse-glimmer-text-defaults.json")
    assert layer_params(w, 0) == (3 * 27_262_976 + 3_407_872 + 398_721_024
                                  + 4 * 6_656) == 483_944_448  # fmt: skip


def test_laguna_per_layer_heads_gate_and_sinks():
    # Laguna with per-layer heads, sliding layer 0 (48 heads): q, o 2 × 48 × 128 × 2,048 =
    #   25,165,824; k, v 2 × 8 × 128 × 2,048 = 4,194,304; q/k norms 2 × 128; per-head gate 48 ×
    #   2,048 = 98,304; sinks 48; MLP 3 × 8,192 × 2,048 = 50,331,648; 2 norms 4,096
    # full layer 3 (64 heads, MoE): q, o 2 × 64 × 128 × 2,048; gate 64 × 2,048; no sinks; router
    #   256 × 2,048 and its fp32 bias 256; experts 256 × 3 × 512 × 2,048; shared 3 × 512 × 2,048
    w = shape_of_registry("synthetic--laguna-swa-per-layer-heads.json")
    assert layer_params(w, 0) == (25_165_824 + 4_194_304 + 256 + 98_304 + 48 + 50_331_648
                                  + 4_096) == 79_794_480  # fmt: skip
    moe = 524_288 + 256 + 256 * 3 * 512 * 2_048 + 3 * 512 * 2_048
    assert layer_params(w, 3) == (2 * 64 * 128 * 2_048 + 4_194_304 + 256 + 64 * 2_048 + moe
                                  + 4_096)  # fmt: skip
    # two RoPE caches: full layers 131,072 × 64 (partial 0.5), sliding 131,072 × 128
    assert (w.rope_cache_positions, w.rotary_dim, w.extra_rope_values) == (131_072, 64,
                                                                           131_072 * 128)  # fmt: skip


def _gemma4_moe_shape() -> dict:
    """Gemma-4 26B-A4B's text shape (hidden 2,816, 30 layers, 16 heads, 8 and 2 KV heads, 128
    experts of 704, top 8; synthetic) on the Gemma-4-31B text config of the fixtures."""
    text = dict(CONFIGS["gemma-4-31B-bf16.json"]["text_config"])
    text.update(architectures=["Gemma4ForCausalLM"], hidden_size=2_816, intermediate_size=2_112,
                num_hidden_layers=30, num_attention_heads=16, num_key_value_heads=8,
                num_global_key_value_heads=2, enable_moe_block=True, num_experts=128,
                top_k_experts=8, moe_intermediate_size=704, max_position_embeddings=32_768)  # fmt: skip
    text.pop("expert_intermediate_size", None)
    text["layer_types"] = text["layer_types"][:30]  # every 6th layer global, as the 31B's
    return text


def test_gemma4_moe_block_beside_the_dense_mlp():
    # sliding layer 0: q 16 × 256 × 2,816 = 11,534,336; k, v 2 × 8 × 256 × 2,816 = 11,534,336; o
    #   11,534,336; q/k norms 2 × 256; MLP 3 × 2,112 × 2,816 = 17,842,176; four norms 4 × 2,816;
    #   the MoE block: router 128 × 2,816 = 360,448, its scale 2,816 and per-expert scale 128,
    #   128 experts 3 × 704 × 2,816 each = 761,266,176, three more norms 3 × 2,816
    w = parse_config(_gemma4_moe_shape(), name="gemma-4-moe").weights
    moe = 360_448 + 2_816 + 128 + 761_266_176 + 3 * 2_816
    assert layer_params(w, 0) == (3 * 11_534_336 + 512 + 17_842_176 + 4 * 2_816
                                  + moe) == 814_094_976  # fmt: skip


@pytest.mark.torch
def test_gemma4_moe_count_equals_transformers_meta_build():
    got = count_parameters(parse_config(_gemma4_moe_shape(), name="gemma-4-moe").weights).total
    assert got == _meta_count(_gemma4_moe_shape()) == 25_233_141_760
