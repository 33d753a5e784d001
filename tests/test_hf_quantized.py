"""transformers ``QuantizedCache`` (quanto, HQQ, fp8) and the float32 default, planned and measured.

The measured tests let transformers 5.24 generate on the CPU with the real backends (optimum-quanto,
hqq) and compare every tensor the cache holds with the ``hf`` engine's prediction.
"""

from __future__ import annotations

import pytest
from helpers import bundled_shape
from verify_helpers import needs_transformers

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.engines.hf.quantized import QuantizedCacheSpec
from kvcalc.errors import InputError
from kvcalc.units import GIB

HF = get_engine("hf")


def plan(name="llama-3.1-8b", max_model_len=4096, dtype="auto", **extra):
    model = bundled_shape(name)
    return HF.plan_kv_cache(EngineRequest(model=model, max_model_len=max_model_len, kv_cache_dtype=dtype,
                                          available_kv_bytes=40 * GIB, extra=extra))  # fmt: skip


def test_llama_int4_quanto_by_hand():
    p = plan(cache_implementation="quantized", nbits=4)
    # per layer and side at 4,096 tokens: 127 in the bf16 residual (residual_length − 1), 3,969
    # quantized: 8·3,969·128 = 4,064,256 values → 2,032,128 B of codes + 63,504 groups × (2 + 2) B
    # of scale and zero = 254,016; residual 8·127·128·2 = 260,096 → 2,546,240; × 2 sides × 32 layers
    assert p.kv_cache_dtype == "quanto_int4"
    assert p.kv_cache_bytes == p.bytes_per_request == 162_959_360
    # per token: 32 · 2 · (8·128/2 + 8·128/64 · 4) = 36,864 (vs 131,072 in bf16)
    assert p.kv_bytes_per_token == 36_864
    assert (
        plan(dtype="int4").kv_cache_bytes == 162_959_360
    )  # the generic name: transformers' default backend


def test_formats_by_hand():
    # hqq int8, residual 0 (-E residual_tokens=0): 8·4,096·128 = 4,194,304 codes of 1 B + 65,536
    # groups × (2 + 2) B of scale and zero = 4,456,448 per layer and side; × 64 = 285,212,672
    assert plan(dtype="hqq_int8", residual_tokens=0).kv_cache_bytes == 285_212_672
    assert plan(dtype="int8").kv_cache_dtype == "hqq_int8"  # quanto has no 8-bit cache
    # fp8: 1 B a value + one float32 scale per K and V tensor: 32·2·(8·4,096·128 + 4) = 268,435,712
    fp8 = plan(dtype="fp8")
    assert fp8.kv_cache_bytes == 268_435_712 and fp8.kv_bytes_per_token == 65_536
    # hqq 3-bit packs 10 codes an int32: a group of 64 takes 7 words = 28 B (not 24)
    spec = QuantizedCacheSpec(backend="hqq", nbits=3)
    assert spec.quantized_bytes((1, 8, 64, 128), 0, 2) == {
        "data": 28 * 1024,
        "scale": 2048,
        "zero": 2048,
    }


def test_residual_cycle_and_fit():
    spec = QuantizedCacheSpec(residual_length=128)
    assert [spec.max_residual(n) for n in (1, 2, 100, 4096)] == [0, 1, 99, 127]
    tight = HF.plan_kv_cache(EngineRequest(model=bundled_shape("llama-3.1-8b"), max_model_len=4096,
                                           kv_cache_dtype="int4", available_kv_bytes=100_000_000))  # fmt: skip
    assert not tight.fits and 0 < tight.estimated_max_model_len < 4096


@pytest.mark.parametrize(
    ("extra", "dtype", "code"),
    [
        ({"nbits": 4}, "auto", "invalid-input"),  # QuantizedCache options need the quantized cache
        (
            {"cache_implementation": "quantized", "nbits": 3},
            "auto",
            "invalid-input",
        ),  # quanto: 2 or 4
        (
            {"cache_implementation": "quantized", "backend": "fp8", "nbits": 4},
            "auto",
            "invalid-input",
        ),
        (
            {"cache_implementation": "quantized", "backend": "hqq", "axis_key": -1},
            "auto",
            "invalid-input",
        ),
        ({"cache_implementation": "static"}, "int4", "conflicting-options"),
        ({"nbits": 2}, "quanto_int4", "conflicting-options"),
        ({"cache_implementation": "quantized"}, "q4_0", "unsupported-dtype"),
        ({"residual_tokens": 500}, "int4", "invalid-input"),
    ],
)
def test_refusals(extra, dtype, code):
    with pytest.raises(InputError) as err:
        plan(dtype=dtype, **extra)
    assert err.value.code == code


