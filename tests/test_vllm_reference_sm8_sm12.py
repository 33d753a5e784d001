"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing on an A100, an L40S and an RTX 5090.

``fixtures/vllm_0_33/reference_sm8_sm12.json``: the public configs of ``reference_configs.json``
(the three with a separate quantization file left out), auto at TP 1 and fp8 at TP 8, 32,768 tokens,
20 GiB per GPU, recorded with the vLLM reference harness on an emulated A100 (SM 8.0), L40S
(SM 8.9) and RTX 5090 (SM 12.0) (the harness has no L40S or RTX 5090 preset: a wrapper adds them
before its ``main``). The attention
backends vLLM picks there differ from Hopper's and Blackwell's datacenter parts (FlashAttention 2,
FlashInfer for an fp8 cache, TRITON_MLA, the SM120 sparse backends), and with them the block sizes
and cache formats. Every sized scenario must match (block size, blocks, tokens, concurrency, each
group's kind, layers and block size; a plain group's page), every refusal must be refused for
vLLM's reason.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import assert_sized, refusal_class, vllm_cache_dtypes
from test_vllm_reference import DATA as REFERENCE
from test_vllm_reference import (
    KINDS,
    KVCALC_CODES,
    VLLM_REASONS,
)

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import KvcalcError
from kvcalc.hfconfig import parse_config
from kvcalc.model.attention_layouts import SparseMLA
from kvcalc.units import GIB

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "reference_sm8_sm12.json"
DATA = json.loads(FIXTURE.read_text())
GPUS = {
    "a100": {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA A100-SXM4-80GB",
             "gpu_compute_capability": (8, 0)},
    "rtx5090": {"gpu_memory_bytes": 32 * 10**9, "gpu_name": "NVIDIA GeForce RTX 5090",
                "gpu_compute_capability": (12, 0)},
    "t4": {"gpu_memory_bytes": 15 * GIB, "gpu_name": "Tesla T4", "gpu_compute_capability": (7, 5)},
    "l40s": {"gpu_memory_bytes": 48 * GIB, "gpu_name": "NVIDIA L40S", "gpu_compute_capability": (8, 9)},
    # for the fp8 MoE rule's bounds only (no recording on it)
    "h100": {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
             "gpu_compute_capability": (9, 0)},
}  # fmt: skip
#: vLLM finds no attention backend for the model on the GPU (DeepSeek sparse attention before
#: SM 9): kvcalc refuses it by name (unsupported-model, the ARCHITECTURE class)
REASONS = {
    **VLLM_REASONS,
    "No valid attention backend found": "arch",
    # triton_mla.py / triton_attn.py before SM 8.9: kvcalc's unsupported-dtype
    "FP8 KV cache is not supported by the Triton": "dtype",
    # oracle/fp8.py: a refined block-fp8 MoE before SM 8.9 (kvcalc.engines.vllm.fp8_moe)
    "No FP8 MoE backend supports the deployment configuration": "quantization",
}
CODES = {**KVCALC_CODES, "unsupported-dtype": "dtype", "unsupported-quantization": "quantization"}
#: the configs of the pass are ``reference_configs.json``'s; ``more`` carries its own: Phi-3.5-mini
#: (96-wide heads, which FlashInfer lacks) on the A100 and Llama-3.1-8B on a T4 (SM 7.5)
CONFIGS = {
    **{n: REFERENCE["models"][n] for n in DATA["models"]},
    **{n: m for n, m in DATA["more"].items()},
}
CASES = [
    pytest.param(name, row, id=f"{name[:-5]}-{row['gpu']}-{row['kv_cache_dtype']}")
    for name, rows in [
        *DATA["models"].items(),
        *((n, m["scenarios"]) for n, m in DATA["more"].items()),
    ]
    for row in rows
]


def _reason(text: str) -> str:
    classes = {c for marker, c in REASONS.items() if marker in text}
    assert len(classes) == 1, f"vLLM's refusal maps to no single reason class: {text}"
    return classes.pop()


def _model(name: str):
    m = CONFIGS[name]
    return parse_config(m["config"], name=name, hf_quant_config=m.get("hf_quant_config"))


def _vllm_layers_per_layer(name: str, layer_indices: tuple[int, ...]) -> int:
    """vLLM's specs per kvcalc layer: 2 for sparse MLA (latent and indexer), else 1."""
    layers = _model(name).layers
    return 2 if all(isinstance(layers[i], SparseMLA) for i in layer_indices) else 1


def _plan(name: str, row: dict):
    model = _model(name)
    return get_engine("vllm").plan_kv_cache(
        EngineRequest(
            model=model, max_model_len=row["max_model_len"] or model.max_model_len,
            kv_cache_dtype=row["kv_cache_dtype"],
            tensor_parallel_size=row["tensor_parallel_size"],
            available_kv_bytes=row["available_kv_bytes"], **GPUS[row["gpu"]],
        )
    )  # fmt: skip


