"""``engines/sglang/graphs.py``: the survivors of a mutation run (docs/testing.md, "Mutation
testing") killed with SGLang 0.5.23's own checks and resolution: ``check_server_args``
(``arg_groups/validation_hook.py``: ``chunked_prefill_size must be divisible by page_size``),
``_resolve_max_context_size`` (``arg_groups/cuda_graph_hook.py``), ``parse_cuda_graph_config``'s
precedence, and the rows of ``tests/fixtures/sglang_0_5_23/graph_reserve.json`` recorded for
them (the last 5 rows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.engines.extra import MAX_OPTION_INT
from kvcalc.engines.sglang.defaults import memory_defaults
from kvcalc.engines.sglang.graphs import (
    check_capture,
    check_chunk,
    check_prefill_context,
    reserve_settings,
)
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.units import MIB

HERE = Path(__file__).parent / "fixtures"
ENTRIES = json.loads((HERE / "sglang_0_5_23" / "graph_reserve.json").read_text())["entries"]
CONFIGS = json.loads((HERE / "vllm_0_33" / "reference_configs.json").read_text())["models"]


def _row(config: str, **server_args):
    (row,) = [e for e in ENTRIES if e["config"] == config and e["server_args"] == server_args]
    return row


def _defaults(config: str, extra: dict):
    shape = parse_config(CONFIGS[config]["config"], name=config[:-5].replace("--", "/"))
    return memory_defaults("latest", 81_559 * MIB, 1, 1, shape, settings=reserve_settings(extra))


LLAMA = "meta-llama--Llama-3.1-8B.json"
QWEN3_VL = "Qwen--Qwen3-VL-8B-Instruct.json"


def test_a_one_token_chunk_off_a_64_token_page_is_refused():
    # recorded: SGLang asserts "chunked_prefill_size must be divisible by page_size" for 1 % 64
    row = _row(LLAMA, chunked_prefill_size=1, page_size=64)
    assert row["status"] == "error" and "divisible by page_size" in row["error"]
    with pytest.raises(InputError):
        check_chunk(1, 64)
    check_chunk(64, 64)
    check_chunk(-1, 64)  # chunked prefill off: nothing to divide


def test_a_prefill_context_of_one_token_is_taken():
    # recorded: 1 is positive and 1 ≤ 131,072, SGLang resolves it (the fraction unchanged)
    row = _row(LLAMA, cuda_graph_prefill_max_context=1)
    assert row["status"] == "ok"
    check_prefill_context(reserve_settings({"cuda_graph_prefill_max_context": 1}), 1, 131_072)
    with pytest.raises(InputError):
        check_prefill_context(reserve_settings({"cuda_graph_prefill_max_context": 0}), 1, 131_072)


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("enable_torch_compile", "maybe"),
        ("enable_torch_compile_debug_mode", "maybe"),
        ("torch_compile_max_bs", "many"),
        ("cuda_graph_max_seq_len_prefill", 2.5),
    ],
)
def test_each_capture_option_is_checked(key, bad):
    # SGLang's parser: store_true switches and type=int sizes
    with pytest.raises(InputError):
        check_capture({key: bad})
    check_capture({key: 8 if "bs" in key or "len" in key else True})


@pytest.mark.parametrize("chunk", [1, MAX_OPTION_INT, -1])
def test_the_chunk_s_bounds_are_taken(chunk):
    assert reserve_settings({"chunked_prefill_size": chunk}).chunked_prefill_size == chunk


def test_the_chunk_s_bounds_are_kept():
    with pytest.raises(InputError):
        reserve_settings({"chunked_prefill_size": MAX_OPTION_INT + 1})


@pytest.mark.parametrize("value", ["x", 2.5, True, MAX_OPTION_INT + 1, -(MAX_OPTION_INT + 1)])
def test_a_prefill_context_that_is_not_an_integer_is_refused(value):
    with pytest.raises(InputError) as caught:
        reserve_settings({"cuda_graph_prefill_max_context": value})
    assert caught.value.code == "invalid-input"


def test_the_prefill_context_s_bound_is_taken():
    settings = reserve_settings({"cuda_graph_prefill_max_context": MAX_OPTION_INT})
    assert settings.prefill_max_context == MAX_OPTION_INT


def test_graph_sizes_read_a_single_size_and_refuse_fractions():
    assert reserve_settings({"cuda_graph_bs_decode": 8}).decode_sizes == (8,)
    assert reserve_settings({"cuda_graph_bs_decode": "8"}).decode_sizes == (8,)
    assert reserve_settings({"cuda_graph_bs_decode": [MAX_OPTION_INT]}).decode_sizes == (
        MAX_OPTION_INT,
    )
    for bad in ([2.5], [True], [MAX_OPTION_INT + 1]):
        with pytest.raises(InputError):
            reserve_settings({"cuda_graph_bs_decode": bad})


def test_max_total_tokens_caps_the_prefill_graphs_beside_a_graph_setting():
    # recorded: with --max-total-tokens 4096 beside --cuda-graph-max-bs-decode 64, SGLang caps
    # the default prefill graphs at 4,096 tokens as it does with the cap alone
    for extra in (
        {"max_total_tokens": 4096, "cuda_graph_max_bs_decode": 64},
        {"max_total_tokens": 2000, "chunked_prefill_size": 4096},
    ):
        row = _row(LLAMA, **extra)
        got = _defaults(LLAMA, extra)
        assert got.mem_fraction_static == row["mem_fraction_static"]
        assert got.prefill_graph_sizes == row["cuda_graph"]["prefill"]["num_bs"]
        assert got.decode_graph_max_bs == row["cuda_graph"]["decode"]["max_bs"]


def test_a_full_prefill_backend_skips_the_compatibility_cascade():
    # recorded: Qwen3-VL-8B's default turns its prefill graphs off; "full" locks them on as
    # "breakable" does (parse_cuda_graph_config locks an explicit backend)
    row = _row(QWEN3_VL, cuda_graph_backend_prefill="full")
    assert row["cuda_graph"]["prefill"]["backend"] == "full"
    got = _defaults(QWEN3_VL, {"cuda_graph_backend_prefill": "full"})
    assert got.prefill_graph_sizes == row["cuda_graph"]["prefill"]["num_bs"]
    assert got.mem_fraction_static == row["mem_fraction_static"]
