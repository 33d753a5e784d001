"""`plan()`: engine-exact figures through the whole planner, verdicts and computed suggestions."""

from __future__ import annotations

import pytest
from helpers import bundled_shape

from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

TEN_GIB = 10 * GIB  # 10,737,418,240 B, the worked examples' KV memory


def gemma3_12b():
    # the published Gemma-3-12B text config's KV-relevant values (engine-accounting §6.3)
    return parse_config(
        {"model_type": "gemma3_text", "num_hidden_layers": 48, "num_attention_heads": 16,
         "num_key_value_heads": 8, "head_dim": 256, "hidden_size": 3840, "intermediate_size": 15360,
         "vocab_size": 262208, "sliding_window": 1024, "sliding_window_pattern": 6,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
        name="google/gemma-3-12b-it",
    )  # fmt: skip


def kv_plan(model, **kw):
    kw.setdefault("kv_cache_memory_bytes", TEN_GIB)
    return plan(model, PlanInputs(**kw), with_suggestions=False)


# -- engine-accounting.md §6, through the planner -----------------------------------------------
def test_llama31_8b_worked_example():
    model = bundled_shape("llama-3.1-8b")
    # page 2·16·8·128·2 = 65,536 B; 10 GiB // 65,536 // 32 layers = 5,120 blocks = 81,920 tokens
    r = kv_plan(model, max_model_len=8192)
    assert (r.num_blocks, r.kv_cache_tokens, r.block_size) == (5_120, 81_920, 16)
    assert r.max_concurrency == pytest.approx(10.0)  # 5,120 / 512 blocks per request
    assert r.kv_cache_bytes == 5_120 * 65_536 * 32 == TEN_GIB
    assert r.verdict == "ok"
    r = kv_plan(model, max_model_len=32768)
    assert r.max_concurrency == pytest.approx(2.5)  # 5,120 / 2,048
    # 131,072 tokens need 8,192 blocks · 2 MiB = 16 GiB > 10 GiB: the older rule estimates 81,920
    r = kv_plan(model, max_model_len=131072, engine_version="0.21")
    assert r.verdict == "wont-start" and r.estimated_max_model_len == 81_920
    assert any("16.0 GiB KV cache is needed" in line for line in r.log_lines)
    # vLLM 0.33 holds one block back for its null block: (5,120 − 1) · 16 = 81,904
    assert kv_plan(model, max_model_len=131072).estimated_max_model_len == 81_904


def test_llama31_8b_fp8_and_tp():
    model = bundled_shape("llama-3.1-8b")
    # fp8 page 32,768 → 10,240 blocks → 163,840 tokens; 131,072 fits at 1.25x
    r = kv_plan(model, max_model_len=131072, kv_cache_dtype="fp8")
    assert (r.num_blocks, r.kv_cache_tokens) == (10_240, 163_840)
    assert r.max_concurrency == pytest.approx(1.25)
    # TP 2: 4 heads per rank, page 32,768 per rank → 10,240 blocks with 10 GiB per rank
    r = kv_plan(model, max_model_len=8192, tensor_parallel_size=2)
    assert r.num_blocks == 10_240 and r.kv_bytes_per_token == 65_536


def test_deepseek_v3_mla():
    model = bundled_shape("deepseek-v3")
    # block 64: page 64·576·2 = 73,728 B; 10 GiB // 73,728 // 61 = 145,635 // 61 = 2,387 blocks
    r = kv_plan(model, max_model_len=32768, block_size=64)
    assert (r.num_blocks, r.kv_cache_tokens) == (2_387, 152_768)
    assert r.max_concurrency == pytest.approx(2_387 / 512)  # 4.66x
    # TP 8: the latent is replicated, so the same per-rank figures
    r8 = kv_plan(model, max_model_len=32768, block_size=64, tensor_parallel_size=8)
    assert r8.num_blocks == 2_387 and r8.kv_bytes_per_token == 70_272


def test_gemma3_12b_hybrid_groups_under_both_rules():
    model = gemma3_12b()
    gpu = dict(gpu="H100-80GB")  # ≥ 70 GiB, not A100: API-server max_num_batched_tokens 8,192
    # 0.33: each sliding group reserves cdiv(min(1,023 + 2·8,192, 32,768), 16) + 1 = 1,089 blocks;
    # 2,048 + 5·1,089 = 7,493 blocks per request; 10,240 / 7,493 = 1.37x; int(1.3666 · 32,768) = 44,781
    r = kv_plan(model, max_model_len=32768, **gpu)
    assert r.num_blocks == 10_240 and len(r.groups) == 6
    assert r.kv_cache_tokens == 44_781 and round(r.max_concurrency, 2) == 1.37
    # older one-batch rule: 577 blocks per sliding group, 4,933 per request → 2.08x, 68,020 tokens
    r = kv_plan(model, max_model_len=32768, engine_version="0.21", **gpu)
    assert r.kv_cache_tokens == 68_020 and round(r.max_concurrency, 2) == 2.08
    # at 131,072 vLLM 0.33 needs 13.32 GiB and estimates 76,704
    r = kv_plan(model, max_model_len=131072, **gpu)
    assert r.verdict == "wont-start" and r.estimated_max_model_len == 76_704
    assert any("(13.32 GiB KV cache is needed" in line for line in r.log_lines)


# -- engine_logs.yaml, through the planner ------------------------------------------------------
def test_qwen3_06b_a100_record():
    # vllm-24577: "Available KV cache memory: 69.66 GiB" → 652,144 tokens, 159.21x at 4,096.
    # 112 KiB/token; the printed GiB is rounded to 0.01, so the exact bytes lie in ±0.005 GiB.
    model = bundled_shape("qwen3-0.6b")
    lo = kv_plan(
        model, max_model_len=4096, kv_cache_memory_bytes=int(69.655 * GIB), gpu="A100-80GB"
    )
    hi = kv_plan(
        model, max_model_len=4096, kv_cache_memory_bytes=int(69.665 * GIB), gpu="A100-80GB"
    )
    assert lo.kv_cache_tokens <= 652_144 <= hi.kv_cache_tokens


def test_llama31_8b_l40s_record():
    # vllm-17122: 158,656 tokens = 9,916 blocks of 16; 4.84x at 32,768 (9,916 / 2,048 = 4.8418)
    model = bundled_shape("llama-3.1-8b")
    r = kv_plan(
        model, max_model_len=32768, kv_cache_memory_bytes=9_916 * 32 * 65_536, engine_version="0.8"
    )
    assert r.kv_cache_tokens == 158_656 and round(r.max_concurrency, 2) == 4.84


# -- the seed scenario --------------------------------------------------------------------------
def test_seed_40gb_llama2_13b():
    model = bundled_shape("llama-2-13b-hf")
    # weights: 13,015,864,320 parameters × 2 B (fp16) ≈ 26.0 GB
    r = plan(
        model, PlanInputs(gpu_memory_bytes=40 * 10**9, max_model_len=4096), with_suggestions=False
    )
    assert 25.9e9 < r.weights_bytes < 26.2e9
    # the naive figure: (40 GB − 26 GB) / (819,200 B · 4,096) = 14e9 / 3,355,443,200 ≈ 4.17 requests
    naive = kv_plan(model, max_model_len=4096, kv_cache_memory_bytes=14 * 10**9)
    assert round(naive.max_concurrency, 2) == 4.17  # 1,068 blocks / 256 per request
    # with vLLM's 0.92 utilization and its activation/runtime reserve fewer fit: about 3, not 4
    assert 2 < r.max_concurrency < 4


def test_seed_static_batch_32_at_8k_wont_fit():
    model = bundled_shape("llama-2-13b-hf")
    # pre-allocated: 819,200 B · 8,192 · 32 = 214,748,364,800 B = 200 GiB ≫ a 40 GB card
    r = plan(model, PlanInputs(engine="hf", gpu_memory_bytes=40 * 10**9, max_model_len=8192, batch=32,
                               engine_options=(("cache_implementation", "static"),)))  # fmt: skip
    assert r.kv_cache_bytes == 214_748_364_800
    assert r.verdict == "wont-start" and not r.passed


# -- verdicts and suggestions -------------------------------------------------------------------
def test_verdicts():
    model = bundled_shape("llama-3.1-8b")
    assert kv_plan(model, max_model_len=8192).verdict == "ok"
    # 10 requests at 8,192 use 10.0 of 10.0x: headroom 0 % → tight
    assert kv_plan(model, max_model_len=8192, batch=10).verdict == "tight"
    assert kv_plan(model, max_model_len=8192, batch=11).verdict == "below-target"
    assert kv_plan(model, max_model_len=131072).verdict == "wont-start"
    r = plan(bundled_shape("llama-3.1-70b"), PlanInputs(gpu="L4"), with_suggestions=False)
    assert r.verdict == "weights-dont-fit"


def test_suggestions_are_planned():
    model = bundled_shape("llama-3.1-8b")
    r = plan(
        model,
        PlanInputs(kv_cache_memory_bytes=TEN_GIB, max_model_len=131072, engine_version="0.21"),
    )
    by_change = {tuple(s.change.items()): s for s in r.suggestions}
    fp8 = by_change[(("kv_cache_dtype", "fp8"),)]
    assert fp8.verdict == "ok" and fp8.max_concurrency == pytest.approx(1.25)
    shorter = by_change[(("max_model_len", 81_920),)]
    assert shorter.max_concurrency == pytest.approx(1.0)
    tp2 = by_change[(("tensor_parallel_size", 2),)]
    assert tp2.max_concurrency == pytest.approx(1.25)  # 10,240 blocks / 8,192


def test_workload_with_shared_prefix():
    model = bundled_shape("llama-3.1-8b")
    # 5,120 blocks. Requests of 1,024 prompt + 1,024 output tokens = 2,048 tokens = 128 blocks;
    # a shared 512-token prefix is 32 blocks stored once: (5,120 − 32) / (128 − 32) = 53.0
    r = kv_plan(model, max_model_len=8192, prompt_len=1024, output_len=1024, shared_prefix=512)
    assert r.workload_tokens == 2048
    assert r.workload_concurrency == pytest.approx((5_120 - 32) / 96)


def test_no_gpu_is_an_input_error():
    with pytest.raises(InputError) as info:
        PlanInputs()
    assert info.value.code == "missing-gpu"


def test_data_parallel_replicas():
    model = bundled_shape("llama-3.1-8b")
    r = kv_plan(model, max_model_len=8192, num_gpus=4)
    assert r.data_parallel_replicas == 4 and r.total_max_concurrency == pytest.approx(40.0)


def test_kv_cache_memory_zero_is_vllms_unset():
    """vLLM 0.33 ``Worker.determine_available_memory``: ``if kv_cache_memory_bytes := ...`` —
    0 is falsy, so the worker profiles as if the flag were absent. kvcalc used to plan a 0-byte
    pool and blame "69.67 GiB of activation peak" (the whole budget) for it."""
    base = dict(gpu="H100", max_model_len=4096)
    assert PlanInputs(**base, kv_cache_memory_bytes=0).kv_cache_memory_bytes is None
    zero = plan(bundled_shape("qwen3-1.7b"), PlanInputs(**base, kv_cache_memory_bytes=0))
    unset = plan(bundled_shape("qwen3-1.7b"), PlanInputs(**base))
    assert zero.available_kv_bytes == unset.available_kv_bytes > 60 * GIB
    assert zero.verdict == "ok"
    with pytest.raises(InputError) as err:  # SGLang, llama.cpp...: 0 bytes is no cache at all
        PlanInputs(**base, engine="sglang", kv_cache_memory_bytes=0)
    assert err.value.code == "invalid-input"


@pytest.mark.parametrize("engine", ["llamacpp", "hf", "trtllm"])
def test_block_size_is_refused_where_the_engine_has_none(engine):
    """llama.cpp (one-token cells), transformers (per-layer tensors) and TensorRT-LLM (its block is
    ``-E tokens_per_block``) have no ``--block-size``: it was dropped without a word."""
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H100", engine=engine, block_size=7)
    assert err.value.code == "invalid-input" and "--block-size" in err.value.message
