"""vLLM engine: engine-accounting.md §6 worked examples, to the byte and to the block.

All cases use 10 GiB = 10,737,418,240 B of KV memory per GPU unless stated. "0.33" is the newest
profile (vLLM 0.33.0 source read); "0.21" is the one-batch rule of §6; "0.8" the old two-line log.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import bundled_config, bundled_shape
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.engines.vllm.groups import LayerSpec, group_layers, pp_stages, unify_page_sizes
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB

TEN_GIB = 10 * GIB
H100 = {
    "gpu_memory_bytes": 80 * GIB,
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_compute_capability": (9, 0),
}
VLLM = get_engine("vllm")
DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def plan(model, max_model_len, **kw):
    kw.setdefault("available_kv_bytes", TEN_GIB)
    return VLLM.plan_kv_cache(EngineRequest(model=model, max_model_len=max_model_len, **kw))


@pytest.fixture(scope="module")
def llama():
    return bundled_shape("llama-3.1-8b")


@pytest.fixture(scope="module")
def deepseek():
    return bundled_shape("deepseek-v3")


def gemma3_12b_config() -> dict:
    """Gemma-3-12B's text config as published (§6.3): 48 layers, 5 sliding : 1 full."""
    return {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "gemma3_text",
            "num_hidden_layers": 48,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "hidden_size": 3840,
            "sliding_window": 1024,
            "sliding_window_pattern": 6,
            "max_position_embeddings": 131072,
        },
    }


@pytest.fixture(scope="module")
def gemma():
    return parse_config(gemma3_12b_config(), name="google/gemma-3-12b-it")


# -- §6.1 Llama-3.1-8B ----------------------------------------------------------------------
@pytest.mark.parametrize("version", ["0.33", "0.21", "0.8"])
def test_llama_blocks_and_tokens(llama, version):
    p = plan(llama, 8192, engine_version=version)
    # page = 2·16·8·128·2 = 65,536 B; 32 layers → 2,097,152 B per block; 10 GiB // 2 MiB = 5,120
    assert p.groups[0].page_bytes == 65_536
    assert p.num_blocks == 5_120
    assert p.kv_cache_tokens == 81_920  # 5,120 · 16
    assert p.kv_bytes_per_token == 131_072  # 32·2·8·128·2
    assert p.kv_cache_bytes == 5_120 * 2_097_152


@pytest.mark.parametrize(
    ("max_model_len", "blocks_per_request", "concurrency"),
    [(8192, 512, "10.00x"), (32768, 2048, "2.50x")],
)
def test_llama_concurrency_line(llama, max_model_len, blocks_per_request, concurrency):
    p = plan(llama, max_model_len)
    assert p.groups[0].blocks_per_request == blocks_per_request  # cdiv(L, 16)
    assert p.max_concurrency == 5_120 / blocks_per_request
    assert p.fits and p.estimated_max_model_len is None
    assert p.log_lines == (
        "Available KV cache memory: 10.0 GiB",
        (
            f"GPU KV cache size: 81,920 tokens, Maximum concurrency for {max_model_len:,} tokens per "
            f"request: {concurrency}"
        ),
    )


def test_llama_old_two_line_format(llama):
    p = plan(llama, 8192, engine_version="0.8")
    assert p.log_lines == (
        "GPU KV cache size: 81,920 tokens",
        "Maximum concurrency for 8,192 tokens per request: 10.00x",
    )


def test_llama_model_default_length_does_not_fit_one_batch_rule(llama):
    p = plan(llama, 131072, engine_version="0.21")
    # needs 8,192 blocks · 2 MiB = 16 GiB > 10 GiB; largest L with cdiv(L,16) ≤ 5,120 is 81,920
    assert not p.fits
    assert p.bytes_per_request == 16 * GIB
    assert p.estimated_max_model_len == 81_920
    assert p.log_lines[-1] == (
        "To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (10.0 GiB). Based on the "
        "available memory, the estimated maximum model length is 81920. Try increasing "
        f"`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. {DOCS}"
    )


def test_llama_model_default_length_033_holds_back_the_null_block(llama):
    p = plan(llama, 131072)
    # 0.33 checks against 10 GiB − one block (2 MiB): cdiv(L,16) ≤ 5,119 → L = 81,904
    assert p.fit_budget_bytes == TEN_GIB - 2_097_152
    assert p.estimated_max_model_len == 81_904
    assert "(16.0 GiB KV cache is needed" in p.log_lines[-1]
    assert "estimated maximum model length is 81904." in p.log_lines[-1]
    assert "(which also controls CPU memory on the CPU backend)" in p.log_lines[-1]


