"""``planning/verdict.py`` at the edges a mutation run found untested: workloads without an output
length, larger than the cache or on sliding-window groups, the ``max_num_seqs`` cap, the reasons'
figures. Expected values are written out by hand (the worked examples of
``tests/test_planning.py``: Llama-3.1-8B, 10 GiB of KV = 5,120 blocks of 16 tokens).
"""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.verdict import runnable
from kvcalc.units import GIB

TEN_GIB = 10 * GIB


def kv_plan(alias: str, **kw):
    kw.setdefault("kv_cache_memory_bytes", TEN_GIB)
    return plan(bundled_shape(alias), PlanInputs(**kw), with_suggestions=False)


def test_a_workload_without_an_output_length_is_its_prompt():
    # 1,024 prompt tokens, no output: 1,024 tokens = 64 blocks (1,025 would be 65): 5,120 / 64 = 80
    r = kv_plan("llama-3.1-8b", max_model_len=8192, prompt_len=1024)
    assert r.workload_tokens == 1024
    assert r.workload_concurrency == pytest.approx(80.0)


def test_a_workload_larger_than_the_cache_is_a_fraction_of_a_request():
    # 100,000 tokens = 6,250 blocks of 16; 5,120 blocks hold 5,120 / 6,250 = 0.8192 of one
    r = kv_plan("llama-3.1-8b", max_model_len=131072, prompt_len=100_000)
    assert r.verdict == "wont-start"
    assert r.workload_tokens == 100_000
    assert r.workload_concurrency == pytest.approx(0.8192)


def test_a_workload_on_sliding_window_groups():
    # gpt-oss-20b: 12 sliding (window 128) + 12 full layers, 8 KV heads × 64, bf16: a 16-token page
    # is 2 · 8 · 64 · 2 B · 16 = 32,768 B per layer; one pool of 12 tensors: 393,216 B per block,
    # 10 GiB // 393,216 = 27,306 blocks. A 1,024-token request: 64 full blocks and
    # cdiv(1,024, 16) + 1 = 65 sliding ones (the window need not start on a block boundary;
    # below its cap of 513) → 27,306 / 129 = 211.67
    r = kv_plan("gpt-oss-20b", max_model_len=8192, prompt_len=1024)
    assert r.num_blocks == 27_306
    assert r.workload_concurrency == pytest.approx(27_306 / 129)


def test_runnable_is_capped_by_max_num_seqs_only_when_there_is_one():
    assert runnable(2117.02, 1024) == 1024
    assert runnable(4.19, 256) == 4.19
    assert runnable(3.5, None) == 3.5


def test_below_target_because_of_max_num_seqs():
    # 10 requests of 8,192 tokens fit in the KV cache, but --max-num-seqs 4 runs 4 at once; 8 asked
    r = kv_plan("llama-3.1-8b", max_model_len=8192, batch=8, max_num_seqs=4)
    assert r.verdict == "below-target"
    assert r.verdict_reason == (
        "max_num_seqs 4 lets the engine run 4 requests at once, 8 were asked for "
        "(10.00 of 8,192 tokens would fit in the KV cache)"
    )


def test_ok_says_when_the_engine_caps_the_requests():
    r = kv_plan("llama-3.1-8b", max_model_len=8192, max_num_seqs=4)
    assert r.verdict == "ok"
    assert r.verdict_reason == (
        "10.00 requests of 8,192 tokens fit per engine; the engine runs 4 at once (max_num_seqs)"
    )


def test_below_target_because_of_the_kv_cache():
    r = kv_plan("llama-3.1-8b", max_model_len=8192, batch=11)
    assert (r.verdict, r.verdict_reason) == (
        "below-target", "10.00 concurrent requests fit, 11 were asked for"
    )  # fmt: skip


def test_tight_says_how_much_is_left():
    # 10 requests of 8,192 use all 10.0 of the cache: 0.0 % left, under the 10.0 % threshold
    r = kv_plan("llama-3.1-8b", max_model_len=8192, batch=10)
    assert (r.verdict, r.verdict_reason) == (
        "tight", "only 0.0% of the KV cache is left beyond 10 request(s) (threshold 10.0%)"
    )  # fmt: skip