def test_the_triton_refusals_are_recorded_for_each_reason():
    # TRITON_ATTN before SM 8.9 with fp8: a head size FlashInfer lacks (96), sinks (Laguna, Granite
    # SWA dense and MoE), unequal K and V widths with sinks (MiMo-V2), and any model below SM 8.0;
    # without sinks the same Laguna and Granite SWA configs run fp8 on FlashInfer
    more = DATA["more"]
    refused = {(n, r["gpu"]) for n, m in more.items() for r in m["scenarios"]
               if "Triton attention backend" in r.get("refused", {}).get("reason", "")}  # fmt: skip
    assert refused == {
        ("microsoft--Phi-3.5-mini-instruct.json", "a100"), ("meta-llama--Llama-3.1-8B.json", "t4"),
        ("synthetic--laguna-swa-per-layer-heads.json", "a100"),
        ("synthetic--granite-swa-defaults.json", "a100"),
        ("synthetic--granitemoe-swa-defaults.json", "a100"), ("XiaomiMiMo--MiMo-V2-Flash.json", "a100"),
    }  # fmt: skip
    for name in ("synthetic--laguna-defaults.json", "synthetic--granite-swa-no-sinks.json"):
        (fp8,) = [r for r in more[name]["scenarios"] if r["kv_cache_dtype"] == "fp8"]
        assert fp8["attention_backends"] == ["FLASHINFER"]
    t4 = [r for r in more["meta-llama--Llama-3.1-8B.json"]["scenarios"] if "refused" in r]
    assert t4[0]["refused"]["reason"].endswith("--kv-cache-dtype float16.")


def test_the_pass_covers_every_config_on_both_gpus():
    assert set(DATA["models"]) == set(REFERENCE["models"]) - {
        "nvidia--Gemma-4-31B-IT-NVFP4.json",
        "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json",
        "nvidia--Qwen3.6-35B-A3B-NVFP4.json",
    }
    for rows in DATA["models"].values():
        assert {(r["gpu"], r["kv_cache_dtype"]) for r in rows} == {
            (g, d) for g in ("a100", "rtx5090", "l40s") for d in ("auto", "fp8")
        }


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if "refused" in row:
        reason = row["refused"]["reason"]
        assert refusal_class(lambda: _plan(name, row), CODES) == _reason(reason), reason
        return
    p = _plan(name, row)
    assert_sized(p, row)
    got, want = [], []
    for g, (kind, layers, page, block) in zip(p.groups, row["groups"], strict=True):
        per_layer = _vllm_layers_per_layer(name, g.layer_indices)
        real = g.num_layers - g.padding_layers
        # a plain group's page is one layer's, as kvcalc's; a uniform-type group's (and the
        # sparse-MLA layers vLLM splits in two) sums its layers' pages: the blocks pin it
        plain = not g.uniform_type and per_layer == 1
        got.append((g.kind, real * per_layer, g.block_size, g.page_bytes if plain else None))
        want.append((KINDS[kind], layers, block, page if plain else None))
    assert got == want
    assert vllm_cache_dtypes(_model(name).layers, p.kv_cache_dtype) == row["cache_dtype"]


@pytest.mark.parametrize(
    ("gpu", "tp", "whole", "refused"),
    [
        ("a100", 8, False, True),  # 1,536 / 8 = 192 wide: 128 x 128 blocks refined to 64 x 64
        ("a100", 4, False, False),  # 384 wide: the checkpoint's blocks, Marlin
        ("a100", 8, True, False),  # --enable-expert-parallel: whole experts
        ("rtx5090", 8, False, False),  # SM 12.0 runs Triton's refined blocks (recorded above)
        ("l40s", 8, False, False),  # SM 8.9: supports_fp8, Triton runs them
        ("h100", 8, False, False),
    ],
)
def test_the_fp8_moe_refusal_follows_the_rank_width(gpu, tp, whole, refused):
    name = "MiniMaxAI--MiniMax-M2.5.json"
    request = EngineRequest(
        model=_model(name), max_model_len=32768, kv_cache_dtype="auto", tensor_parallel_size=tp,
        expert_parallel=whole, moe_ranks=tp, available_kv_bytes=20 * GIB, **GPUS[gpu],
    )  # fmt: skip
    if not refused:
        assert get_engine("vllm").plan_kv_cache(request).num_blocks > 0
        return
    with pytest.raises(KvcalcError) as err:
        get_engine("vllm").plan_kv_cache(request)
    assert err.value.code == "unsupported-quantization"
    assert err.value.message.startswith(
        "vLLM refuses to start: No FP8 MoE backend supports the deployment configuration. "
    )
    assert "192 wide on each of 8 ranks" in err.value.message and "64 × 64" in err.value.message
    assert err.value.message.endswith("this GPU is SM 8.0)")
    assert "--enable-expert-parallel" in err.value.hint and "SM 8.9" in err.value.hint


def test_a_dense_block_fp8_model_is_not_an_fp8_moe():
    # the rule reads the routed experts only: Qwen3-8B with 128 x 128 fp8 blocks at TP 8 on an A100
    config = dict(REFERENCE["models"]["Qwen--Qwen3-8B.json"]["config"])
    config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128],
                                     "activation_scheme": "dynamic"}  # fmt: skip
    request = EngineRequest(
        model=parse_config(config, name="qwen3-8b-fp8"), max_model_len=32768,
        tensor_parallel_size=8, moe_ranks=8, available_kv_bytes=20 * GIB, **GPUS["a100"],
    )  # fmt: skip
    assert get_engine("vllm").plan_kv_cache(request).num_blocks > 0


def test_a_sink_family_without_a_weight_shape_is_refused_as_not_checked():
    # kvcalc reads sinks from the weight shape; without one it cannot tell Laguna with sinks
    # (TRITON_ATTN, refused) from Laguna without (FlashInfer, recorded above)
    model = replace(_model("synthetic--laguna-defaults.json"), weights=None)
    request = EngineRequest(
        model=model, max_model_len=4096, kv_cache_dtype="fp8", available_kv_bytes=20 * GIB,
        **GPUS["a100"],
    )  # fmt: skip
    with pytest.raises(KvcalcError) as err:
        get_engine("vllm").plan_kv_cache(request)
    assert err.value.code == "unsupported-dtype" and "was not checked" in err.value.message