def test_llama_fp8_halves_the_page(llama):
    p = plan(llama, 131072, kv_cache_dtype="fp8")
    # page 32,768 → 10 GiB // (32·32,768) = 10,240 blocks = 163,840 tokens; 10,240/8,192 = 1.25x
    assert p.kv_cache_dtype == "fp8"
    assert (p.groups[0].page_bytes, p.num_blocks, p.kv_cache_tokens) == (32_768, 10_240, 163_840)
    assert p.fits and f"{p.max_concurrency:.2f}" == "1.25"


@pytest.mark.parametrize(
    ("dtype", "page"),
    [("fp8_per_token_head", 33_792),  # 32,768 + 2·16·8·4 scales
     ("int8_per_token_head", 33_792),
     ("nvfp4", 18_432)],  # 16·8·(72 + 72): 128/2 + 128/16 = 72 B per head per side
)  # fmt: skip
def test_llama_quantized_pages(llama, dtype, page):
    assert plan(llama, 8192, kv_cache_dtype=dtype).groups[0].page_bytes == page


def test_llama_tp2_splits_heads(llama):
    p = plan(llama, 8192, tensor_parallel_size=2)
    # 4 heads per rank: page 2·16·4·128·2 = 32,768 → 10,240 blocks = 163,840 tokens per engine
    assert (p.groups[0].page_bytes, p.num_blocks, p.kv_cache_tokens) == (32_768, 10_240, 163_840)
    assert p.kv_bytes_per_token == 65_536


def test_llama_tp16_replicates_one_head(llama):
    p = plan(llama, 8192, tensor_parallel_size=16, gpu_compute_capability=(9, 0))
    # 8 KV heads on 16 ranks: max(1, 8 // 16) = 1 head, page 2·16·1·128·2 = 8,192
    assert p.groups[0].page_bytes == 8_192
    assert any("replicated 2×" in n for n in p.notes)


def test_tp_that_splits_no_head_evenly_is_refused(llama):
    with pytest.raises(InputError) as err:
        plan(llama, 8192, tensor_parallel_size=3)
    assert err.value.code == "invalid-parallelism"


def test_no_available_memory(llama):
    p = plan(llama, 8192, available_kv_bytes=0)
    assert not p.fits and p.num_blocks == 0
    assert p.log_lines[-1] == (
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, "
        f"despite its name). {DOCS}"
    )


# -- §6.2 DeepSeek-V3 (MLA) ------------------------------------------------------------------
def test_deepseek_block_64(deepseek):
    p = plan(deepseek, 32768, block_size=64)
    # 64·576·2 = 73,728 B; 10 GiB // 73,728 = 145,635; // 61 layers = 2,387 blocks
    assert p.groups[0].page_bytes == 73_728
    assert (p.num_blocks, p.kv_cache_tokens) == (2_387, 152_768)
    assert p.kv_bytes_per_token == 70_272  # 61·576·2
    assert f"{p.max_concurrency:.2f}" == "4.66"  # 2,387 / 512


def test_deepseek_bf16_on_hopper_gets_flash_attn_mla_block_16(deepseek):
    p = plan(deepseek, 32768, gpu_compute_capability=(9, 0))
    # page 18,432, 10 GiB // (61·18,432) = 9,549 blocks → 152,784 tokens
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (16, 9_549, 152_784)


@pytest.mark.parametrize(
    ("cc", "block"), [((9, 0), 64), ((10, 0), 32), ((8, 9), 16), ((12, 0), 16)]
)
def test_deepseek_fp8_block_size_per_backend(deepseek, cc, block):
    # SM 9: FLASHMLA [64]; SM 10: FLASHINFER_MLA [32, 64] → 32; else TRITON_MLA MultipleOf(16)
    assert (
        plan(deepseek, 32768, kv_cache_dtype="fp8", gpu_compute_capability=cc).block_size == block
    )


def test_deepseek_fp8_before_sm89_is_refused_as_triton_mla_refuses_it(deepseek):
    # TRITON_MLA has no fp8 cache before SM 8.9 (recorded on an A100: reference_sm8_sm12.json)
    with pytest.raises(InputError) as err:
        plan(deepseek, 32768, kv_cache_dtype="fp8", gpu_compute_capability=(8, 0))
    assert err.value.code == "unsupported-dtype" and "requires SM89+" in err.value.message
    assert plan(deepseek, 32768, gpu_compute_capability=(8, 0)).block_size == 16  # bf16 runs


