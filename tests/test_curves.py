"""Capacity curves: hand-computed points and the fast block arithmetic against full plans."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcalc.errors import InputError
from kvcalc.planning import curves
from kvcalc.planning.curves import (
    capacity_curve,
    curve_basis,
    curve_point,
    default_lengths,
    parse_lengths,
    planned_point,
)
from kvcalc.planning.inputs import PlanInputs
from tests.helpers import bundled_shape

GIB = 1 << 30


@pytest.fixture(scope="module")
def llama():
    return bundled_shape("llama-3.1-8b")


def test_default_lengths_double_up_to_the_model_max():
    assert default_lengths(40_960) == (1024, 2048, 4096, 8192, 16384, 32768, 40960)
    assert default_lengths(131_072)[-2:] == (65536, 131072)
    assert default_lengths(512) == (512,)


def test_parse_lengths():
    # vLLM's spelling, as --max-model-len reads it: K = 1,024, k = 1,000
    assert parse_lengths("8K,4K, 32768,4096") == (4096, 8192, 32768)
    assert parse_lengths("4k,32k") == (4000, 32000)
    assert parse_lengths("1M") == (1 << 20,)
    assert parse_lengths("1m") == (1_000_000,)
    for bad in ("", "four", "0", "-1k"):
        with pytest.raises(InputError):
            parse_lengths(bad)


def test_llama_with_10_gib_of_kv(llama):
    """Worked example: page 2·16·8·128·2 = 65,536 B × 32 layers = 2 MiB per block;
    10 GiB // 2 MiB = 5,120 blocks."""
    basis = curve_basis(llama, PlanInputs(kv_cache_memory_bytes=10 * GIB, max_model_len=131_072))
    assert basis.fast and basis.num_blocks == 5120 and basis.bytes_per_block == 2 * (1 << 20)
    at = {n: curve_point(basis, n) for n in (4096, 8192, 32768, 131_072)}
    assert at[8192].max_concurrency == 10.0  # 5,120 / (8,192 / 16 = 512 blocks)
    assert at[8192].kv_cache_tokens == 81_920
    assert at[4096].max_concurrency == 20.0
    assert at[32768].max_concurrency == 2.5
    assert at[131_072].max_concurrency == 0.625 and not at[131_072].fits


def test_fit_boundary_holds_the_null_block_back(llama):
    """vLLM 0.33 checks needed bytes against available − one block: 5,119 blocks fit, 5,120 don't."""
    basis = curve_basis(llama, PlanInputs(kv_cache_memory_bytes=10 * GIB, max_model_len=131_072))
    inside, outside = 5119 * 16, 5119 * 16 + 1
    assert curve_point(basis, inside).fits
    edge = curve_point(basis, outside)  # 5,120 blocks: concurrency 1.00x, yet it does not fit
    assert edge.max_concurrency == 1.0 and not edge.fits
    for n in (inside, outside):
        assert curve_point(basis, n) == planned_point(llama, basis, n)


def test_capacity_curve_series_and_labels(llama):
    curve = capacity_curve(llama, PlanInputs(gpu="H100"), lengths=(8192, 4096),
                           kv_cache_dtypes=("bf16", "fp8"), engines=("vllm", "sglang"))  # fmt: skip
    assert curve.lengths_tokens == (4096, 8192)
    assert [s.label for s in curve.series] == ["vllm bf16", "vllm fp8", "sglang bf16", "sglang fp8"]
    bf16, fp8 = curve.series[0], curve.series[1]
    assert bf16.kv_bytes_per_token == 131_072 and fp8.kv_bytes_per_token == 65_536
    # same memory, half the bytes per token: twice the blocks
    assert fp8.points[0].max_concurrency == pytest.approx(
        2 * bf16.points[0].max_concurrency, rel=1e-3
    )
    only_dtypes = capacity_curve(
        llama, PlanInputs(gpu="H100"), lengths=(4096,), kv_cache_dtypes=("auto", "fp8")
    )
    assert [s.label for s in only_dtypes.series] == ["auto", "fp8"]


