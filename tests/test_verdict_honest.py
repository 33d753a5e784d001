"""Verdicts that say what the engine does: never ``ok`` where it runs out of memory, every figure
said with what it is (issue 25, items 1, 5, 8, 14)."""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.errors import InputError
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB, MIB


def _plan(name: str, **kw):
    return plan(bundled_shape(name), PlanInputs(**kw))


# -- 1: terms the engine allocates after its KV cache --------------------------------------------
def test_vllm_graphs_captured_after_the_pool_do_not_fit():
    # vLLM 0.28 (runner V2, before 0.29) does not subtract its CUDA graphs from the budget: the pool
    # takes ceil(8 GiB · 0.93) less weights, activation and non-torch, and the graphs are captured
    # after it (gpu_worker.py: Worker.compile_or_warm_up_model). 8 GiB · 0.07 = 573.44 MiB is all
    # that is left outside the budget, 522.24 MiB of it the CUDA context vLLM holds before its
    # start-up check, and the graphs need ~613 MiB: it dies at start-up. (At 0.99, the issue's
    # example, the start-up check itself refuses: ceil(0.99 × 8 GiB) = 7.92 GiB > 8 − 0.51 GiB.)
    r = _plan("qwen3-1.7b", gpu_memory_bytes=8 * GIB, max_model_len=4096, engine_version="0.28",
              gpu_memory_utilization=0.93)  # fmt: skip
    m = r.memory
    assert m.free_bytes == m.total_bytes - (
        m.weights_bytes
        + m.activation_bytes
        + m.non_torch_bytes
        + m.cudagraph_bytes
        + m.kv_cache_bytes
    )
    assert m.cudagraph_bytes > 0.07 * 8 * GIB and m.free_bytes < 0
    assert r.verdict == "wont-start" and not r.passed
    assert "CUDA graphs" in r.verdict_reason and "after its KV cache" in r.verdict_reason
    held = m.total_bytes - m.startup_free_bytes
    assert held == round(0.51 * GIB)
    assert f"{(held - m.free_bytes) / MIB:,.2f} MiB short" in r.verdict_reason
    assert r.runnable_concurrency == 0.0
    # the suggestion lowers the fraction until the graphs fit, and was itself planned
    (s,) = [s for s in r.suggestions if "gpu_memory_utilization" in s.change]
    assert s.change["gpu_memory_utilization"] < 0.93 and s.verdict in ("ok", "tight")
    fixed = _plan("qwen3-1.7b", gpu_memory_bytes=8 * GIB, max_model_len=4096, engine_version="0.28",
                  gpu_memory_utilization=s.change["gpu_memory_utilization"])  # fmt: skip
    assert fixed.memory.free_bytes >= held and fixed.verdict == s.verdict


def test_vllm_graphs_inside_the_budget_leave_the_rest_free():
    # vLLM 0.33 subtracts its graph estimate from the budget: nothing is allocated outside it, so
    # what is left free is the 7 % of the GPU beyond ceil(8 GiB · 0.93), more than the 0.51 GiB its
    # CUDA context holds
    r = _plan("qwen3-1.7b", gpu_memory_bytes=8 * GIB, max_model_len=4096,
              gpu_memory_utilization=0.93)  # fmt: skip
    assert r.memory.free_bytes >= round(0.51 * GIB) and r.verdict == "ok"


@pytest.mark.parametrize("engine", ["sglang", "lmdeploy"])
def test_engines_that_keep_graphs_outside_their_budget(engine):
    # SGLang keeps activations and CUDA graphs in the reserved 1 − mem_fraction_static
    # (decode_cuda_graph_runner.py: "Capture cuda graph failed"); LMDeploy sizes its cache from
    # the memory free after the weights and allocates them after it. At 0.99 on an L4 (22.05 GiB)
    # the 1 % left cannot hold ~0.7 GiB of graphs.
    r = _plan(
        "qwen3-1.7b", engine=engine, gpu="L4", gpu_memory_utilization=0.99, max_model_len=4096
    )
    assert r.memory.free_bytes < 0
    assert r.verdict == "wont-start"
    assert "CUDA graphs" in r.verdict_reason and "activation peak" in r.verdict_reason
    assert any(s.verdict in ("ok", "tight") and "gpu_memory_utilization" in s.change
               for s in r.suggestions)  # fmt: skip