def test_deepseek_fp8_flashmla(deepseek):
    p = plan(deepseek, 163840, kv_cache_dtype="fp8", **H100)
    # 576 B per token per layer; 35,136 B per token; 10 GiB // (61·64·576) = 4,774 blocks
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (64, 4_774, 305_536)
    assert p.fits and f"{p.max_concurrency:.2f}" == "1.86"  # 4,774 / 2,560
    assert p.log_lines[0] == "Setting kv cache block size to 64 for FLASHMLA backend(s)."


def test_deepseek_fp8_ds_mla_record(deepseek):
    p = plan(deepseek, 32768, kv_cache_dtype="fp8_ds_mla")
    assert p.kv_bytes_per_token == 40_016  # 656·61
    assert p.block_size == 64


@pytest.mark.parametrize(
    ("version", "block", "estimate"),
    [("0.21", 64, 152_768), ("0.21", 16, 152_784),
     # 0.33 holds one block back: block 64 → 2,386 blocks; block 16 → 9,548 blocks
     ("0.33", 64, 152_704), ("0.33", 16, 152_768)],
)  # fmt: skip
def test_deepseek_config_length_does_not_fit(deepseek, version, block, estimate):
    p = plan(deepseek, 163840, block_size=block, engine_version=version)
    # 61 layers · 2,560 blocks of 73,728 B = 11,513,364,480 B = 10.72 GiB
    assert not p.fits
    assert p.estimated_max_model_len == estimate
    assert "(10.72 GiB KV cache is needed" in p.log_lines[-1]


def test_deepseek_tp8_replicates_the_latent(deepseek):
    tp1, tp8 = (
        plan(deepseek, 32768, block_size=64),
        plan(deepseek, 32768, block_size=64, tensor_parallel_size=8),
    )
    assert tp8.kv_bytes_per_token == tp1.kv_bytes_per_token == 70_272
    assert tp8.num_blocks == tp1.num_blocks == 2_387
    assert any("not split by TP" in n for n in tp8.notes)


# -- §6.3 Gemma-3-12B (interleaved sliding window) --------------------------------------------
def test_gemma_groups(gemma):
    p = plan(gemma, 32768, **H100)
    # 40 sliding + 8 full, page 2·16·8·256·2 = 131,072 for both; group_size 8 → 6 groups of 8
    assert [(g.kind, g.num_layers, g.page_bytes) for g in p.groups] == [
        ("sliding", 8, 131_072)
    ] * 5 + [("full", 8, 131_072)]
    assert p.groups[0].layer_indices == (0, 6, 12, 18, 24, 30, 36, 42)  # stride split
    assert p.num_blocks == 10_240  # 10 GiB // 131,072 // 8


def test_gemma_033_reserves_two_batches(gemma):
    p = plan(gemma, 32768, **H100)
    # in flight 2·8,192: sliding cdiv(min(1,023 + 16,384, 32,768), 16) + 1 = 1,089 blocks
    assert [g.blocks_per_request for g in p.groups] == [1_089] * 5 + [2_048]
    # 2,048 + 5·1,089 = 7,493; 10,240 / 7,493 = 1.3666 → int(1.3666·32,768) = 44,781
    assert p.kv_cache_tokens == 44_781
    assert p.log_lines[-1] == (
        "GPU KV cache size: 44,781 tokens, Maximum concurrency for 32,768 tokens per request: 1.37x"
    )
    assert p.max_num_batched_tokens == 8192 and p.max_num_seqs == 1024


def test_gemma_033_model_length(gemma):
    p = plan(gemma, 131072, **H100)
    # needs 8 pages · 131,072 B · (8,192 + 5·1,089) = 14,299,430,912 B = 13.32 GiB; the budget
    # 10 GiB − 1 MiB holds 8·(c + 5,445) ≤ 81,912 pages → c ≤ 4,794 → 76,704 tokens
    assert p.bytes_per_request == 14_299_430_912
    assert p.estimated_max_model_len == 76_704
    assert "(13.32 GiB KV cache is needed" in p.log_lines[-1]