def test_only_full_attention_and_transformers_5():
    with pytest.raises(InputError) as err:
        plan("gemma-2-9b-it", dtype="int4")  # QuantizedCache refuses sliding layers
    assert err.value.code == "unsupported-model" and "sliding" in str(err.value)
    with pytest.raises(InputError) as err:
        HF.plan_kv_cache(EngineRequest(model=bundled_shape("llama-3.1-8b"), max_model_len=64, kv_cache_dtype="int4",
                                       engine_version="4.57.1", available_kv_bytes=GIB))  # fmt: skip
    assert err.value.code == "unsupported-dtype"


def test_no_torch_dtype_is_float32():
    """GPT-2's config names no dtype: transformers builds (and caches) float32."""
    p = HF.plan_kv_cache(EngineRequest(model=bundled_shape("gpt2"), max_model_len=4096, available_kv_bytes=GIB,
                                       extra={"cache_implementation": "static"}))  # fmt: skip
    assert p.kv_cache_dtype == "fp32"
    assert p.kv_cache_bytes == 301_989_888  # 12 layers · 2 · 12 heads · 64 · 4 B · 4,096 tokens
    bf16 = HF.plan_kv_cache(EngineRequest(model=bundled_shape("gpt2"), max_model_len=4096, available_kv_bytes=GIB,
                                          kv_cache_dtype="bf16", extra={"cache_implementation": "static"}))  # fmt: skip
    assert bf16.kv_cache_bytes == 150_994_944


# -- measured: transformers generates with the real backends on the CPU -------------------------
@needs_transformers
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # 64 prompt + 20 new → 83 cached; 19 decode steps, residual_length 8: 19 mod 8 = 3 in the
        # residual, 80 quantized. Per layer and side (8 KV heads of 64): codes 8·80·64/2 = 20,480,
        # 640 groups × 2 B scale and zero each = 1,280 + 1,280, residual 8·3·64·2 = 3,072
        (["--kv-cache-dtype", "int4", "-E", "residual_length=8"], 2 * 2 * (20_480 + 1_280 + 1_280 + 3_072)),
        (["--kv-cache-dtype", "hqq_int4", "-E", "residual_length=8"], 2 * 2 * (20_480 + 1_280 + 1_280 + 3_072)),
        # 2-bit, axis −1: codes 8·80·64/4 = 10,240
        (["-E", "cache_implementation=quantized", "-E", "nbits=2", "-E", "axis_key=-1", "-E", "axis_value=-1",
          "-E", "residual_length=8"], 2 * 2 * (10_240 + 1_280 + 1_280 + 3_072)),
        # hqq 3-bit, groups of 32: 1,280 groups of 4 int32 words (16 B) = 20,480 + 2,560 + 2,560
        (["--kv-cache-dtype", "hqq_int3", "-E", "q_group_size=32", "-E", "residual_length=8"],
         2 * 2 * (20_480 + 2_560 + 2_560 + 3_072)),
        # hqq 8-bit, default residual_length 128: all 19 decode tokens in the residual, 64 quantized
        (["--kv-cache-dtype", "int8"], 2 * 2 * (8 * 64 * 64 + 2 * 512 * 2 + 8 * 19 * 64 * 2)),
        # fp8: 83 tokens · 8 · 64 values of 1 B + a 4 B float32 scale per tensor
        (["--kv-cache-dtype", "fp8"], 2 * 2 * (83 * 8 * 64 + 4)),
    ],
)  # fmt: skip
def test_run_quantized_cache_matches(cli, args, expected):
    r = cli("verify", "llama-3.2-1b-instruct", "--engine", "hf", "--run", "--layers", "2", "--prompt-tokens", "64",
            "--new-tokens", "20", *args, "--json")  # fmt: skip
    assert r.exit_code == 0, r.stdout + r.stderr
    data = r.json
    assert data["run"]["cache_class"] == "QuantizedCache" and data["run"]["cached_tokens"] == 83
    assert data["measured_bytes"] == data["predicted_bytes"] == expected
    assert all(c["measured_bytes"] == c["predicted_bytes"] for c in data["components"])


@needs_transformers
def test_run_gpt2_caches_float32(cli):
    """transformers picks float32 for GPT-2 by itself (the model is built without a dtype)."""
    r = cli("verify", "gpt2", "--engine", "hf", "--run", "-E", "cache_implementation=static",
            "--prompt-tokens", "1000", "--new-tokens", "4", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stdout + r.stderr
    data = r.json
    assert data["kv_cache_dtype"] == "fp32"
    # 12 layers · 2 · 1,003 tokens · 768 · 4 B
    assert data["measured_bytes"] == data["predicted_bytes"] == 73_949_184
