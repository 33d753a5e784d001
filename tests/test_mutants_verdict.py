"""``planning/verdict.py``: the survivors of a mutation run (docs/testing.md, "Mutation testing")
that change a number, a verdict or the figures a reason gives, each killed here.

Engine behaviour is cited where a test depends on it; the reasons' figures are worked out by
hand from the inputs (Llama-3.1-8B: 32 layers · K and V · 8 KV heads · 128 · 2 B = 131,072 B a
token, 2 MiB a 16-token block; 10 GiB of KV = 5,120 blocks).
"""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.engines.vllm.startup import StartupMemory
from kvcalc.errors import InputError
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.verdict import Device, short_reason
from kvcalc.units import GIB, MIB

TEN_GIB = 10 * GIB


def _plan(alias: str = "llama-3.1-8b", **kw):
    return plan(bundled_shape(alias), PlanInputs(**kw), with_suggestions=False)


def _kv10(alias: str = "llama-3.1-8b", **kw):
    return _plan(alias, kv_cache_memory_bytes=TEN_GIB, **kw)


# -- headroom: the workload's concurrency, not max_model_len's -------------------------------------
def test_headroom_is_counted_at_the_workloads_requests():
    # 1,024-token requests take 64 blocks: 5,120 / 64 = 80 fit (at 8,192 tokens only 10 would).
    # 20 asked: 1 − 20 / 80 = 0.75 of the cache is headroom, 0.75 · 10 GiB = 8,053,063,680 B
    r = _kv10(max_model_len=8192, prompt_len=1024, batch=20)
    assert (r.verdict, r.verdict_reason) == ("ok", "80.00 requests of 1,024 tokens fit per engine")
    assert (r.headroom_fraction, r.headroom_bytes) == (0.75, 8_053_063_680)


def test_headroom_of_less_than_one_request():
    # 100,000 tokens = 6,250 blocks: 5,120 / 6,250 = 0.8192 of a request. Headroom beyond one:
    # 1 − 1 / 0.8192 = −0.220703125; in bytes 10 GiB − round(10 GiB / 0.8192) = 10,737,418,240 −
    # 13,107,200,000 = −2,369,781,760 (the share of one request that is missing)
    r = _kv10(max_model_len=131072, prompt_len=100_000)
    assert r.headroom_fraction == pytest.approx(-0.220703125)
    assert r.headroom_bytes == -2_369_781_760


def test_headroom_of_no_request_is_one_whole_request_missing():
    # 1 MiB of KV holds no 2 MiB block: nothing fits. The fraction is −1 (all of the one request
    # missing) and the bytes one whole request: 8,192 tokens · 131,072 B = 1 GiB
    r = _plan(kv_cache_memory_bytes=1 << 20, max_model_len=8192, prompt_len=16)
    assert (r.headroom_fraction, r.headroom_bytes) == (-1.0, -GIB)


def test_a_fixed_pools_headroom_is_memory():
    # llama.cpp allocates one slot of 8,192 cells (8,192 · 131,072 B = 1 GiB) in 10 GiB: 9 GiB
    # (9,663,676,416 B) left, 0.9 of what is available
    r = _kv10(engine="llamacpp", max_model_len=8192)
    assert (r.headroom_bytes, r.headroom_fraction) == (9 * GIB, 0.9)


def test_a_fixed_pool_with_nothing_available_has_no_headroom_fraction():
    # Llama-3.1-70B's 131.45 GiB of weights on a 22.05 GiB L4: nothing is available for llama.cpp's
    # cache (negative), and the share of it left is −1, not a ratio of two negative figures
    r = _plan("llama-3.1-70b", engine="llamacpp", gpu="L4")
    assert r.available_kv_bytes < 0 and r.headroom_fraction == -1.0
    assert r.headroom_bytes == r.available_kv_bytes - r.kv_cache_bytes