def test_gemma_one_batch_rule(gemma):
    p = plan(gemma, 32768, engine_version="0.21", **H100)
    # sliding cdiv(min(1,023 + 8,192, 32,768), 16) + 1 = 577; 2,048 + 5·577 = 4,933 → 2.08x
    assert p.kv_cache_tokens == 68_020  # int(10,240 / 4,933 · 32,768)
    assert f"{p.max_concurrency:.2f}" == "2.08"
    long = plan(gemma, 131072, engine_version="0.21", **H100)
    assert long.estimated_max_model_len == 117_680  # 8·(c + 2,885) ≤ 81,920 → c ≤ 7,355
    assert "(10.82 GiB KV cache is needed" in long.log_lines[-1]


def test_gemma_small_gpu_batch(gemma):
    p = plan(gemma, 131072, engine_version="0.21", gpu_memory_bytes=24 * GIB)
    # API server default 2,048: sliding groups need cdiv(3,071, 16) + 1 = 193 blocks
    assert p.groups[0].blocks_per_request == 193
    assert p.fits and p.kv_cache_tokens == 146_573 and f"{p.max_concurrency:.2f}" == "1.12"


def test_gemma_old_token_count(gemma):
    p = plan(gemma, 32768, engine_version="0.8", **H100)
    assert p.log_lines[0] == "GPU KV cache size: 27,296 tokens"  # 10,240 // 6 · 16


def test_gemma_hybrid_manager_disabled(gemma):
    p = plan(gemma, 32768, engine_version="0.21", disable_hybrid_kv_cache_manager=True, **H100)
    # one group of 48 layers booked full: 81,920 pages // 48 = 1,706 blocks = 27,296 tokens
    assert len(p.groups) == 1 and p.groups[0].num_layers == 48
    assert (p.num_blocks, p.kv_cache_tokens) == (1_706, 27_296)
    assert p.log_lines[0].startswith("Hybrid KV cache manager is disabled for this hybrid model")


# -- defaults -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("memory_gib", "name", "cc", "version", "tokens", "seqs"),
    [(80, "NVIDIA H100 80GB HBM3", (9, 0), "0.33", 8192, 1024),
     (80, "NVIDIA A100-SXM4-80GB", (8, 0), "0.33", 2048, 256),
     (180, "NVIDIA B200", (10, 0), "0.33", 16384, 1024),
     (180, "NVIDIA B200", (10, 0), "0.21", 8192, 1024),
     (120, "NVIDIA GB10", (12, 1), "0.33", 2048, 256),
     (24, "NVIDIA L4", (8, 9), "0.33", 2048, 256)],
)  # fmt: skip
def test_batch_defaults(gemma, memory_gib, name, cc, version, tokens, seqs):
    p = plan(gemma, 32768, engine_version=version, gpu_memory_bytes=memory_gib * GIB, gpu_name=name,
             gpu_compute_capability=cc)  # fmt: skip
    assert (p.max_num_batched_tokens, p.max_num_seqs) == (tokens, seqs)


def test_llm_class_batch_default(gemma):
    p = plan(gemma, 32768, extra={"usage_context": "llm"}, **H100)
    assert p.max_num_batched_tokens == 16384


def test_float32_config_casts_to_bf16():
    fp32 = parse_config({**bundled_config("llama-3.1-8b"), "torch_dtype": "float32"}, name="fp32")
    assert fp32.config_dtype == "float32"
    # vllm/config/model.py _resolve_auto_dtype: the platform's first dtype (bf16 on SM >= 8.0)
    assert plan(fp32, 8192, gpu_compute_capability=(9, 0)).kv_cache_dtype == "bf16"
    assert plan(fp32, 8192, gpu_compute_capability=(7, 5)).kv_cache_dtype == "fp16"
    assert plan(fp32, 8192, engine_version="0.8").kv_cache_dtype == "fp16"  # old rule (unconfirmed)


def test_gpt_oss_two_groups():
    p = plan(bundled_shape("gpt-oss-20b"), 8192, **H100)
    # 12 sliding (128) + 12 full, page 2·16·8·64·2 = 32,768; 10 GiB // (12·32,768) = 27,306
    assert [(g.kind, g.num_layers) for g in p.groups] == [("sliding", 12), ("full", 12)]
    assert p.num_blocks == 27_306
    # sliding: cdiv(min(127 + 16,384, 8,192), 16) + 1 = 513; full 512 → 27,306 / 1,025
    assert p.kv_cache_tokens == int(27_306 / 1_025 * 8192)