# -- 5: llama.cpp allocates every slot up front --------------------------------------------------
def test_llamacpp_slots_say_the_whole_pool():
    # Qwen2.5-7B: 28 layers · (K + V) · 4 KV heads · 128 · 2 B = 57,344 B per cell; 16 slots of
    # 32,768 cells = 524,288 cells · 57,344 B = 28.00 GiB (16 × 1.75 GiB) on an L4 that leaves
    # ~7.5 GiB: llama.cpp cannot allocate the cache, so no request runs at all
    r = _plan("qwen2.5-7b", engine="llamacpp", gpu="L4", batch=16, max_model_len=32768)
    assert r.kv_cache_bytes == 524_288 * 57_344 == 28 * GIB
    assert r.verdict == "wont-start"
    assert "16 sequences × 32,768 tokens need 28.00 GiB (16 × 1.75 GiB)" in r.verdict_reason
    assert f"but {r.available_kv_bytes / GIB:.2f} GiB are available" in r.verdict_reason
    # no concurrency a deployment that does not start cannot run: the table and JSON read these
    assert r.max_concurrency == 0.0 and r.total_max_concurrency == 0.0
    assert r.runnable_concurrency == 0.0


# -- 8, 14: the band's two ends, each named --------------------------------------------------------
def test_two_longest_figures_say_which_end():
    # Llama-3.1-8B on an L4: 3.90 GiB for KV at the central estimate, 3.15 at the pessimistic end.
    # 131,072 B per token: vLLM 0.33's estimate is (blocks − 1 null block) · 16 tokens
    r = _plan("llama-3.1-8b", gpu="L4", max_model_len=40000)
    assert r.verdict == "wont-start"
    central = (r.available_kv_bytes // (16 * 131_072) - 1) * 16
    assert r.estimated_max_model_len == central == 31_952
    low = (r.available_kv_bytes_low // (16 * 131_072) - 1) * 16
    assert (
        f"the longest that fits is {central:,} tokens at the central estimate" in r.verdict_reason
    )
    assert f"{low:,} at its pessimistic end" in r.verdict_reason
    (s,) = [s for s in r.suggestions if "max_model_len" in s.change]
    assert s.change["max_model_len"] == low
    assert "at the pessimistic end of the estimate" in s.text


def test_starts_at_the_central_estimate_may_not_start():
    # 30,000 tokens: 1.07x at the central estimate (vLLM starts and prints it), one request does
    # not fit the pessimistic end's 3.15 GiB: the verdict stays wont-start (exit 1), in words
    r = _plan("llama-3.1-8b", gpu="L4", max_model_len=30000)
    assert r.max_concurrency == pytest.approx(31_968 / 30_000, abs=1e-4)
    assert any("Maximum concurrency for 30,000 tokens per request: 1.07x" in x for x in r.log_lines)
    assert r.verdict == "wont-start"
    assert r.verdict_reason.startswith("may not start: at the central estimate")
    assert "vLLM starts and would be tight" in r.verdict_reason
    assert "at the pessimistic end of the estimate" in r.verdict_reason


# -- 6: --max-num-seqs caps what runs; --batch is the target ---------------------------------------
@pytest.mark.parametrize("cap", [256, 1024])
def test_max_num_seqs_is_a_cap(cap):
    # Llama-3.1-8B at its 131,072 tokens on an H100: ~3.5 requests fit. max_num_seqs 256 (or vLLM's
    # own default, 1,024) caps the scheduler and asks for nothing: ok, headroom beyond 1 request
    r = _plan("llama-3.1-8b", gpu="H100", max_num_seqs=cap)
    assert r.target_concurrency is None and r.max_num_seqs == cap
    assert r.verdict == "ok" and r.headroom_bytes > 0
    assert r.runnable_concurrency == pytest.approx(r.max_concurrency)
    # --batch is the target: 256 wanted, ~3.5 fit
    r = _plan("llama-3.1-8b", gpu="H100", max_num_seqs=cap, batch=256)
    assert r.target_concurrency == 256 and r.verdict == "below-target"


def test_pasted_serve_command_max_num_seqs_is_a_cap(cli):
    result = cli("plan", "--from-command", "vllm serve meta-llama/Llama-3.1-8B --max-num-seqs 1024 "
                 "--max-model-len 8192", "--gpu", "H100", "--json", "--no-throughput")  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    data = result.json
    assert data["target_concurrency"] is None and data["max_num_seqs"] == 1024
    assert data["verdict"] == "ok"


@pytest.mark.parametrize(("engine", "key"), [("llamacpp", "n_seq_max"), ("hf", "batch_size")])
def test_max_num_seqs_still_sizes_engines_that_allocate_per_sequence(engine, key):
    # llama.cpp's n_seq_max slots and transformers' batch are the cache itself: --max-num-seqs 4
    # allocates 4 sequences of 4,096 tokens (Qwen2.5-1.5B: 28 layers · 2 · 2 heads · 128 · 2 B =
    # 28,672 B per token → 4 · 4,096 · 28,672 = 469,762,048 B), not 1
    from kvcalc.planning.request import engine_extra

    inputs = PlanInputs(engine=engine, gpu="L4", max_model_len=4096, max_num_seqs=4)
    assert engine_extra(inputs)[key] == 4
    r = plan(bundled_shape("qwen2.5-1.5b"), inputs)
    assert r.kv_cache_bytes == 4 * 4096 * 28_672 and r.target_concurrency is None


# -- 13: a workload longer than max_model_len ---------------------------------------------------
def test_vllm_cuts_a_long_workload_at_max_model_len():
    # Qwen3-8B's max_model_len is 40,960: 5,000 + 200,000 tokens are served cut at 40,960 (the
    # scheduler's check_stop; the 0.33 server clamps max_tokens to 40,960 − 5,000 = 35,960)
    r = _plan("qwen3-8b", gpu="H100", prompt_len=5000, output_len=200_000)
    assert r.workload_tokens == 40_960
    assert r.workload_concurrency == pytest.approx(r.max_concurrency)
    assert "at most 35,960 output tokens are generated" in r.notes[0]


@pytest.mark.parametrize(
    ("engine", "kw", "text"),
    [
        # vLLM's InputProcessor rejects a prompt of max_model_len tokens or more
        ("vllm", {"prompt_len": 40_960}, "not shorter than max_model_len 40,960"),
        ("sglang", {"prompt_len": 50_000}, "not shorter than max_model_len 40,960"),
        # SGLang's TokenizerManager rejects prompt + max_new_tokens beyond its context length
        ("sglang", {"prompt_len": 5000, "output_len": 200_000}, "give --output-len at most 35,960"),
        ("llamacpp", {"prompt_len": 5000, "output_len": 200_000}, "at most 35,960"),
    ],
)
def test_workloads_the_engine_rejects_are_refused(engine, kw, text):
    with pytest.raises(InputError) as err:
        _plan("qwen3-8b", engine=engine, gpu="H100", **kw)
    assert err.value.code == "invalid-input"
    assert text in err.value.message + (err.value.hint or "")


@pytest.mark.parametrize(
    "kw", [{"shared_prefix": 1000}, {"output_len": 200}, {"prompt_len": 500, "shared_prefix": 1000}]
)
def test_a_workload_needs_its_prompt(kw):
    # --shared-prefix or --output-len alone would be planned as no workload at all
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H100", **kw)
    assert err.value.code == "invalid-input"


# -- 9: weights larger than the GPU --------------------------------------------------------------
def test_weights_larger_than_the_gpu_print_no_kv_lines_and_get_a_tp_that_starts():
    # Llama-3.1-70B in bf16: ~131 GiB of weights on one 79.2 GiB H100. vLLM runs out of memory in
    # load_model, before it measures anything for the KV cache: no "Available KV cache memory".
    # TP 2 leaves each rank ~65.7 GiB of weights, too little room for one 131,072-token request;
    # TP 4 starts, and so do fp8 weights at TP 2 (each suggestion planned)
    r = _plan("llama-3.1-70b", gpu="H100")
    assert r.verdict == "weights-dont-fit" and r.weights_bytes > r.memory.total_bytes
    assert r.log_lines == ()
    assert "fails loading the weights" in r.notes[0]
    tp2 = _plan("llama-3.1-70b", gpu="H100", tensor_parallel_size=2)
    assert tp2.verdict == "wont-start"
    changes = [s.change for s in r.suggestions]
    assert {"tensor_parallel_size": 4} in changes
    assert {"quantization": "fp8", "tensor_parallel_size": 2} in changes
    assert all(s.verdict in ("ok", "tight", "below-target") for s in r.suggestions)


# -- 7: suggestions say at what they measure and keep the workload's requests ----------------------
def test_no_max_model_len_suggestion_below_the_workloads_requests():
    # Llama-3.1-8B on an L4 fits ~25,808 tokens at the pessimistic end: requests of 20,000 + 8,000
    # tokens would be cut there, so no --max-model-len is suggested; fp8 is, at the workload
    r = _plan("llama-3.1-8b", gpu="L4", max_model_len=40000, prompt_len=20_000, output_len=8000)
    assert r.verdict == "wont-start"
    assert not [s for s in r.suggestions if "max_model_len" in s.change]
    (fp8,) = [s for s in r.suggestions if s.change == {"kv_cache_dtype": "fp8"}]
    assert "requests of the workload's 28,000 tokens" in fp8.text


def test_curve_does_not_draw_a_deployment_short_of_the_gpu():
    # the same vLLM 0.28 deployment at 0.93 of 8 GiB: its block pool fills the budget at every
    # length, so the graphs never fit and no length starts
    from kvcalc.planning.curves import curve_basis, curve_point

    inputs = PlanInputs(
        gpu_memory_bytes=8 * GIB, engine_version="0.28", gpu_memory_utilization=0.93
    )
    basis = curve_basis(bundled_shape("qwen3-1.7b"), inputs)
    assert basis.verdict == "wont-start" and "CUDA graphs" in basis.notes[0]
    assert not curve_point(basis, 4096).fits and curve_point(basis, 4096).max_concurrency == 0.0


@pytest.mark.parametrize(
    ("kw", "outside"),
    [
        ({}, ()),  # vLLM 0.33 subtracts its graph estimate: everything is in its budget
        ({"engine_version": "0.28"}, ("cudagraph",)),  # runner V2 before 0.29 estimates none
        ({"engine": "sglang"}, ("activation", "cudagraph")),  # the reserved 1 − mem_fraction_static
        ({"engine": "lmdeploy"}, ("activation", "cudagraph")),  # its cache is free · fraction
        ({"engine": "trtllm"}, ()),  # free = total − weights − activations − context − graphs
        ({"engine": "llamacpp"}, ()),  # total − weights − compute buffers
    ],
)
def test_terms_outside_the_budget_are_marked_for_every_engine(kw, outside):
    r = _plan("qwen3-1.7b", gpu="L4", max_model_len=4096, **kw)
    assert r.memory.outside_budget == outside


def test_a_given_kv_size_still_leaves_room_for_the_profile_and_graphs():
    # vLLM with kv_cache_memory_bytes skips its budget, not its profile run or graph capture
    # (gpu_worker.py: Worker.determine_available_memory): 62 GiB of KV beside ~15 GiB of weights
    # on a 79.2 GiB H100 leave ~2.2 GiB for activations, CUDA context and graphs, less than they need
    r = _plan("llama-3.1-8b", gpu="H100", kv_cache_memory_bytes=62 * GIB, max_model_len=8192)
    m = r.memory
    assert m.kv_cache_bytes == 62 * GIB and m.activation_bytes > 0 and m.cudagraph_bytes > 0
    assert m.outside_budget == ("activation", "non_torch", "cudagraph")
    assert m.free_bytes < 0 and r.verdict == "wont-start"
    assert "lower --kv-cache-memory" in r.verdict_reason
    (s,) = [s for s in r.suggestions if "kv_cache_memory_bytes" in s.change]
    assert s.change["kv_cache_memory_bytes"] < 62 * GIB + m.free_bytes and s.verdict == "ok"
    # without a GPU size nothing is known beside the cache: the engine's arithmetic alone
    r = plan(bundled_shape("llama-3.1-8b"), PlanInputs(kv_cache_memory_bytes=62 * GIB))
    assert r.memory.outside_budget == () and r.verdict == "ok"
