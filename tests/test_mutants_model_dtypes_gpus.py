"""Tests written for the survivors of a mutation run over ``kvcalc/model/dtypes.py`` and
``kvcalc/model/gpus.py`` (docs/testing.md, "Mutation testing"): the bytes of an empty row, the
refusals' texts (what a user reads to fix the setting) and the GPU name suggestions."""

from __future__ import annotations

import pytest

from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP8_PER_TOKEN_HEAD, INT4, INT8, Q8_0, parse_cache_dtype
from kvcalc.model.gpus import get_gpu


@pytest.mark.parametrize("dtype", [INT8, INT4, FP8_PER_TOKEN_HEAD, BF16, Q8_0])
def test_an_empty_row_holds_no_bytes_not_even_its_scale(dtype):
    # a layer with no values on a side (an MLA latent has no V) stores nothing there: the 4-byte
    # per-row scale of the per-token-head formats belongs to a row that exists
    assert dtype.row_bytes(0) == 0
    # and a row of 128 values: 128 × 1 B + a 4 B scale (int8), 64 + 4 (int4)
    assert (INT8.row_bytes(128), INT4.row_bytes(128)) == (132, 68)


def test_a_block_format_refuses_a_row_it_cannot_tile():
    # llama.cpp's q8_0 packs 32 values a block: 100 values are not whole blocks
    with pytest.raises(InputError) as err:
        Q8_0.row_bytes(100)
    assert err.value.code == "unsupported-dtype"
    assert (
        err.value.message == "cache dtype q8_0 needs rows that are a multiple of 32 values, got 100"
    )
    assert err.value.hint == "choose fp8, int8 or bf16 for this model"


@pytest.mark.parametrize(("name", "bits"), [("int8", "8"), ("INT4", "4")])
def test_a_bare_integer_format_is_ambiguous(name, bits):
    with pytest.raises(InputError) as err:
        parse_cache_dtype(name)
    key = name.lower()
    assert err.value.code == "ambiguous-dtype"
    assert err.value.message == (
        f"{key} names each engine's own {bits}-bit KV cache, which differ in layout"
    )
    assert err.value.hint == (
        "give the engine (--engine), or its format: vLLM int8_per_token_head/int4_per_token_head, "
        "llama.cpp q8_0/q4_0 (kvcalc inspect lists each engine's)"
    )


def test_an_unknown_format_lists_every_format():
    with pytest.raises(InputError) as err:
        parse_cache_dtype("fp6")
    assert err.value.code == "unknown-dtype" and err.value.message == "unknown cache dtype 'fp6'"
    assert err.value.hint == (
        "choose one of: auto, fp32, fp16, bf16, fp8, fp8_e5m2, fp8_per_token_head, "
        "int8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla, q8_0, q4_0, q4_1, q5_0, "
        "q5_1, iq4_nl"
    )


def test_an_unknown_gpu_suggests_the_three_closest_names():
    # "a1000" is close to the keys a100, a6000, a100-80g, a100-40g (difflib, cutoff 0.6): the first
    # three name A100-80GB and RTX-A6000 (a100 and a100-80g are one GPU); a fourth would add
    # A100-40GB
    with pytest.raises(InputError) as err:
        get_gpu("a1000")
    assert err.value.code == "unknown-gpu" and err.value.message == "unknown GPU 'a1000'"
    assert err.value.hint.startswith(
        "did you mean A100-80GB or RTX-A6000? known GPUs: H100-SXM, H100-PCIe, "
    )
    assert err.value.hint.endswith(", RTX-6000-Ada, MI300X, MI325X")
    with pytest.raises(InputError) as err:
        get_gpu("zzz")  # nothing close: the list alone
    assert err.value.hint.startswith("known GPUs: H100-SXM, H100-PCIe, H100-NVL, H200, H20, ")