def test_utilization_defaults():
    assert VLLM.default_gpu_memory_utilization(MemoryInputs()) == 0.92
    assert VLLM.default_gpu_memory_utilization(MemoryInputs(engine_version="0.21")) == 0.92
    assert VLLM.default_gpu_memory_utilization(MemoryInputs(engine_version="0.8")) == 0.90


def test_available_kv_bytes_rules():
    common = MemoryInputs(gpu_memory_bytes=80 * GIB, weights_bytes=15 * GIB, activation_bytes=2 * GIB,
                          non_torch_bytes=GIB, cudagraph_bytes=GIB)  # fmt: skip
    # ceil(80 GiB · 0.92) = 79,027,398,247 (80·0.92 GiB = 73.6 GiB, rounded up) − 19 GiB
    new = VLLM.available_kv_bytes(replace(common, engine_version="0.33"))
    assert new == 79_027_398_247 - 19 * GIB
    # 0.8: int(80 GiB · 0.90) − 15 − 2 − 1 GiB, no CUDA-graph term
    old = VLLM.available_kv_bytes(replace(common, engine_version="0.8"))
    assert old == int(80 * GIB * 0.90) - 18 * GIB


def test_version_mapping_and_errors(llama):
    p = plan(llama, 8192, engine_version="0.31.0")
    assert p.engine_version == "0.28" and "vLLM 0.31.0 modelled by the 0.28 profile" in p.notes
    # the memory accounting and the "Available KV cache memory" line change at 0.9.1 (the wheels'
    # gpu_worker.py): 0.9.0 (and "0.9") is early V1, 0.9.1 on the 0.10 profile
    for version, profile in (("0.9", "0.8"), ("0.9.0", "0.8"), ("0.9.1", "0.10"), ("0.9.2", "0.10")):  # fmt: skip
        assert plan(llama, 8192, engine_version=version).engine_version == profile, version
    for bad, code in [({"engine_version": "banana"}, "unknown-engine-version"),
                      ({"kv_cache_dtype": "q8_0"}, "unsupported-dtype"),
                      ({"extra": {"typo": 1}}, "unknown-engine-option")]:  # fmt: skip
        with pytest.raises(InputError) as err:
            plan(llama, 8192, **bad)
        assert err.value.code == code


def test_v0_engine_lines(llama):
    p = plan(llama, 29000, engine_version="0.6", available_kv_bytes=1478 * 2 * 1024 * 1024)
    # 1,478 blocks of 2 MiB; CPU blocks = 4 GiB // 2 MiB = 2,048; 23,648 / 29,000 = 0.82x
    assert p.log_lines[:2] == (
        "# GPU blocks: 1478, # CPU blocks: 2048",
        "Maximum concurrency for 29000 tokens per request: 0.82x",
    )
    assert not p.fits and p.kv_cache_tokens == 23_648


def test_unknown_engine():
    with pytest.raises(InputError) as err:
        get_engine("ollama")
    assert err.value.code == "unknown-engine"


def test_plan_to_dict_has_the_public_keys(llama):
    data = plan(llama, 8192).to_dict()
    for key in ("engine", "engine_version", "kv_cache_dtype", "block_size", "num_blocks", "kv_cache_bytes",
                "kv_cache_tokens", "max_concurrency", "kv_bytes_per_token", "bytes_per_request", "fits",
                "estimated_max_model_len", "groups", "log_lines", "notes"):  # fmt: skip
        assert key in data


# -- hybrid grouping, page unification, UniformType ---------------------------------------------


def _spec(kind, page, window=None, block=16, heads=8):
    return LayerSpec(
        kind=kind, block_size=block, real_page_bytes=page, window=window, shape=("kv", heads)
    )


def test_group_size_takes_the_max_when_buckets_are_close():
    # gpt-oss + EAGLE: 12 sliding + 13 full; 13 < 1.5·12 → group_size 13, one padding layer
    specs = {i: _spec("sliding", 1024, window=128) for i in range(12)}
    specs.update({12 + i: _spec("full", 1024) for i in range(13)})
    groups, logs = group_layers(specs)
    assert [(g.kind, len(g.layers), g.padding_layers) for g in groups] == [
        ("sliding", 12, 1),
        ("full", 13, 0),
    ]
    assert logs == ["Add 1 padding layers, may waste at most 8.33% KV cache memory"]


