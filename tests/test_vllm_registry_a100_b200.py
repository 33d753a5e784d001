"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of the registry families off the H100.

The registry fixtures (``registry_families*.json``, ``registry_multimodal*.json``) were recorded on
an emulated H100. ``fixtures/vllm_0_33/registry_a100_b200_sweep.json`` records one config of every
family (each model type and architecture; a published checkpoint's where one was recorded) on an
emulated A100 (SM 8.0, 80 GiB) and B200 (SM 10.0) with the same reference harness: auto and fp8,
TP 1 and 8, 4,096 tokens (and the configs the plain harness reads on an emulated RTX 5090, SM 12.0,
at TP 1) (a model's derived length where that is shorter), 20 GiB. Each model names the
fixture its config comes from. Block size, blocks, tokens, concurrency and every group must equal
vLLM's, and every refusal be refused for vLLM's reason: the sweep found the fp8 caches vLLM cannot
run before SM 8.9 where TRITON_ATTN is the only backend left (mm-prefix models, a hybrid layer's
head size FlashInfer lacks), which kvcalc had planned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import HARNESS_GPUS, matches_vllm

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.hfconfig import parse_config

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_0_33"
SWEEP = json.loads((FIXTURES / "registry_a100_b200_sweep.json").read_text())
_SOURCES: dict[str, dict] = {}


def _config(name: str) -> dict:
    source = SWEEP["models"][name]["config_from"]
    if source not in _SOURCES:
        _SOURCES[source] = json.loads((FIXTURES / source).read_text())["models"]
    return _SOURCES[source][name]["config"]


CASES = [
    pytest.param(
        name,
        row,
        id=f"{name[:-5]}-{row['gpu']}-{row['kv_cache_dtype']}"
        f"-tp{row['tensor_parallel_size']}-{row['max_model_len']}",
    )
    for name, model in SWEEP["models"].items()
    for row in model["scenarios"]
]
LENGTH, PARALLELISM, CONFIG, KV_MEMORY, DTYPE, BACKEND = (
    "max-model-len", "parallelism", "config", "kv-memory", "kv-dtype", "backend",
)  # fmt: skip
VLLM_REASONS = {
    "User-specified max_model_len": LENGTH,
    # heads, KV heads and widths that TP 8 cannot split (config/parallel.py, the model files'
    # attention and linear layers, dist_utils.divide), Dory's TP 1
    "must be divisible by tensor parallel size": PARALLELISM,
    "is not divisible by": PARALLELISM,
    "% tp_size == 0": PARALLELISM,
    "% self.tp_size == 0": PARALLELISM,
    "tp_size % self.total_num_kv_heads == 0": PARALLELISM,
    "currently supports tensor_parallel_size=1 only": PARALLELISM,
    "must be divisible by tensor-parallel world size": PARALLELISM,
    "tp_size must be <= group_norm_size": PARALLELISM,
    "To serve at least one request with the model's max seq len": KV_MEMORY,
    # triton_attn.py / triton_mla.py before SM 8.9
    "FP8 KV cache is not supported by the Triton": DTYPE,
    "FlashAttention does not support fp8 kv-cache on this device": DTYPE,
    "No valid attention backend": BACKEND,
    "No valid MLA prefill backend found": BACKEND,
    "No FP8 MoE backend supports the deployment configuration": DTYPE,
    "object has no attribute": CONFIG,
    "Field 'head_dim' expected int, got NoneType": CONFIG,
    "first_k_dense_replace not exist": CONFIG,
    "unsupported output_gate_type": CONFIG,
    "No model architectures are specified": CONFIG,
}
KVCALC_CODES = {
    "max-model-len-exceeded": LENGTH,
    "invalid-parallelism": PARALLELISM,
    "config-invalid": CONFIG,
    "unsupported-dtype": DTYPE,
    "unsupported-quantization": DTYPE,
    "unsupported-model": BACKEND,
    "unsupported-parallelism": PARALLELISM,
}


def _plan(name: str, row: dict):
    model = parse_config(_config(name), name=name)
    length = row["max_model_len"] or row["derived_max_model_len"]
    return get_engine("vllm").plan_kv_cache(
        EngineRequest(
            model=model, max_model_len=length, kv_cache_dtype=row["kv_cache_dtype"],
            tensor_parallel_size=row["tensor_parallel_size"],
            available_kv_bytes=row["available_kv_bytes"], **HARNESS_GPUS[row["gpu"]],
        )
    )  # fmt: skip


def test_one_config_per_family_on_both_gpus():
    gpus = {(name, r["gpu"]) for name, m in SWEEP["models"].items() for r in m["scenarios"]}
    assert {g for _, g in gpus} == {"a100", "b200", "rtx5090"}
    assert len(SWEEP["models"]) >= 110


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    matches_vllm(lambda: _plan(name, row), row, VLLM_REASONS, KVCALC_CODES)