def test_one_request_too_long_says_the_longest_that_fits():
    # 131,072 tokens: 8,192 blocks · 2 MiB = 16.00 GiB > 10.00 GiB; vLLM 0.33 holds one block back:
    # (5,120 − 1) · 16 = 81,904 tokens fit
    r = kv_plan("llama-3.1-8b", max_model_len=131072)
    assert (r.verdict, r.verdict_reason) == (
        "wont-start",
        "one request of 131,072 tokens needs 16.00 GiB of KV cache but 10.00 GiB are available; "
        "the longest that fits is 81,904 tokens",
    )


def test_weights_that_do_not_fit_say_both_figures():
    # Llama-3.1-70B in bf16: 141,140,967,424 B = 131.45 GiB; an L4's budget at 0.9: 20.29 GiB
    r = plan(bundled_shape("llama-3.1-70b"), PlanInputs(gpu="L4"), with_suggestions=False)
    assert (r.verdict, r.verdict_reason) == (
        "weights-dont-fit", "the weights need 131.45 GiB per GPU but the engine may use 20.29 GiB"
    )  # fmt: skip


def test_no_memory_left_says_where_it_went():
    # Llama-3.1-8B on an L4 at 0.72: 15.88 GiB budget − 14.99 GiB weights − 1.39 GiB activation
    # peak and overhead = −0.51 GiB (the figures as the memory table rounds them)
    r = plan(bundled_shape("llama-3.1-8b"),
             PlanInputs(gpu="L4", gpu_memory_utilization=0.72, max_model_len=8192),
             with_suggestions=False)  # fmt: skip
    assert (r.verdict, r.verdict_reason) == (
        "wont-start",
        "no memory is left for the KV cache (-0.51 GiB: the engine budget 15.88 GiB less 14.99 GiB "
        "of weights and 1.39 GiB of activation peak and runtime overhead)",
    )


def test_sglang_refuses_a_swa_pool_at_its_admission_floor():
    # SGLang 0.5.23 pool_configurator.py validate_swa_pool_size: refused when
    # sliding_window_size + page_size >= swa_tokens (gpt-oss: window 128, page 1)
    from kvcalc.engines.sglang.swa import pool_too_small

    model = bundled_shape("gpt-oss-20b")
    assert pool_too_small(model, 130, 1) is None
    assert pool_too_small(model, 129, 1) == (
        "SWA pool (129 tokens) cannot hold even one request: the prefill admission floor is "
        "sliding_window_size (128) + page_size (1). Increase --swa-full-tokens-ratio or the total "
        "KV budget."
    )
    assert pool_too_small(bundled_shape("llama-3.1-8b"), 1, 1) is None  # no window: nothing to hold


def test_a_refused_start_quotes_the_engine_and_the_fix():
    # vLLM 0.33's ModelConfig refusal (the sentence tests/test_vllm_reference.py checks against the
    # recorded one), then kvcalc's fix
    r = kv_plan("llama-3.1-8b", max_model_len=200_000)
    assert (r.verdict, r.verdict_reason) == (
        "wont-start",
        "vllm refuses to start: User-specified max_model_len (200000) is greater than the derived "
        "max_model_len (max_position_embeddings=131072.0 or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.; fix: --max-model-len 131072, or "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ... (kvcalc: --allow-long-max-model-len)",
    )


def test_a_cache_of_no_block_holds_no_request():
    # 1 MiB of KV is less than one 2 MiB block (32 layers × 65,536 B): 0 blocks, 0 tokens fit
    r = kv_plan("llama-3.1-8b", max_model_len=8192, kv_cache_memory_bytes=1 << 20, prompt_len=16)
    assert r.num_blocks == 0 and r.workload_concurrency == 0.0
    assert r.verdict_reason == (
        "one request of 8,192 tokens needs 1.00 GiB of KV cache but 0.00 GiB are available; the "
        "longest that fits is 0 tokens"
    )


@pytest.mark.parametrize(
    ("prompt", "output", "shared", "expected"),
    [
        (1024, None, 1024, 5120.0),  # the whole request shared: every block counts once
        (1024, None, 1008, 5120 - 63),  # 63 of 64 blocks shared: (5,120 − 63) / 1
        (1024, 1024, 520, (5120 - 32) / 96),  # 520 tokens share 32 whole blocks, not 32.5
    ],
)
def test_a_shared_prefix_counts_whole_blocks_once(prompt, output, shared, expected):
    r = kv_plan("llama-3.1-8b", max_model_len=8192, prompt_len=prompt, output_len=output,
                shared_prefix=shared)  # fmt: skip
    assert r.workload_concurrency == pytest.approx(expected)