def test_group_size_min_with_stride_split_and_padding():
    # 20 full + 30 sliding: 30 ≥ 1.5·20 → group_size 20; sliding splits into 2 groups of 15 (+5 pad)
    specs = {i: _spec("full", 1024) for i in range(20)}
    specs.update({20 + i: _spec("sliding", 1024, window=512) for i in range(30)})
    groups, logs = group_layers(specs)
    assert [(g.kind, len(g.layers), g.padding_layers) for g in groups] == [
        ("full", 20, 0), ("sliding", 15, 5), ("sliding", 15, 5)]  # fmt: skip
    assert groups[1].layers == tuple(range(20, 50, 2))  # layers[0::2]
    assert logs == ["Add 10 padding layers, may waste at most 33.33% KV cache memory"]


def test_page_unification_raises_block_size_or_pads():
    specs = {0: _spec("full", 65_536), 1: _spec("sliding", 32_768, window=4096, heads=4),
             2: LayerSpec(kind="mamba", block_size=16, real_page_bytes=50_000, shape=("m",)),
             3: _spec("sliding", 40_000, window=1024, heads=3)}  # fmt: skip
    out = unify_page_sizes(specs)
    # 65,536 / 32,768 = 2 → block 32; mamba and the non-divisible attention page are padded
    assert (out[1].block_size, out[1].page_bytes) == (32, 65_536)
    assert (out[2].block_size, out[2].page_bytes, out[2].real_page_bytes) == (16, 65_536, 50_000)
    assert (out[3].block_size, out[3].page_bytes) == (16, 65_536)


def test_uniform_type_group_sums_pages():
    # all full attention, different head counts per layer → one UniformType group
    specs = {0: _spec("full", 65_536, heads=8), 1: _spec("full", 32_768, heads=4)}
    (group,), _ = group_layers(specs)
    assert group.uniform_type and group.page_bytes == 98_304


def qwen3_next(**overrides):
    return parse_config(
        {**bundled_config("qwen3-next-80b-a3b-thinking"), **overrides}, name="qwen3-next"
    )


def test_qwen3_next_block_alignment():
    p = plan(qwen3_next(), 32768, engine_version="0.21", **H100)
    # mamba page 49,152 + 1,048,576 = 1,097,728; attention 2·2·256·2 = 2,048 B per token;
    # block = 16·cdiv(1,097,728, 16·2,048) = 544; page 544·2,048 = 1,114,112 (mamba padded 1.49%)
    assert p.block_size == 544
    assert [(g.kind, g.num_layers, g.page_bytes) for g in p.groups] == [
        ("recurrent", 12, 1_114_112)
    ] * 3 + [("full", 12, 1_114_112)]
    assert p.log_lines[:2] == (
        "Setting attention block size to 544 tokens to ensure that attention page size is >= mamba page size.",
        "Padding mamba page size by 1.49% to ensure that mamba page size and attention page size are exactly equal.",
    )
    # 10 GiB // (12·1,114,112) = 803 blocks; align mode: 3·2 + cdiv(32,768, 544) = 6 + 61 = 67
    assert p.num_blocks == 803
    assert [g.blocks_per_request for g in p.groups] == [2, 2, 2, 61]
    assert p.kv_cache_tokens == int(803 / 67 * 32768)


def test_qwen3_next_033_flashinfer_prefill_checkpoints():
    p = plan(qwen3_next(), 32768, **H100)
    # 0.33 on SM 9.0, prefix caching on (align mode): FlashInfer GDN prefill exports checkpoints,
    # so blocks align to lcm(16, 64) = 64 → 64·cdiv(1,097,728, 64·2,048) = 576 tokens, and each
    # mamba group holds 2 + 1 checkpoint = 3 blocks; 10 GiB // (12·576·2,048) = 758 blocks
    assert p.block_size == 576 and p.num_blocks == 758
    assert [g.blocks_per_request for g in p.groups] == [3, 3, 3, 57]  # cdiv(32,768, 576) = 57
    assert p.kv_cache_tokens == int(758 / 66 * 32768)
    # on SM 8.0 the Triton GDN kernel exports nothing: back to 544 and 2 blocks
    ampere = plan(qwen3_next(), 32768, gpu_compute_capability=(8, 0))
    assert ampere.block_size == 544 and [g.blocks_per_request for g in ampere.groups] == [
        2,
        2,
        2,
        61,
    ]