# -- the verdict's thresholds and wording ----------------------------------------------------------
def test_headroom_exactly_at_the_threshold_is_not_tight():
    # 10 requests of 8,192 fit, 5 asked: 1 − 5 / 10 = 0.5 left, at --tight 0.5 exactly: tight is
    # headroom *under* the threshold (docs/check.md, tight_threshold)
    r = _kv10(max_model_len=8192, batch=5, tight_fraction=0.5)
    assert r.headroom_fraction == 0.5
    assert (r.verdict, r.verdict_reason) == ("ok", "10.00 requests of 8,192 tokens fit per engine")


def test_below_target_because_the_cap_is_one_request():
    r = _kv10(max_model_len=8192, batch=2, max_num_seqs=1)
    assert (r.verdict, r.verdict_reason) == (
        "below-target",
        "max_num_seqs 1 lets the engine run 1 request at once, 2 were asked for (10.00 of 8,192 "
        "tokens would fit in the KV cache)",
    )


def test_a_length_refusal_comes_before_the_start_up_check():
    # both wrong: max_model_len past the model's and a fraction of 1.0. vLLM validates the length
    # when it builds its config (ModelConfig.__post_init__ → _get_and_verify_max_len, in
    # EngineArgs.create_engine_config) before any worker starts and takes its memory snapshot
    # (Worker.init_device → request_memory): it stops at the length
    r = _plan(gpu="H100-80GB", gpu_memory_utilization=1.0, max_model_len=200_000)
    assert r.verdict == "wont-start"
    assert r.verdict_reason.startswith(
        "vllm refuses to start: User-specified max_model_len (200000) is greater than the derived "
        "max_model_len (max_position_embeddings=131072.0"
    )


# -- the start-up check's band only for a deployment that would start ------------------------------
def test_the_start_up_band_leaves_a_plan_that_does_not_start_alone():
    # TP 2 at 0.98 is refused beside the largest NCCL share recorded (tests/test_vllm_startup.py);
    # Llama-3.1-70B's 131,072-token request does not fit the cache anyway: that reason stays
    r = _plan("llama-3.1-70b", gpu="H100-80GB", gpu_memory_utilization=0.98,
              tensor_parallel_size=2)  # fmt: skip
    assert r.verdict == "wont-start"
    assert r.verdict_reason.startswith("one request of 131,072 tokens needs 20.00 GiB of KV cache")


def test_the_start_up_band_leaves_weights_that_do_not_fit_alone():
    # Llama-3.1-405B in bf16 at TP 2: 378.02 GiB of weights per GPU, more than 0.98 of an H100
    r = _plan("llama-3.1-405b", gpu="H100-80GB", gpu_memory_utilization=0.98,
              tensor_parallel_size=2)  # fmt: skip
    assert (r.verdict, r.verdict_reason) == (
        "weights-dont-fit", "the weights need 378.02 GiB per GPU but the engine may use 77.64 GiB"
    )  # fmt: skip


def test_the_start_up_band_says_what_the_gpu_holds_at_either_end():
    # held before the snapshot: the CUDA context (0.51 GiB, one GPU) and with NCCL's buffers the
    # largest share recorded (2.01 GiB; engine_logs.yaml, tests/test_vllm_startup.py)
    r = _plan(gpu="H100-80GB", gpu_memory_utilization=0.98, tensor_parallel_size=2)
    assert r.verdict_reason.startswith(
        "may not start: with 0.51 GiB held before its start-up check (the CUDA context) vLLM finds "
        "78.71 GiB free, starts and would be ok ("
    )
    assert "with NCCL's buffers as recorded on more than one GPU (2.01 GiB held) it refuses: " in (
        r.verdict_reason
    )


