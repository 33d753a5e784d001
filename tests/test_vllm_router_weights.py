"""MoE routers vLLM 0.33 builds in fp32 (``GateLinear(..., params_dtype=torch.float32)``: ERNIE 4.5
MoE, GLM-4.5, MiniMax-M2, MiMo-V2) and the fp8 MoE block scales it refines for a TP shard that is
not a multiple of the checkpoint's block: weights per rank equal vLLM's own meta build
(``tests/fixtures/vllm_0_33/router_weights.json``, recorded with ``deploy_probe.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.estimate.tensors import inventory
from kvcalc.estimate.weights import pricer, weight_bytes
from kvcalc.hfconfig import parse_config

FIXTURE = json.loads((Path(__file__).parent / "fixtures/vllm_0_33/router_weights.json").read_text())
RECORDS = FIXTURE["records"]
#: quantization/kv_cache.py BaseKVCacheMethod.create_weights: an fp8-quantized config's attention
#: layers hold four bf16 scalar placeholders (k/v/q/prob_scale) in the meta build, which
#: process_weights_after_loading deletes; kvcalc sizes the loaded model
KV_SCALE_PLACEHOLDER_BYTES = 4 * 2


def _placeholders(rec: dict) -> int:
    quantized = "quantization_config" in rec["config"]
    return KV_SCALE_PLACEHOLDER_BYTES * rec["config"]["num_hidden_layers"] if quantized else 0


def test_fixture_covers_the_families():
    assert {(r["config"]["model_type"], r["tensor_parallel_size"]) for r in RECORDS} == {
        ("minimax_m2", 8), ("ernie4_5_moe", 1), ("ernie4_5_moe", 2), ("glm4_moe", 1),
        ("glm4_moe", 2), ("glm4_moe_lite", 1), ("glm4_moe_lite", 2),
    }  # fmt: skip


@pytest.mark.parametrize(
    "rec", RECORDS, ids=lambda r: f"{r['model']}-tp{r['tensor_parallel_size']}"
)
def test_weights_per_rank_equal_vllms_to_the_byte(rec):
    model = parse_config(rec["config"], name=rec["model"])
    w = weight_bytes(model, tensor_parallel_size=rec["tensor_parallel_size"])
    expected = rec["target_param_bytes_per_rank"] - _placeholders(rec)
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == expected


def test_minimax_m25_tp8_by_hand():
    # the routers: 62 layers × 256 experts × 3,072 × 4 B = 195,035,136 fp32 (vLLM's gate.weight),
    # not 97,517,568 in bf16; the experts' block scales 64 × 64 (TP 8 leaves 192 of 1,536, not a
    # multiple of 128; gcd(128, 192, 3072) = 64): w13 256 × 6 × 48 + w2 256 × 48 × 3 fp32 values
    # a layer; the RoPE cache 196,608 × rotary_dim 64 in bf16, not head_dim 128
    rec = next(r for r in RECORDS if r["model"] == "MiniMax-M2.5")
    model = parse_config(rec["config"], name="MiniMax-M2.5")
    price = pricer(model, model.weights, dtype=None, quantization=None)
    tensors = inventory(model.weights)
    routers = [t for t in tensors if t.role == "router"]
    assert sum(price(t, 8)["fp32"] for t in routers) == 62 * 256 * 3072 * 4 == 195_035_136
    scales = sum(price(t, 8).get("fp32", 0) for t in tensors if t.expert)
    assert scales == 62 * 256 * (6 * 48 + 48 * 3) * 4 == 27_426_816
    # + per layer: e_score_correction_bias 256, the attention's four fp32 scales, q/k/v's block
    # scales (6 + 1 + 1) × 24 and o_proj's 24 × 6
    other = 62 * (256 + 4 + (6 + 1 + 1) * 24 + 24 * 6) * 4
    assert rec["target_by_dtype"]["float32"] == 195_035_136 + 27_426_816 + other
    w = weight_bytes(model, tensor_parallel_size=8)
    rope = 196_608 * 64 * 2
    assert w.buffers_bytes_per_gpu == rope + 62 * (256 + 4) * 4
    assert rec["target_param_bytes_per_rank"] == 28_982_324_560
    assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == 28_982_324_560 - 62 * 8


def test_ernie_router_and_statics_in_fp32():
    rec = next(r for r in RECORDS if r["config"]["model_type"] == "ernie4_5_moe")
    shape = parse_config(rec["config"], name=rec["model"]).weights
    fp32 = {t.name.split(".", 3)[-1] for t in inventory(shape) if t.fp32}
    assert fp32 == {"mlp.router", "mlp.moe_statics.e_score_correction_bias"}
    # 27 MoE layers × 64 × (2,560 + 1) × 4 B, as vLLM's gate.weight and gate.e_score_correction_bias
    assert rec["target_by_dtype"]["float32"] == 27 * 64 * 2561 * 4 + 28 * 16


@pytest.mark.parametrize(("value", "fp32"), [(None, True), ("float32", True),
                                             ("bfloat16", False), ("float16", False)])  # fmt: skip
def test_mimo_router_dtype_key(value, fp32):
    # mimo_v2.py: GateLinear params_dtype = str_dtype_to_torch_dtype(moe_router_dtype or "float32")
    # MiMo-V2-Flash's config with moe_layer_freq 1 (kvcalc does not read its per-layer list yet)
    raw = json.loads(
        (Path(__file__).parent / "fixtures/configs/XiaomiMiMo--MiMo-V2-Flash.json").read_text()
    )
    config = dict(raw, moe_router_dtype=value, moe_layer_freq=1)
    if value is None:
        del config["moe_router_dtype"]
    shape = parse_config(config, name="mimo").weights
    assert shape.moe is not None and shape.moe.router_fp32 is fp32


def test_deepseek_router_dtype_is_the_output_dtype_only():
    # deepseek_v2.py _get_moe_router_dtype sets GateLinear's out_dtype, not params_dtype
    shape = parse_config(
        {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"],
         "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 4, "vocab_size": 1000, "intermediate_size": 512,
         "moe_intermediate_size": 128, "n_routed_experts": 8, "num_experts_per_tok": 2,
         "kv_lora_rank": 64, "q_lora_rank": None, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
         "v_head_dim": 32, "moe_router_dtype": "float32", "topk_method": "noaux_tc"},
        name="dsv3-tiny",
    ).weights  # fmt: skip
    assert shape.moe is not None and not shape.moe.router_fp32