def test_qwen3_next_without_prefix_caching_keeps_one_state_block():
    p = plan(qwen3_next(), 32768, enable_prefix_caching=False, **H100)
    assert p.block_size == 544
    assert [g.blocks_per_request for g in p.groups] == [1, 1, 1, 61]


def test_hybrid_alignment_overrides_a_user_block_size():
    assert plan(qwen3_next(), 32768, block_size=16, engine_version="0.21", **H100).block_size == 544


def test_nemotron_h_alignment():
    p = plan(bundled_shape("nvidia-nemotron-3-nano-30b-a3b-bf16"), 32768, **H100)
    # conv (3, 6,144) bf16 = 36,864 + SSM (64, 64, 128) fp32 = 2,097,152 → 2,134,016 B;
    # attention 2·2·128·2 = 1,024 B per token → block 16·cdiv(2,134,016, 16,384) = 16·131 = 2,096
    assert p.block_size == 2_096
    # Mamba2 specs carry one prefill-checkpoint block: 3 per mamba group in align mode (0.33)
    assert {g.blocks_per_request for g in p.groups if g.kind == "recurrent"} == {3}


# -- pipeline parallel ----------------------------------------------------------------------------
def test_pp_partition_like_get_pp_indices():
    # 32 layers over 3 stages: 10 each, the 2 left over go to stages -2 and -3, never the last
    assert pp_stages(32, 3) == [range(11), range(11, 22), range(22, 32)]
    assert pp_stages(32, 2, (20, 12)) == [range(20), range(20, 32)]
    with pytest.raises(InputError):
        pp_stages(32, 2, (20, 11))


def test_llama_pp3_takes_the_smallest_stage_count(llama):
    p = plan(llama, 8192, pipeline_parallel_size=3)
    # the 11-layer stages bind: 10 GiB // (11·65,536) = 14,894 blocks (the 10-layer stage: 16,384)
    assert p.num_blocks == 14_894
    assert p.kv_cache_tokens == 14_894 * 16
    assert p.kv_bytes_per_token == 11 * 4_096


# -- properties ------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(a=st.integers(min_value=1, max_value=200 * GIB), b=st.integers(min_value=1, max_value=200 * GIB),
       length=st.integers(min_value=1, max_value=131072), version=st.sampled_from(["0.33", "0.21", "0.8"]))  # fmt: skip
def test_num_blocks_monotone_in_memory(gemma, a, b, length, version):
    lo, hi = sorted((a, b))
    small = plan(gemma, length, available_kv_bytes=lo, engine_version=version, **H100)
    large = plan(gemma, length, available_kv_bytes=hi, engine_version=version, **H100)
    assert small.num_blocks <= large.num_blocks
    assert small.kv_cache_tokens <= large.kv_cache_tokens


@settings(max_examples=40, deadline=None)
@given(memory=st.integers(min_value=-GIB, max_value=100 * GIB), length=st.integers(min_value=1, max_value=200_000),
       which=st.sampled_from(["llama", "deepseek", "gemma", "qwen3-next"]), version=st.sampled_from(["0.33", "0.21"]))  # fmt: skip
def test_concurrency_and_fit_invariants(llama, deepseek, gemma, memory, length, which, version):
    model = {"llama": llama, "deepseek": deepseek, "gemma": gemma}.get(which) or qwen3_next()
    p = plan(model, length, available_kv_bytes=memory, engine_version=version, **H100)
    per_request = sum(g.blocks_per_request for g in p.groups)
    assert p.max_concurrency == p.num_blocks / per_request
    assert p.kv_cache_tokens == int(p.max_concurrency * length)
    # a length vLLM refuses at start-up (above the derived max_model_len) never fits
    assert p.fits == (p.refusal is None and p.bytes_per_request <= p.fit_budget_bytes)
    if p.refusal is not None:
        assert p.log_lines == (p.refusal,) and length > model.max_model_len
    elif not p.fits and p.fit_budget_bytes > 0:
        assert 0 <= p.estimated_max_model_len < length


# -- the dtype the model runs in on GPUs without bf16 (vLLM 0.33 _resolve_auto_dtype) ------------
def _t4(cli, alias, *extra):
    return cli("plan", alias, "--gpu", "T4", "--max-model-len", "4096", "--json", *extra).json