# -- the pessimistic end of the band ----------------------------------------------------------------
def test_tight_only_at_the_pessimistic_end_says_both_budgets():
    # Llama-3.1-8B on an L4 at 24,576 tokens (1,536 blocks a request): the central budget holds
    # 1,998 blocks (1.30 requests: ok), the pessimistic one available_kv_bytes_low // 2 MiB = 1,614
    # blocks = 25,824 tokens, 1 − 24,576 / 25,824 = 4.8 % beyond one request: tight there. It
    # starts at both ends, so no "may not start"
    r = _plan(gpu="L4", max_model_len=24576)
    low, central = r.available_kv_bytes_low, r.available_kv_bytes
    assert (r.num_blocks, low // (2 * MIB)) == (1998, 1614)
    assert (r.verdict, r.verdict_reason) == (
        "tight",
        f"at the pessimistic end of the estimate ({low / GIB:.2f} GiB for KV instead of "
        f"{central / GIB:.2f}): only 4.8% of the KV cache is left beyond 1 request(s) "
        "(threshold 10.0%)",
    )
    assert f"{low / GIB:.2f}" == "3.15" and f"{central / GIB:.2f}" == "3.90"


def test_may_not_start_says_both_budgets():
    # 30,000 tokens: tight at the central estimate, no request at the pessimistic end
    r = _plan(gpu="L4", max_model_len=30000)
    low, central = r.available_kv_bytes_low, r.available_kv_bytes
    assert r.verdict_reason.startswith(
        f"may not start: at the central estimate of the KV memory ({central / GIB:.2f} GiB) vLLM "
        "starts and would be tight (only "
    )
    assert f"; at the pessimistic end of the estimate ({low / GIB:.2f} GiB) one request" in (
        r.verdict_reason
    )


def test_two_longest_figures_say_both_budgets():
    # 40,000 tokens fit at neither end: the longest at each, with the budget it was measured at
    r = _plan(gpu="L4", max_model_len=40000)
    low, central = r.available_kv_bytes_low, r.available_kv_bytes
    assert r.verdict_reason.endswith(
        f" at the central estimate ({central / GIB:.2f} GiB for KV), 25,808 at its pessimistic "
        f"end ({low / GIB:.2f} GiB)"
    )
    assert (low // (2 * MIB) - 1) * 16 == 25_808  # vLLM 0.33: (blocks − 1 null block) · 16


# -- workloads at max_model_len ---------------------------------------------------------------------
def test_a_workload_of_exactly_max_model_len_is_served_whole():
    # SGLang 0.5.23 TokenizerManager._validate_one_request rejects max_new_tokens + input tokens
    # *greater* than the context length: 4,096 + 4,096 = 8,192 is accepted. vLLM's check_stop ends
    # the request at num_tokens >= max_model_len, the same token its max_tokens ends it at: nothing
    # is cut, no note
    sgl = _kv10(engine="sglang", max_model_len=8192, prompt_len=4096, output_len=4096)
    assert sgl.workload_tokens == 8192
    vllm = _kv10(max_model_len=8192, prompt_len=4096, output_len=4096)
    assert not [n for n in vllm.notes if "exceed max_model_len" in n]


def test_a_prompt_too_long_says_the_fix():
    with pytest.raises(InputError) as err:
        _kv10(max_model_len=8192, prompt_len=8192)
    assert err.value.message == (
        "the workload's prompt of 8,192 tokens is not shorter than max_model_len 8,192: vLLM "
        "rejects such requests (the prompt needs room for at least one output token)"
    )
    assert err.value.hint == "raise --max-model-len above the prompt, or shorten --prompt-len"


@pytest.mark.parametrize(
    ("engine", "does"),
    [
        ("sglang", "SGLang rejects such requests"),  # TokenizerManager._validate_one_request
        ("llamacpp", "kvcalc does not know what llama.cpp does with such requests"),
    ],
)
def test_a_workload_past_max_model_len_says_what_the_engine_does(engine, does):
    with pytest.raises(InputError) as err:
        _kv10(engine=engine, max_model_len=8192, prompt_len=5000, output_len=5000)
    assert err.value.message == (
        "the workload's 10,000 tokens (5,000 prompt + 5,000 output) exceed max_model_len 8,192: "
        + does
    )
    assert err.value.hint == "give --output-len at most 3,192, or raise --max-model-len"


# -- fixed pools: every slot's context -------------------------------------------------------------
def test_transformers_batch_is_the_whole_pool():
    # transformers' cache for a batch of 4 × 131,072 tokens · 131,072 B = 64 GiB (4 × 16 GiB);
    # 10 GiB hold 10 GiB / (4 · 131,072 B) = 20,480 tokens per sequence
    r = _kv10(engine="hf", max_model_len=131072, batch=4)
    assert (r.verdict, r.verdict_reason) == (
        "wont-start",
        "transformers allocates its whole cache up front: 4 sequences × 131,072 tokens need "
        "64.00 GiB (4 × 16.00 GiB) but 10.00 GiB are available; with 4 sequences the longest "
        "context that fits each is 20,480 tokens",
    )


def test_llamacpp_slots_shorter_than_a_request():
    # llama.cpp splits -c 8,192 over 4 slots: n_ctx_seq = 8,192 / 4 = 2,048 cells a slot
    # (llama_context), fewer than a request of 8,192; the 1 GiB cache fits the 10 GiB
    r = _kv10(engine="llamacpp", max_model_len=8192, batch=4, engine_options=(("n_ctx", 8192),))
    assert (r.verdict, r.verdict_reason) == (
        "wont-start",
        "a request of 8,192 tokens is longer than the 2,048 tokens llama.cpp's context gives each "
        "of its 4 slot(s)",
    )


# -- short of the GPU: the figures of the reason ---------------------------------------------------
def _startup(total: int, held: int) -> StartupMemory:
    return StartupMemory(total_bytes=total, utilization=0.9, requested_bytes=total * 9 // 10,
                         free_bytes=total - held, free_low_bytes=total - held)  # fmt: skip


def test_short_of_the_gpu_with_no_term_outside_the_budget():
    # 8 GiB; the parts take 8 GiB + 256 MiB: 256 MiB short, no CUDA context known
    d = Device(total_bytes=8 * GIB, free_bytes=-256 * MIB)
    assert short_reason("vllm", d) == (
        "weights, overhead and KV cache take 8.25 GiB of the GPU's 8.00 GiB (256.00 MiB short): "
        "vLLM runs out of memory allocating them"
    )


def test_short_beside_the_cuda_context_names_the_term_outside():
    # 8 GiB, 512 MiB held by the CUDA context at start-up: 7.50 GiB free then. The parts leave
    # 128 MiB of the GPU free, 512 − 128 = 384 MiB short; used 8 GiB − 128 MiB = 7.88 GiB
    d = Device(total_bytes=8 * GIB, free_bytes=128 * MIB, outside=(("CUDA graphs", 600 * MIB),),
               startup=_startup(8 * GIB, 512 * MIB))  # fmt: skip
    assert short_reason("vllm", d) == (
        "the CUDA graphs (600.00 MiB), which vLLM allocates after its KV cache outside the budget "
        "it sizes the cache from, do not fit: weights, overhead and KV cache take 7.88 GiB of the "
        "7.50 GiB free when vLLM starts (the GPU's 8.00 GiB less 0.50 GiB its CUDA context holds) "
        "(384.00 MiB short); it runs out of memory at start-up (capturing its CUDA graphs, warming "
        "up) or on its first full batch; lower --gpu-memory-utilization"
    )


def test_short_with_two_terms_outside_an_engine_without_the_knob():
    # SGLang keeps activations and graphs in the reserved 1 − mem_fraction_static
    d = Device(total_bytes=8 * GIB, free_bytes=-GIB,
               outside=(("activation peak", 100 * MIB), ("CUDA graphs", 700 * MIB)))  # fmt: skip
    assert short_reason("sglang", d) == (
        "the activation peak (100.00 MiB) and the CUDA graphs (700.00 MiB), which SGLang allocates "
        "after its KV cache outside the budget it sizes the cache from, do not fit: weights, "
        "overhead and KV cache take 9.00 GiB of the GPU's 8.00 GiB (1,024.00 MiB short); it runs "
        "out of memory at start-up (capturing its CUDA graphs, warming up) or on its first full "
        "batch; lower SGLang's memory fraction (--gpu-memory-utilization)"
    )


def test_short_beside_a_given_kv_size_names_every_term():
    # --kv-cache-memory: activations, non-torch memory and graphs all come beside it
    d = Device(total_bytes=8 * GIB, free_bytes=-2 * MIB, given_kv=True,
               outside=(("activation peak", MIB), ("non-torch memory", 2 * MIB),
                        ("CUDA graphs", 3 * MIB)))  # fmt: skip
    assert short_reason("vllm", d) == (
        "the activation peak (1.00 MiB), the non-torch memory (2.00 MiB) and the CUDA graphs "
        "(3.00 MiB), which vLLM allocates beside the KV cache size given (--kv-cache-memory), do "
        "not fit: weights, overhead and KV cache take 8.00 GiB of the GPU's 8.00 GiB (2.00 MiB "
        "short); it runs out of memory at start-up (capturing its CUDA graphs, warming up) or on "
        "its first full batch; lower --kv-cache-memory"
    )


def test_transformers_batch_of_two_is_a_pool_of_two():
    # 2 × 131,072 tokens · 131,072 B = 32 GiB; 10 GiB / (2 · 131,072 B) = 40,960 tokens each
    r = _kv10(engine="hf", max_model_len=131072, batch=2)
    assert r.verdict_reason == (
        "transformers allocates its whole cache up front: 2 sequences × 131,072 tokens need "
        "32.00 GiB (2 × 16.00 GiB) but 10.00 GiB are available; with 2 sequences the longest "
        "context that fits each is 40,960 tokens"
    )


def test_llamacpp_slots_shorter_than_a_request_in_exactly_the_memory_given():
    # the same 4 slots of 2,048 cells: 8,192 · 131,072 B = 1 GiB, exactly the 1 GiB given — the
    # memory is there, the slots are too short
    r = _plan(engine="llamacpp", kv_cache_memory_bytes=GIB, max_model_len=8192, batch=4,
              engine_options=(("n_ctx", 8192),))  # fmt: skip
    assert r.kv_cache_bytes == r.available_kv_bytes == GIB
    assert r.verdict_reason == (
        "a request of 8,192 tokens is longer than the 2,048 tokens llama.cpp's context gives each "
        "of its 4 slot(s)"
    )


def test_llamacpp_in_less_than_its_smallest_cache_fits_nothing():
    # llama.cpp pads its cache to 256 cells (GGML_PAD(n_ctx, 256), kvcalc/engines/llamacpp):
    # 256 · 131,072 B = 32 MiB at the least, more than the 1 MiB given: no length fits
    r = _plan(engine="llamacpp", kv_cache_memory_bytes=1 << 20, max_model_len=8192)
    assert r.verdict_reason == (
        "one request of 8,192 tokens needs 1.00 GiB of KV cache but 0.00 GiB are available; the "
        "longest that fits is 0 tokens"
    )


def test_nothing_at_the_pessimistic_end_adds_no_second_longest():
    # Llama-3.1-8B on an L4 at 0.75: the central budget holds a few blocks, the pessimistic end
    # none (negative): one "longest that fits", (blocks − 1 null block) · 16 at the central end
    r = _plan(gpu="L4", gpu_memory_utilization=0.75, max_model_len=8192)
    assert r.available_kv_bytes > 0 > r.available_kv_bytes_low and r.verdict == "wont-start"
    longest = (r.available_kv_bytes // (2 * MIB) - 1) * 16
    assert r.verdict_reason.endswith(f"; the longest that fits is {longest:,} tokens")


# -- byte-exact boundaries, on a GPU of a size chosen to land on them ------------------------------
# Qwen3-0.6B at --gpu-memory-utilization 0.5 on a GPU given by its size: the overhead estimate does
# not depend on the size, so ceil(size · 0.5) − weights − overhead moves by one byte for every two
# bytes of GPU. The sizes come from a first plan's figures; the rules tested are the engine's.
def _qwen(gpu_bytes: int, **kw):
    return _plan("qwen3-0.6b", gpu_memory_bytes=gpu_bytes, gpu_memory_utilization=0.5,
                 max_model_len=4096, **kw)  # fmt: skip


def test_a_kv_budget_of_zero_bytes_and_of_one_byte():
    # vLLM 0.33 _check_enough_kv_cache_memory (v1/core/kv_cache_planning.py): available_memory
    # <= 0 raises "No available memory for the cache blocks"; 1 byte passes that and fails the
    # next check (one request's blocks do not fit it)
    probe = _qwen(8 * GIB).available_kv_bytes
    size = 8 * GIB - 2 * probe  # ceil(size / 2) is then the weights + overhead exactly
    nothing, one = _qwen(size), _qwen(size + 1)
    assert (nothing.available_kv_bytes, one.available_kv_bytes) == (0, 1)
    assert nothing.verdict == one.verdict == "wont-start"
    assert nothing.verdict_reason.startswith("no memory is left for the KV cache (0.00 GiB")
    assert one.verdict_reason.startswith("one request of 4,096 tokens needs 0.44 GiB of KV cache")


def test_weights_exactly_the_budget_load_and_leave_nothing():
    # ceil(2w · 0.5) = w: the weights fill the budget and load; nothing is left for the KV cache
    # (vLLM loads the weights before it sizes the cache: the "No available memory" refusal). One
    # byte of budget less (2w − 2) and they are more than the engine may use
    w = _qwen(16 * GIB).weights_bytes
    at = _qwen(2 * w)
    assert at.verdict == "wont-start" and at.verdict_reason.startswith("no memory is left")
    assert _qwen(2 * w - 2).verdict == "weights-dont-fit"


def test_parts_that_fill_the_gpu_exactly_beside_the_cuda_context_start():
    # a given 1 GiB of KV: the parts (weights, activation peak, non-torch, graphs, KV) take a fixed
    # amount; on a GPU that much larger than the 0.51 GiB CUDA context vLLM holds before its
    # start-up snapshot they fit to the byte and it starts; one byte smaller and it is short
    probe = _qwen(16 * GIB, kv_cache_memory_bytes=GIB).memory
    size = probe.total_bytes - probe.free_bytes + round(0.51 * GIB)
    fits, short = _qwen(size, kv_cache_memory_bytes=GIB), _qwen(size - 1, kv_cache_memory_bytes=GIB)
    assert fits.memory.free_bytes == fits.memory.total_bytes - fits.memory.startup_free_bytes
    assert fits.verdict == "ok"
    assert short.verdict == "wont-start" and "(0.00 MiB short)" in short.verdict_reason


def test_a_fixed_pool_with_exactly_nothing_available():
    # llama.cpp's budget is the GPU less the weights and compute buffers (no fraction): on a GPU
    # exactly that large nothing is left, and the headroom fraction is −1 (no division by 0)
    probe = _plan("qwen3-0.6b", engine="llamacpp", gpu_memory_bytes=8 * GIB, max_model_len=4096)
    r = _plan("qwen3-0.6b", engine="llamacpp", gpu_memory_bytes=8 * GIB - probe.available_kv_bytes,
              max_model_len=4096)  # fmt: skip
    assert (r.available_kv_bytes, r.headroom_fraction) == (0, -1.0)
    assert r.headroom_bytes == -r.kv_cache_bytes and r.verdict == "wont-start"


def test_sglang_weights_that_fill_its_budget_leave_nothing_for_kv():
    # SGLang's budget is (total − non-torch) · mem_fraction_static; activations and graphs live in
    # the reserve beyond it. Weights given (--weights-memory) exactly that large leave 0 for the
    # pool: its pool configurator raises "Not enough memory" (pool_configurator.py, 0.5.23:
    # max_total_num_tokens <= 0). One byte more and they are more than it may use
    probe = _plan("qwen3-0.6b", engine="sglang", gpu_memory_bytes=16 * GIB,
                  gpu_memory_utilization=0.8, max_model_len=4096)  # fmt: skip
    weights = int((16 * GIB - probe.memory.non_torch_bytes) * 0.8)
    r = _plan("qwen3-0.6b", engine="sglang", gpu_memory_bytes=16 * GIB, gpu_memory_utilization=0.8,
              max_model_len=4096, weights_memory_bytes=weights)  # fmt: skip
    assert (r.available_kv_bytes, r.verdict) == (0, "wont-start")
    gib = f"{weights / GIB:.2f}"
    assert r.verdict_reason == (
        f"no memory is left for the KV cache (0.00 GiB: the engine budget {gib} GiB less {gib} GiB "
        "of weights; activations and CUDA graphs come out of the memory it reserves)"
    )
