"""SGLang engine: cell size per token, the token pool from rest_memory, default fractions (§2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bundled_shape
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB, MIB

SGLANG = get_engine("sglang")
CONFIGS = Path(__file__).parent / "fixtures" / "vllm_0_33" / "reference_configs.json"
TEN_GIB = 10 * GIB


def _reference_shape(name):
    """A public config embedded in the vLLM reference fixture."""
    return parse_config(json.loads(CONFIGS.read_text())["models"][name]["config"], name=name)


def plan(model, max_model_len=8192, **kw):
    kw.setdefault("available_kv_bytes", TEN_GIB)
    return SGLANG.plan_kv_cache(EngineRequest(model=model, max_model_len=max_model_len, **kw))


@pytest.mark.parametrize(
    ("alias", "tp", "cell"),
    [("llama-3.1-8b", 1, 131_072),   # 8 heads · (128 + 128) · 32 layers · 2 B
     ("llama-3.1-8b", 2, 65_536),    # 4 heads per rank
     ("llama-3.1-8b", 16, 16_384),   # max(1, 8 // 16) = 1 head (replicated)
     ("deepseek-v3", 1, 70_272),     # MLA: (512 + 64) · 61 · 2 B, no ×2
     ("deepseek-v3", 8, 70_272)],    # and no TP split
)  # fmt: skip
def test_cell_size_per_token(alias, tp, cell):
    assert plan(bundled_shape(alias), tensor_parallel_size=tp).kv_bytes_per_token == cell


def test_token_pool_and_log_line():
    p = plan(bundled_shape("llama-3.1-8b"), gpu_memory_bytes=81_559 * MIB)
    # 10 GiB // 131,072 = 81,920 tokens; K = (81,920 + 1) · 32 · 8 · 128 · 2 B = 5.00 GiB
    assert (p.kv_cache_tokens, p.num_blocks, p.block_size) == (81_920, 81_920, 1)
    assert p.log_lines == (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 81920, K size: 5.00 GB, V size: 5.00 GB",
        "max_total_num_tokens=81920, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4096, context_len=8192",
    )
    assert p.max_concurrency == 10.0 and p.fits
    # default max_running_requests = min(clamp(int(81,920 / 8,192 · 512), 2,048, 4,096), 40,960)
    assert p.max_num_seqs == 4096
    assert plan(bundled_shape("llama-3.1-8b"), 131072).max_num_seqs == 2048  # int(0.625·512) = 320
    # --max-running-requests is kept up to half the tokens (81,920 // 2 = 40,960)
    assert plan(bundled_shape("llama-3.1-8b"), max_num_seqs=256).max_num_seqs == 256
    # a small pool: tokens // 2 caps it (3,000 tokens → 1,500)
    assert (
        plan(bundled_shape("llama-3.1-8b"), 1024, available_kv_bytes=3_000 * 131_072).max_num_seqs
        == 1500
    )


def test_older_profiles_print_older_lines():
    p = plan(bundled_shape("llama-3.1-8b"), engine_version="2025.03")
    assert (
        p.log_lines[0] == "KV Cache is allocated. #tokens: 81920, K size: 5.00 GB, V size: 5.00 GB"
    )
    # 0.4.x: min(tokens // 2, estimate + 1 request slots) = min(40,960, 4,097)
    assert p.max_num_seqs == 4097
    fp8 = plan(bundled_shape("llama-3.1-8b"), kv_cache_dtype="fp8")
    assert fp8.log_lines[0].startswith(
        "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 163840,"
    )


def test_mla_log_line_has_one_kv_size():
    p = plan(bundled_shape("deepseek-v3"))
    # 10 GiB // 70,272 = 152,797 tokens; (152,797 + 1) · 70,272 B = 10.00 GiB
    assert p.kv_cache_tokens == 152_797
    assert (
        p.log_lines[0]
        == "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 152797, KV size: 10.00 GB"
    )


def test_page_floor_and_max_total_tokens():
    model = bundled_shape("llama-3.1-8b")
    # 81,920 + 100 tokens of memory, floored to a 64-token page: 82,020 // 64 · 64 = 81,984
    assert (
        plan(
            model, available_kv_bytes=TEN_GIB + 100 * 131_072, extra={"page_size": 64}
        ).kv_cache_tokens
        == 81_984
    )
    assert plan(model, extra={"max_total_tokens": 50_000}).kv_cache_tokens == 50_000


def test_not_enough_memory():
    model = bundled_shape("llama-3.1-8b")
    p = plan(model, available_kv_bytes=100_000, gpu_memory_bytes=81_559 * MIB)
    assert p.kv_cache_tokens == 0 and not p.fits
    assert p.log_lines == (
        "Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.83",
    )
    # no memory left at all: 0.5.23 says so before sizing
    p = plan(model, available_kv_bytes=-GIB, extra={"mem_fraction_static": 0.9})
    assert p.log_lines == (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.9.",
    )
    old = plan(model, available_kv_bytes=100_000, engine_version="2025.03")
    assert old.log_lines == (
        "Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.88",
    )


def test_request_longer_than_the_pool():
    p = plan(bundled_shape("llama-3.1-8b"), 131072)
    assert not p.fits and p.estimated_max_model_len == 81_920
    assert p.bytes_per_request > p.fit_budget_bytes


def test_hybrid_swa_split_for_gpt_oss():
    p = plan(bundled_shape("gpt-oss-20b"), kv_cache_dtype="bf16")
    # 12 full + 12 sliding layers of 8 · (64 + 64) · 2 = 2,048 B: F = S = 24,576 B per token.
    # full = int(10 GiB / (24,576 + 0.8 · 24,576)) = 242,725; sliding = int(242,725 · 0.8) = 194,180
    assert p.kv_cache_tokens == 242_725
    assert [(g.kind, g.num_layers, g.num_blocks) for g in p.groups] == [
        ("full", 12, 242_725),
        ("sliding", 12, 194_180),
    ]
    old = plan(bundled_shape("gpt-oss-20b"), kv_cache_dtype="bf16", engine_version="2025.03")
    assert old.kv_cache_tokens == TEN_GIB // 49_152  # every layer for every token


def test_llama4_chunked_layers_are_swa():
    p = plan(bundled_shape("llama-4-scout-17b-16e-instruct"))
    assert [(g.kind, g.num_layers) for g in p.groups] == [("full", 12), ("sliding", 36)]


@pytest.mark.parametrize(
    ("memory_bytes", "tp", "alias", "fraction"),
    # H100 80GB: 512 + 8,192·1.5 + 128 + 256·2 + 58 prefill sizes·8 = 13,904 of 81,559 MiB
    [(81_559 * MIB, 1, "llama-3.1-8b", 0.83),
     # TP 8: 512 + 12,288 + 1,024 + 512·2 + 464 = 15,312 MiB
     (81_559 * MIB, 8, "llama-3.1-8b", 0.812),
     # MLA: 1,536 MiB for prefill graphs instead of 464: 14,976 and 16,384 MiB
     (81_559 * MIB, 1, "deepseek-v3", 0.816),
     (81_559 * MIB, 8, "deepseek-v3", 0.799),
     # L4 (22,491 MiB): 512 + 4,096·1.5 + 128 + 48·2 + 50 sizes (up to 4,096)·8 = 7,280 MiB
     (22_491 * MIB, 1, "llama-3.1-8b", 0.676),
     # H200 (143,771 MiB), TP 8: 512 + 12,288 + 1,024 + 1,024 + 464 = 15,312 MiB
     (143_771 * MIB, 8, "llama-3.1-8b", 0.893),
     # unknown memory: SGLang's own fallback
     (None, 1, "llama-3.1-8b", 0.95)],
)  # fmt: skip
def test_default_mem_fraction_static(memory_bytes, tp, alias, fraction):
    got = SGLANG.default_gpu_memory_utilization(
        MemoryInputs(
            gpu_memory_bytes=memory_bytes, tensor_parallel_size=tp, model=bundled_shape(alias)
        )
    )
    assert got == fraction


def test_default_mem_fraction_of_older_releases():
    # 0.4.x: by TP alone
    assert [SGLANG.default_gpu_memory_utilization(MemoryInputs(engine_version="2025.03", tensor_parallel_size=tp))
            for tp in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]  # fmt: skip
    # 0.5.8: no prefill-graph reserve; 288 GiB: 512 + 16,384·1.5 + 1,024 + 512·2 = 27,136 MiB
    assert (
        SGLANG.default_gpu_memory_utilization(
            MemoryInputs(engine_version="0.5.8", gpu_memory_bytes=288 * GIB, tensor_parallel_size=8)
        )
        == 0.908
    )


def test_multimodal_fraction_and_reservation():
    vl = _reference_shape("Qwen--Qwen3-VL-8B-Instruct.json")
    # prefill graphs off (not allow-listed): 13,440 MiB → 0.835; vision_config has no
    # num_hidden_layers (it writes depth), so SGLang's 24 layers of 1,152:
    # r = 24·1,152² / (24·1,024²) = 1.2656, factor 0.95 · (1 − 0.1 · 0.2656) = 0.92477
    got = SGLANG.default_gpu_memory_utilization(
        MemoryInputs(gpu_memory_bytes=81_559 * MIB, model=vl)
    )
    assert got == pytest.approx(0.835 * 0.95 * (1 - 0.1 * (1152**2 / 1024**2 - 1)), abs=1e-12)
    # Qwen3-VL on a Hopper card of 60 GiB or more: 1,024 MiB of CUDA-IPC feature pool come off
    hopper = plan(vl, gpu_memory_bytes=81_559 * MIB, gpu_compute_capability=(9, 0))
    assert hopper.kv_cache_tokens == (TEN_GIB - 1024 * MIB) // 147_456
    # elsewhere (Ampere; Blackwell, whose trtllm backend pages by 64) the 100 MiB embedding cache
    ampere = plan(vl, gpu_memory_bytes=81_559 * MIB, gpu_compute_capability=(8, 0))
    assert ampere.kv_cache_tokens == (TEN_GIB - 100 * MIB) // 147_456
    blackwell = plan(vl, gpu_memory_bytes=81_559 * MIB, gpu_compute_capability=(10, 0))
    assert blackwell.kv_cache_tokens == (TEN_GIB - 100 * MIB) // 147_456 // 64 * 64


def test_rest_memory_rule():
    rest = SGLANG.available_kv_bytes(MemoryInputs(
        gpu_memory_bytes=80 * GIB, gpu_memory_utilization=0.835, weights_bytes=15 * GIB,
        activation_bytes=3 * GIB, non_torch_bytes=GIB, cudagraph_bytes=GIB,
    ))  # fmt: skip
    # (80 − 1) GiB · 0.835 − 15 GiB; activations and graphs sit in the reserved 16.5%
    assert rest == int(79 * GIB * 0.835) - 15 * GIB


def test_refusals():
    # the Mamba-state split is checked at PP 1 only (tests/test_sglang_hybrid.py)
    with pytest.raises(InputError) as err:
        plan(bundled_shape("qwen3-next-80b-a3b-thinking"), pipeline_parallel_size=2)
    assert err.value.code == "unsupported-model"
    with pytest.raises(InputError) as err:
        plan(bundled_shape("llama-3.1-8b"), kv_cache_dtype="q8_0")
    assert err.value.code == "unsupported-dtype"


@settings(max_examples=40, deadline=None)
@given(a=st.integers(min_value=0, max_value=200 * GIB), b=st.integers(min_value=0, max_value=200 * GIB),
       length=st.integers(min_value=1, max_value=262_144), page=st.sampled_from([1, 16, 64]))  # fmt: skip
def test_pool_monotone_and_fit_invariant(a, b, length, page):
    model = bundled_shape("qwen3-8b")
    lo, hi = (
        plan(model, length, available_kv_bytes=m, extra={"page_size": page}) for m in sorted((a, b))
    )
    assert lo.kv_cache_tokens <= hi.kv_cache_tokens
    for p in (lo, hi):
        assert p.kv_cache_tokens % page == 0
        assert p.fits == (p.bytes_per_request <= p.fit_budget_bytes)


def test_refusal_quotes_the_fraction_given():
    """SGLang quotes the ``--mem-fraction-static`` it ran with (``model_runner.py``: the "Loaded
    weights leave no GPU memory ... under --mem-fraction-static=%s" error formats
    ``server_args.mem_fraction_static``), not its default for the GPU (0.893 at 80 GiB)."""
    model = bundled_shape("llama-3.1-8b")
    p = plan(model, available_kv_bytes=-GIB, gpu_memory_bytes=81_559 * MIB,
             gpu_memory_utilization=0.88)  # fmt: skip
    assert p.log_lines == (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.",
    )
    short = plan(model, available_kv_bytes=100_000, gpu_memory_bytes=81_559 * MIB,
                 gpu_memory_utilization=0.7)  # fmt: skip
    assert short.log_lines[0].endswith("Current value: mem_fraction_static=0.7")


def test_engine_option_fraction_sizes_the_budget(cli):
    """``-E mem_fraction_static=0.5`` is SGLang's ``--mem-fraction-static``: the budget follows it
    (it was only quoted in a message, the pool sized with the default)."""
    args = ("plan", "llama-3.1-8b", "--engine", "sglang", "--gpu", "H100", "--max-model-len", "4096")  # fmt: skip
    option = cli(*args, "-E", "mem_fraction_static=0.5", "--json").json
    flag = cli(*args, "--gpu-memory-utilization", "0.5", "--json").json
    assert option["kv_cache_bytes"] == flag["kv_cache_bytes"]
    assert option["available_kv_bytes"] < cli(*args, "--json").json["available_kv_bytes"]
    both = cli(*args, "-E", "mem_fraction_static=0.5", "--gpu-memory-utilization", "0.6")
    assert both.exit_code == 2 and "error[conflicting-options]" in both.stderr