def test_pre_ampere_auto_falls_back_to_fp16_with_vllms_warning(cli):
    """T4 (SM 7.5): vLLM's CUDA platform supports fp16 and fp32 only; a bf16 Llama runs in fp16 and
    vLLM warns. Same bytes per value: the KV cache is the bf16 figure, named fp16."""
    data = _t4(cli, "llama-3.1-8b")
    assert data["kv_cache_dtype"] == "fp16"
    assert data["kv_bytes_per_token"] == 131_072  # 32 layers · 8 heads · 128 · 2 (K, V) · 2 B
    assert (
        "Your device 'Tesla T4' (with compute capability 7.5) doesn't support torch.bfloat16. "
        "Falling back to torch.float16 for compatibility." in data["log_lines"]
    )


def test_pre_ampere_gemma2_falls_back_to_fp32(cli):
    """Gemma-2 never runs in fp16 (``_FLOAT16_NOT_SUPPORTED_MODELS``): on a T4 its bf16 config
    falls back to fp32 — the KV cache and the weights twice the bf16 figures."""
    h100 = cli("plan", "gemma-2-9b-it", "--gpu", "H100", "--max-model-len", "4096", "--json").json
    t4 = _t4(cli, "gemma-2-9b-it")
    assert t4["kv_cache_dtype"] == "fp32"
    assert t4["kv_bytes_per_token"] == 2 * h100["kv_bytes_per_token"] == 2 * 344_064
    assert t4["weights_bytes"] > 1.99 * h100["weights_bytes"]
    assert any("Falling back to torch.float32" in line for line in t4["log_lines"])


def test_pre_ampere_refuses_bfloat16_as_vllm_does(cli):
    """``--dtype bfloat16`` below SM 8.0: ``CudaPlatform.check_if_supports_dtype`` stops the
    worker; ``--dtype float16`` for Gemma-3 is refused by ``_check_valid_dtype`` on any GPU."""
    bf16 = _t4(cli, "gemma-3-1b-it", "--dtype", "bfloat16")
    assert bf16["verdict"] == "wont-start"
    assert bf16["log_lines"] == [
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
        "T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the "
        "`dtype` flag in CLI, for example: --dtype=half."
    ]
    fp16 = cli("plan", "gemma-3-1b-it", "--gpu", "H100", "--max-model-len", "4096", "--dtype",
               "float16", "--json").json  # fmt: skip
    assert fp16["verdict"] == "wont-start"
    assert "does not support float16" in fp16["log_lines"][0]


def test_explicit_dtype_sets_an_auto_kv_cache(cli):
    """``--dtype float32``: vLLM's ``auto`` KV cache is the model dtype, 4 bytes a value (kvcalc
    kept the config's bf16 cache)."""
    data = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--max-model-len", "4096", "--dtype",
               "float32", "--json").json  # fmt: skip
    assert data["kv_cache_dtype"] == "fp32" and data["kv_bytes_per_token"] == 2 * 131_072


def test_vllm_would_print_its_cuda_graph_profiling_line(cli):
    """vLLM 0.33 ``Worker.determine_available_memory`` logs, after "Available KV cache memory", the
    utilization equivalent to its CUDA-graph estimate: delta = estimate / total memory,
    ``round(util - delta, 4)`` and ``min(round(util + delta, 4), 1.0)``, printed ``%.4f``."""
    data = cli("plan", "qwen3-1.7b", "--gpu", "H100", "--max-model-len", "4096", "--json").json
    graphs, total = data["memory"]["cudagraph_bytes"], data["memory"]["total_bytes"]
    assert graphs > 0
    delta = graphs / total
    line = (
        "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
        f"--gpu-memory-utilization=0.9200 is equivalent to --gpu-memory-utilization="
        f"{round(0.92 - delta, 4):.4f} without CUDA graph memory profiling. To maintain the same "
        "effective KV cache size as before, increase --gpu-memory-utilization to "
        f"{min(round(0.92 + delta, 4), 1.0):.4f}. To disable, set "
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
    )
    lines = data["log_lines"]
    # after "Model loading took" and "Available KV cache memory"
    assert lines.index(line) == 2 and lines[1].startswith("Available KV cache memory:")
    assert lines[0].startswith("Model loading took ")
    eager = cli("plan", "qwen3-1.7b", "--gpu", "H100", "--max-model-len", "4096", "--enforce-eager",
                "--json").json  # fmt: skip
    assert not [x for x in eager["log_lines"] if "CUDA graph memory profiling" in x]
