"""EPLB and the checkpoint's MoE quantization (``kvcalc/engines/vllm/eplb.py``): vLLM 0.33's
``FusedMoE`` refuses ``--enable-eplb`` where the MoE method's ``supports_eplb`` is false."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import bundled_shape

from kvcalc.engines.vllm.eplb import check_eplb
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB


def _with(quant, model_type="qwen3_moe"):
    return replace(bundled_shape("Qwen/Qwen3-30B-A3B"), quantization=quant, model_type=model_type)


@pytest.mark.parametrize("quant", [None, {"quant_method": "fp8", "weight_block_size": [128, 128]},
                                   {"quant_method": "modelopt_fp4"}])  # fmt: skip
def test_methods_that_support_eplb(quant):
    check_eplb(_with(quant), None)


def test_online_fp8_supports_it():
    check_eplb(_with(None), "fp8")


@pytest.mark.parametrize(
    ("quant", "model_type", "cls"),
    [({"quant_method": "mxfp4"}, "gpt_oss", "GptOssMxfp4MoEMethod"),
     ({"quant_method": "modelopt"}, "qwen3_moe", "ModelOptFp8MoEMethod"),
     ({"quant_method": "awq"}, "qwen3_moe", "AutoAWQMoEMethod"),
     ({"quant_method": "gptq"}, "qwen3_moe", "AutoGPTQMoEMethod")],
)  # fmt: skip
def test_methods_vllm_refuses(quant, model_type, cls):
    with pytest.raises(InputError) as err:
        check_eplb(_with(quant, model_type), None)
    assert err.value.code == "invalid-parallelism"
    assert err.value.message == f"vLLM refuses these settings: EPLB is not supported {cls}."


def test_a_backend_dependent_method_is_not_guessed():
    # compressed-tensors' WNA16 and NVFP4 MoE methods support EPLB on some kernel backends only
    with pytest.raises(InputError) as err:
        check_eplb(_with({"quant_method": "compressed-tensors"}), None)
    assert err.value.code == "unsupported-parallelism" and "compressed-tensors" in err.value.message


def test_gpt_oss_with_eplb_does_not_plan():
    # recorded (speculative_parallel.json, rejected): gpt-oss-20b at DP 2 + EP with 8 redundant
    # experts; without a draft the same FusedMoE check refuses it
    with pytest.raises(InputError) as err:
        plan_reference("openai/gpt-oss-20b", PlanInputs(
            gpu="H100-80GB", data_parallel_size=2, enable_expert_parallel=True, enable_eplb=True,
            num_redundant_experts=8, kv_cache_memory_bytes=20 * GIB))  # fmt: skip
    assert "GptOssMxfp4MoEMethod" in err.value.message


def test_minicpm_moe_refuses_eplb_in_its_model_file():
    # minicpm.py: "if parallel_config.enable_eplb and getattr(config, 'num_experts', 0) > 0:
    # raise NotImplementedError(...)" (MiniCPM3ForCausalLM subclasses it)
    minicpm = replace(_with(None), architectures=("MiniCPMForCausalLM",))
    with pytest.raises(InputError) as err:
        check_eplb(minicpm, None)
    assert err.value.message == (
        "vLLM refuses these settings: EPLB is not supported for MiniCPM yet."
    )