def test_a_model_that_does_not_fit_is_a_flat_zero_series():
    curve = capacity_curve(
        bundled_shape("llama-3.1-70b"), PlanInputs(gpu="L4"), lengths=(4096, 8192)
    )
    (series,) = curve.series
    assert series.verdict == "weights-dont-fit"
    assert all(p.max_concurrency == 0 and not p.fits for p in series.points)


def test_llamacpp_counts_slots_of_each_length(llama):
    curve = capacity_curve(llama, PlanInputs(kv_cache_memory_bytes=10 * GIB), lengths=(4096, 8192),
                           engines=("llamacpp",))  # fmt: skip
    (series,) = curve.series
    assert series.method == "planned per length"
    # one 8,192-cell slot: 8,192 × 131,072 B = 1 GiB; 10 GiB hold ten of them
    assert series.points[1].max_concurrency == pytest.approx(10.0, rel=1e-6)


def test_lengths_beyond_the_model_are_flagged():
    qwen = bundled_shape("qwen3-1.7b")  # max 40,960
    curve = capacity_curve(qwen, PlanInputs(gpu="H100"), lengths=(32768, 65536))
    assert [p.beyond_model_max for p in curve.series[0].points] == [False, True]


def test_too_many_series():
    with pytest.raises(InputError):
        capacity_curve(bundled_shape("qwen3-1.7b"), PlanInputs(gpu="H100"), lengths=(4096,),
                       kv_cache_dtypes=tuple(f"x{i}" for i in range(9)), engines=("vllm", "sglang"))  # fmt: skip


# -- the fast path agrees with a full plan at every length ------------------------------------------
CASES = [
    ("llama-3.1-8b", "vllm", "H100", 1),
    ("gemma-2-9b-it", "vllm", "H100", 1),  # interleaved sliding (4,096) and full groups
    ("gpt-oss-20b", "vllm", "H200", 1),  # sliding window of 128 tokens
    ("mistral-7b-v0.1", "vllm", "L40S", 1),  # sliding only
    ("deepseek-v3", "vllm", "H200", 8),  # MLA
    ("nvidia-nemotron-3-nano-30b-a3b-bf16", "vllm", "H200", 1),  # mamba + attention
    ("gemma-3-1b-it", "sglang", "L4", 1),
    ("gemma-2-9b-it", "trtllm", "H100", 1),  # sliding layers booked as full
    ("qwen3-30b-a3b", "trtllm", "H200", 1),
]


@pytest.fixture(scope="module")
def bases():
    out = {}
    for name, engine, gpu, tp in CASES:
        model = bundled_shape(name)
        inputs = PlanInputs(
            gpu=gpu, engine=engine, tensor_parallel_size=tp, max_model_len=model.max_model_len
        )
        out[(name, engine)] = (model, curve_basis(model, inputs))
    return out


@pytest.mark.parametrize(("name", "engine"), [(c[0], c[1]) for c in CASES])
@settings(max_examples=15, deadline=None)
@given(fraction=st.floats(min_value=0.0, max_value=1.0))
def test_fast_points_equal_full_plans(bases, name, engine, fraction):
    model, basis = bases[(name, engine)]
    length = max(1, round(fraction * model.max_model_len))
    # below fast_from_tokens vLLM caps a defaulted token budget at max_num_seqs × length (0.12 on)
    use_fast = basis.fast and length >= basis.fast_from_tokens
    fast = curve_point(basis, length, model_max_len=model.max_model_len) if use_fast else None
    full = planned_point(model, basis, length)
    assert curves.series_points(model, basis, (length,))[0] == full
    if fast is not None:
        assert math.isclose(fast.max_concurrency, full.max_concurrency, rel_tol=1e-12)
        assert fast == full


def test_disagreeing_arithmetic_falls_back_to_full_plans(llama, monkeypatch):
    from kvcalc.planning import curves

    monkeypatch.setattr(curves, "_group_blocks", lambda g, n, ref: 1)  # a wrong formula
    basis = curves.curve_basis(llama, PlanInputs(gpu="H100", max_model_len=8192))
    assert not basis.fast and "planned in full" in basis.notes[0]
    points = curves.series_points(llama, basis, (4096,))
    assert points[0] == planned_point(llama, replace(basis), 4096)
