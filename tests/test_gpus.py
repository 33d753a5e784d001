"""The GPU catalog: lookup by name, alias and torch device name; the figures vLLM's logs printed."""

from __future__ import annotations

from importlib import resources

import pytest

from kvcalc.errors import InputError
from kvcalc.model.gpus import get_gpu, list_gpus

GIB = 1 << 30
REQUIRED = ["H100-SXM", "H100-PCIe", "H100-NVL", "H200", "H20", "GH200", "B200", "A100-40GB", "A100-80GB",
            "L40S", "L40", "L4", "A10G", "A10", "T4", "V100-16GB", "V100-32GB", "RTX-3090", "RTX-4090",
            "RTX-5090", "RTX-A6000", "RTX-6000-Ada", "MI300X", "MI325X"]  # fmt: skip


def test_catalog_has_every_required_gpu_and_ships_as_package_data():
    assert [g.name for g in list_gpus()] == REQUIRED
    assert (resources.files("kvcalc") / "data" / "gpus.json").is_file()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100", "H100-SXM"),
        ("h100-80gb", "H100-SXM"),
        ("H100 SXM", "H100-SXM"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),  # torch.cuda.get_device_name()
        ("a100", "A100-80GB"),
        ("A100_40GB", "A100-40GB"),
        ("rtx 3090", "RTX-3090"),
        ("Tesla T4", "T4"),
        ("rtx 6000 ada", "RTX-6000-Ada"),
        ("mi300x", "MI300X"),
    ],
)
def test_lookup_is_case_and_separator_insensitive(name, expected):
    assert get_gpu(name).name == expected


def test_unknown_gpu_suggests_close_names():
    with pytest.raises(InputError) as err:
        get_gpu("H10")
    assert err.value.code == "unknown-gpu"
    assert "did you mean" in err.value.hint and "H100-SXM" in err.value.hint
    with pytest.raises(InputError) as err:
        get_gpu("TPU v5e")
    assert "known GPUs:" in err.value.hint and "did you mean" not in err.value.hint


def test_memory_figures_printed_by_vllm():
    # "total_gpu_memory 79.22GiB" (vLLM PR #10511, H100 80GB): 79.22 × 2^30 = 85,061,827,297.28 B
    assert get_gpu("H100").memory_bytes == 85_061_827_297
    # engine_logs: A100 40GB prints total_gpu_memory (39.38GiB); RTX 3090 23.58GiB
    assert round(get_gpu("A100-40GB").memory_bytes / GIB, 2) == 39.38
    assert round(get_gpu("RTX-3090").memory_bytes / GIB, 2) == 23.58
    assert round(get_gpu("A100-80GB").memory_bytes / GIB, 2) == 79.15
    assert round(get_gpu("V100-32GB").memory_bytes / GIB, 2) == 31.75
    # nvidia-smi lists 81,559 MiB for the H100 board; CUDA reports less
    assert get_gpu("H100").board_memory_bytes == 81_559 << 20


def test_every_entry_is_consistent():
    for g in list_gpus():
        assert 0 < g.memory_bytes <= g.board_memory_bytes, g.name
        assert g.memory_bandwidth_bytes_per_s > 1e11 and g.fp16_dense_tflops > 0, g.name
        assert g.memory_source, g.name
        assert g.vendor in ("nvidia", "amd"), g.name
    # no bf16 before Ampere, no fp8 before Ada/Hopper
    assert get_gpu("T4").bf16_dense_tflops is None and get_gpu("V100").fp8_dense_tflops is None
    assert get_gpu("A100").fp8_dense_tflops is None and get_gpu("L40S").fp8_dense_tflops == 733.0


@pytest.mark.parametrize(
    ("name", "tier", "seqs"),
    [
        ("H100", "large", 1024),
        ("H200", "large", 1024),
        ("A100-80GB", "default", 256),  # ≥ 70 GiB, but the name contains "a100"
        ("L40S", "default", 256),  # 44.5 GiB < 70 GiB
        ("MI300X", "large", 1024),
    ],
)
def test_vllm_scheduler_default_tiers(name, tier, seqs):
    # the token budgets are the engine's (kvcalc/engines/vllm/batch.py, tests/test_vllm_batch*)
    g = get_gpu(name)
    assert g.mnbt_tier == tier
    assert g.vllm_default_max_num_seqs == seqs