def test_below_target_at_exactly_the_kv_concurrency_names_the_cap():
    # 10.00 fit and 10 are asked: the KV cache holds them, max_num_seqs 4 does not run them
    r = kv_plan("llama-3.1-8b", max_model_len=8192, batch=10, max_num_seqs=4)
    assert r.verdict_reason.startswith("max_num_seqs 4 lets the engine run 4 requests at once")


def test_tight_without_a_target_is_counted_beyond_one_request():
    # 80,000 tokens = 5,000 blocks: 5,120 / 5,000 = 1.024 requests, 2.3 % beyond one
    r = kv_plan("llama-3.1-8b", max_model_len=80_000)
    assert (r.verdict, r.verdict_reason) == (
        "tight", "only 2.3% of the KV cache is left beyond 1 request(s) (threshold 10.0%)"
    )  # fmt: skip


@pytest.mark.parametrize("seqs", [10, 20])
def test_ok_names_no_cap_the_cache_does_not_reach(seqs):
    # 10.00 requests fit: max_num_seqs 10 or 20 caps nothing
    r = kv_plan("llama-3.1-8b", max_model_len=8192, max_num_seqs=seqs)
    assert r.verdict_reason == "10.00 requests of 8,192 tokens fit per engine"


def test_sglang_books_windows_for_every_token_unless_the_architecture_is_hybrid_swa():
    # SGLang 0.5.23 model_config.py is_hybrid_swa_model: gpt-oss is in the list, Mistral is not
    note = "SGLang books sliding/chunked layers for every token (not a hybrid-SWA architecture)"
    mistral = kv_plan("mistral-7b-v0.1", engine="sglang", max_model_len=8192)
    oss = kv_plan("gpt-oss-20b", engine="sglang", max_model_len=8192)
    assert note in mistral.notes and note not in oss.notes
    # -E hybrid_swa=false books gpt-oss's 24 layers for every token: 24 · 2 · 8 · 64 · 2 B = 49,152
    off = kv_plan("gpt-oss-20b", engine="sglang", max_model_len=8192,
                  engine_options=(("hybrid_swa", False),))  # fmt: skip
    assert note in off.notes and off.kv_bytes_per_token == 49_152


def test_a_cache_of_one_block_holds_one_short_request():
    # 2 MiB of KV = one 16-token block (32 layers × 65,536 B): a 16-token request takes it whole
    # (vLLM 0.33 holds one block back, so the plan does not start; the workload figure is 1.0)
    r = kv_plan("llama-3.1-8b", max_model_len=32, kv_cache_memory_bytes=2 << 20, prompt_len=16)
    assert r.num_blocks == 1 and r.workload_concurrency == 1.0


def test_a_fixed_pool_that_fits_is_ok_and_one_that_does_not_says_why():
    # llama.cpp allocates one slot of 8,192 cells up front: 32 · 8 · 128 · 2 · 2 B = 128 KiB a
    # token, 1.00 GiB for the slot, well inside 10 GiB; 131,072 cells need 16.00 GiB
    ok = kv_plan("llama-3.1-8b", engine="llamacpp", max_model_len=8192)
    assert (ok.verdict, ok.verdict_reason) == ("ok", "1.00 requests of 8,192 tokens fit per engine")
    short = kv_plan("llama-3.1-8b", engine="llamacpp", max_model_len=131072)
    assert (short.verdict, short.verdict_reason) == (
        "wont-start",
        "one request of 131,072 tokens needs 16.00 GiB of KV cache but 10.00 GiB are available; "
        "the longest that fits is 81,920 tokens",
    )


def test_sglang_request_cap_pool_is_refused_by_name():
    from kvcalc.errors import KvcalcError

    with pytest.raises(KvcalcError) as refused:
        kv_plan("gpt-oss-20b", engine="sglang", max_model_len=8192, max_num_seqs=8,
                engine_options=(("disable_radix_cache", True),))  # fmt: skip
    assert (refused.value.code, refused.value.message, refused.value.hint) == (
        "unsupported-model",
        "sglang: with the radix cache off and --max-running-requests given, SGLang sizes the "
        "sliding-window pool from the request cap (SWARequestCapPoolConfigurator), which kvcalc "
        "does not model",
        "drop -E disable_radix_cache=true or --max-num-seqs",
    )
    # without the cap, or with the radix cache on, it is planned
    assert kv_plan("gpt-oss-20b", engine="sglang", max_model_len=8192, max_num_seqs=8).verdict
