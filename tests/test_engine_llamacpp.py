"""llama.cpp engine: cells, streams, the iSWA cache and the two log lines (§3)."""

from __future__ import annotations

import pytest
from helpers import bundled_shape
from test_engine_vllm import gemma3_12b_config

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB

LLAMACPP = get_engine("llamacpp")


def plan(model, max_model_len=8192, **kw):
    kw.setdefault("available_kv_bytes", 40 * GIB)
    return LLAMACPP.plan_kv_cache(EngineRequest(model=model, max_model_len=max_model_len, **kw))


def test_gemma3_12b_iswa_one_sequence():
    p = plan(parse_config(gemma3_12b_config(), name="gemma"), 32768)
    # base: 8 layers · 32,768 cells · 8 heads·256·2·2 = 8,192 B = 2,048.00 MiB;
    # SWA: PAD(min(32,768, 1,024·1 + 512), 256) = 1,536 cells · 40 layers · 8,192 B = 480.00 MiB
    assert p.log_lines[3:] == (
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 32768 cells",
        "llama_kv_cache:      CUDA0 KV buffer size =  2048.00 MiB",
        "llama_kv_cache: size = 2048.00 MiB ( 32768 cells,   8 layers,  1/1 seqs), K (f16): 1024.00 MiB, V (f16): 1024.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 1536 cells",
        "llama_kv_cache:      CUDA0 KV buffer size =   480.00 MiB",
        "llama_kv_cache: size =  480.00 MiB (  1536 cells,  40 layers,  1/1 seqs), K (f16):  240.00 MiB, V (f16):  240.00 MiB",
    )
    assert p.kv_cache_bytes == 2048 * 2**20 + 480 * 2**20


def test_mla_has_no_v_tensor():
    p = plan(bundled_shape("deepseek-v3"), 32768)
    # 61 layers · 576 · 2 B = 70,272 B per cell; 32,768 cells = 2,196.00 MiB, V 0.00 MiB
    assert p.kv_bytes_per_token == 70_272
    assert p.log_lines[-1].endswith("K (f16): 2196.00 MiB, V (f16):    0.00 MiB")
    old = plan(bundled_shape("deepseek-v3"), 32768, engine_version="b5452")
    assert old.kv_bytes_per_token == 70_272 + 61 * 512 * 2  # V of kv_lora_rank width (unconfirmed)


def test_non_unified_streams_round_n_ctx():
    # Llama-2-7B: 32 layers · 32 heads · 128 · 2 · 2 B = 512 KiB per cell.
    # -c 32768 -np 10: n_ctx_seq = PAD(3,276, 256) = 3,328 → n_ctx 33,280 → 16,640.00 MiB
    model = bundled_shape("llama-2-7b-hf")
    p = plan(model, 3000, extra={"n_ctx": 32768, "n_seq_max": 10})
    assert (
        p.log_lines[0]
        == "llama_context: n_ctx is not divisible by n_seq_max - rounding down to 33280"
    )
    assert "llama_kv_cache:      CUDA0 KV buffer size = 16640.00 MiB" in p.log_lines
    assert p.kv_cache_tokens == 33_280 and p.max_concurrency == 10.0
    unified = plan(model, 3000, extra={"n_ctx": 32768, "n_seq_max": 10, "kv_unified": True})
    assert "llama_kv_cache:      CUDA0 KV buffer size = 16384.00 MiB" in unified.log_lines
    # a unified cache of 32,768 cells holds 32,768 / 3,000 = 10.9 requests, capped at 10 slots
    assert unified.max_concurrency == 10.0


def test_unified_concurrency_is_cells_over_length():
    p = plan(
        bundled_shape("llama-3.1-8b"),
        12000,
        extra={"n_ctx": 32768, "n_seq_max": 4, "kv_unified": True},
    )
    assert p.max_concurrency == 32768 / 12000


def test_quantized_cache_rows():
    p = plan(bundled_shape("llama-3.1-8b"), 8192, kv_cache_dtype="q8_0")
    # a row of 8·128 = 1,024 values = 32 blocks · 34 B = 1,088 B; 32 layers · 2 · 1,088 = 69,632 B
    assert p.kv_bytes_per_token == 69_632
    assert p.log_lines[-1] == (
        "llama_kv_cache: size =  544.00 MiB (  8192 cells,  32 layers,  1/1 seqs), "
        "K (q8_0):  272.00 MiB, V (q8_0):  272.00 MiB"
    )
    mixed = plan(
        bundled_shape("llama-3.1-8b"), 8192, kv_cache_dtype="q4_0", extra={"type_v": "f16"}
    )
    assert mixed.kv_bytes_per_token == 32 * (1024 // 32 * 18 + 2048)  # q4_0 K 576 B + f16 V 2,048 B


def test_memory_and_context_limits():
    model = bundled_shape("llama-3.1-8b")
    short = plan(model, 32768, available_kv_bytes=2 * GIB)
    # 32,768 cells · 131,072 B = 4 GiB > 2 GiB; the longest that fits: 16,384 cells
    assert not short.fits and short.estimated_max_model_len == 16_384
    slots = plan(model, 8193, extra={"n_ctx": 32768, "n_seq_max": 4})
    # 4 streams of PAD(8,192, 256) = 8,192 cells: an 8,193-token request does not fit a slot
    assert not slots.fits and slots.max_concurrency == 0.0 and slots.estimated_max_model_len == 8192


def test_refusals():
    with pytest.raises(InputError) as err:
        plan(bundled_shape("llama-3.1-8b"), kv_cache_dtype="fp8")
    assert err.value.code == "unsupported-dtype"
    with pytest.raises(InputError) as err:
        plan(bundled_shape("llama-3.1-8b"), tensor_parallel_size=2)
    assert err.value.code == "invalid-parallelism"
    assert LLAMACPP.default_gpu_memory_utilization(MemoryInputs()) is None


# -- the modelled version (0c1e570): batch limits, flash attention, offloading, lines ------------
def test_context_lines_and_small_n_ctx_limits_the_ubatch():
    # gemma-3-1b: 26 layers, 1 KV head · 256, window 512, 5 sliding : 1 full.
    # -c 100: n_batch = min(100, 2048) = 100, n_ubatch = min(100, 512) = 100, n_ctx = 256;
    # SWA cells = PAD(min(256, 512 + 100), 256) = 256
    p = plan(bundled_shape("gemma-3-1b-it"), 100, extra={"n_ctx": 100})
    assert p.log_lines[:3] == (
        "llama_context: n_seq_max             = 1",
        "llama_context: n_ctx                 = 256",
        "llama_context: n_ctx_seq             = 256",
    )
    assert "llama_kv_cache_iswa: creating     SWA KV cache, size = 256 cells" in p.log_lines
    big = plan(bundled_shape("gemma-3-1b-it"), 8192, extra={"n_ctx": 8192})
    # n_ubatch 512: PAD(min(8,192, 512 + 512), 256) = 1,024
    assert "llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells" in big.log_lines


def test_swa_full_prints_its_warning_and_sizes_the_swa_cache_fully():
    p = plan(bundled_shape("gemma-3-1b-it"), 4096, extra={"n_ctx": 4096, "swa_full": True})
    assert p.log_lines[3].startswith("llama_kv_cache_iswa: using full-size SWA cache (ref: ")
    assert "llama_kv_cache_iswa: creating     SWA KV cache, size = 4096 cells" in p.log_lines


def test_quantized_v_needs_flash_attention():
    model = bundled_shape("llama-3.1-8b")
    auto = plan(model, 4096, kv_cache_dtype="q4_0")
    assert auto.log_lines[0] == (
        "llama_init_from_model: enabling flash_attn since it is required for quantized V cache"
    )
    with pytest.raises(InputError) as err:
        plan(model, 4096, kv_cache_dtype="q4_0", extra={"flash_attn": "off"})
    assert err.value.code == "unsupported-dtype" and "flash attention" in err.value.message
    # a quantized K with an f16 V is fine without flash attention
    ok = plan(model, 4096, kv_cache_dtype="q8_0", extra={"flash_attn": "off", "type_v": "f16"})
    assert ok.kv_bytes_per_token == 32 * (1024 // 32 * 34 + 2048)


@pytest.mark.parametrize(
    ("dtype", "block_bytes"),
    [("q4_0", 18), ("q4_1", 20), ("iq4_nl", 18), ("q5_0", 22), ("q5_1", 24)],
)
def test_four_and_five_bit_cache_types(dtype, block_bytes):
    p = plan(bundled_shape("llama-3.1-8b"), 4096, kv_cache_dtype=dtype)
    # 32 layers · 2 · (8 · 128 / 32 blocks · block_bytes) per token
    assert p.kv_bytes_per_token == 32 * 2 * 32 * block_bytes
    assert p.kv_cache_bytes == 4096 * p.kv_bytes_per_token
    assert p.log_lines[-1].endswith(f"V ({dtype}): {4096 * 32 * 32 * block_bytes / 2**20:7.2f} MiB")


def test_block_must_divide_the_head_width_with_flash_attention():
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 4, "hidden_size": 320, "head_dim": 80}  # fmt: skip
    model = parse_config(cfg, name="odd")
    with pytest.raises(InputError) as err:
        plan(model, 512, kv_cache_dtype="q8_0")
    assert "n_embd_head_k=80" in err.value.message
    # without flash attention a quantized K only needs whole rows: 4 · 80 = 320 = 10 blocks
    assert plan(
        model, 512, kv_cache_dtype="q8_0", extra={"flash_attn": "off", "type_v": "f16"}
    ).fits


def test_layers_left_on_the_cpu_keep_their_kv_in_host_memory():
    model = bundled_shape("llama-3.1-8b")  # 32 layers, 128 KiB per cell
    # -ngl 10: layers from 32 + 1 - 10 = 23 on the GPU (9 layers), 0..22 (23 layers) on the CPU
    p = plan(model, 4096, extra={"n_gpu_layers": 10})
    per_layer = 4096 * 4096  # 4,096 cells · 8 · 128 · 2 · 2 B = 16 MiB
    assert p.kv_cache_bytes == 9 * per_layer
    assert p.log_lines[-3:-1] == (
        "llama_kv_cache:        CPU KV buffer size =   368.00 MiB",
        "llama_kv_cache:      CUDA0 KV buffer size =   144.00 MiB",
    )
    assert any("in host memory" in n for n in p.notes)
    no_offload = plan(model, 4096, extra={"offload_kqv": False})
    assert no_offload.kv_cache_bytes == 0
    assert no_offload.log_lines[-2] == "llama_kv_cache:        CPU KV buffer size =   512.00 MiB"


def test_mla_needs_one_type():
    with pytest.raises(InputError) as err:
        plan(bundled_shape("deepseek-v3"), 4096, kv_cache_dtype="q8_0", extra={"type_v": "f16"})
    assert "different K (q8_0) and V (f16)" in err.value.message


def test_mamba2_keeps_one_state_cell_per_sequence():
    from kvcalc.model.dtypes import FP32
    from kvcalc.model.recurrent_layouts import Mamba2State
    from kvcalc.model.shape import ModelShape

    ssm = Mamba2State(dtype=FP32, ssm_dtype=FP32, conv_kernel=4, intermediate_size=1536, n_groups=1,
                      state_size=128, num_heads=24, head_dim=64)  # fmt: skip
    model = ModelShape(name="mamba2", model_type="mamba2", layers=(ssm,) * 24, dtype=FP32,
                       num_attention_heads=0, hidden_size=768, max_model_len=1 << 20)  # fmt: skip
    p = plan(model, 8192, extra={"n_seq_max": 4, "n_ctx": 4 * 8192, "n_gpu_layers": 20})
    # per cell and layer: R 3 · (1,536 + 256) · 4 = 21,504 B, S 128 · 1,536 · 4 = 786,432 B;
    # 4 cells · 24 layers = 77,568,000 B; layers 0–4 (n_gpu_layers 20: i ≥ 25 − 20) on the CPU
    assert p.kv_cache_bytes == 4 * 19 * 807_936 and p.max_concurrency == 4.0
    assert p.log_lines[-3:] == (
        "llama_memory_recurrent:        CPU RS buffer size =    15.41 MiB",
        "llama_memory_recurrent:      CUDA0 RS buffer size =    58.56 MiB",
        "llama_memory_recurrent: size =   73.97 MiB (     4 cells,  24 layers,  4 seqs  0 rs_seq), "
        "R (f32):    1.97 MiB, S (f32):   72.00 MiB, P (f32):    0.00 MiB",
    )
    assert p.groups[-1].kind == "recurrent" and p.groups[-1].num_blocks == 4


def test_nemotron_h_hybrid_memory():
    p = plan(bundled_shape("nvidia-nemotron-3-nano-30b-a3b-bf16"), 4096)
    # KV: 6 attention layers · 2 KV heads · 128 · 2 B · (K + V) = 6,144 B per cell, 4,096 cells
    # = 25,165,824 B; state: 23 Mamba-2 layers · (R 3 · (4,096 + 2 · 8 · 128) · 4 = 73,728 B +
    # S 128 · 4,096 · 4 = 2,097,152 B) = 49,930,240 B (float32, one cell); the 23 MoE layers hold none
    assert p.kv_cache_bytes == 25_165_824 + 49_930_240
    assert p.log_lines[3:] == (
        "llama_kv_cache:      CUDA0 KV buffer size =    24.00 MiB",
        "llama_kv_cache: size =   24.00 MiB (  4096 cells,   6 layers,  1/1 seqs), "
        "K (f16):   12.00 MiB, V (f16):   12.00 MiB",
        "llama_memory_recurrent:      CUDA0 RS buffer size =    47.62 MiB",
        "llama_memory_recurrent: size =   47.62 MiB (     1 cells,  52 layers,  1 seqs  0 rs_seq), "
        "R (f32):    1.62 MiB, S (f32):   46.00 MiB, P (f32):    0.00 MiB",
    )
    assert [g.kind for g in p.groups] == ["full", "recurrent"]
    # the KV cache grows with the context, the state does not: 1 GiB leaves 1 GiB − 49,930,240 B
    # for 6,144 B per cell → 166,638 cells, the longest context whose padded cache fits
    tight = plan(
        bundled_shape("nvidia-nemotron-3-nano-30b-a3b-bf16"), 262144, available_kv_bytes=GIB
    )
    assert not tight.fits
    assert tight.estimated_max_model_len == (GIB - 49_930_240) // 6144 // 256 * 256


def test_jamba_and_falcon_h1_hybrid_memory():
    from test_family_hybrids import shape

    jamba = plan(shape("ai21labs--AI21-Jamba-1.5-Mini"), 4096)
    # KV: 4 attention layers · 8 KV heads · 128 · 2 B · 2 = 16,384 B per cell · 4,096 cells;
    # 28 Mamba-1 layers · (R 3 · 8,192 · 4 = 98,304 B + S 16 · 8,192 · 4 = 524,288 B)
    assert jamba.kv_cache_bytes == 16_384 * 4096 + 28 * 622_592
    assert jamba.log_lines[-3].endswith(
        "(  4096 cells,   4 layers,  1/1 seqs), K (f16):   32.00 MiB, V (f16):   32.00 MiB"
    )
    assert jamba.log_lines[-1] == (  # 17,432,576 B = 16.625 MiB
        "llama_memory_recurrent: size =   16.62 MiB (     1 cells,  32 layers,  1 seqs  0 rs_seq), "
        "R (f32):    2.62 MiB, S (f32):   14.00 MiB, P (f32):    0.00 MiB"
    )
    falcon = plan(shape("synthetic--falcon-h1-defaults"), 4096)
    # every layer attends and holds a Mamba-2 state: 32 · 8 · 128 · 2 B · 2 = 131,072 B per cell;
    # 32 · (R 3 · (1,024 + 2 · 256) · 4 = 18,432 B + S 256 · 1,024 · 4 = 1,048,576 B)
    assert falcon.kv_cache_bytes == 131_072 * 4096 + 32 * 1_067_008
    assert [g.num_layers for g in falcon.groups] == [32, 32]


def test_other_hybrids_are_refused_by_name():
    from test_family_hybrids import shape

    with pytest.raises(InputError) as err:
        plan(shape("moonshotai--Kimi-Linear-48B-A3B-Instruct"), 4096)
    assert err.value.code == "unsupported-model" and "kimi_linear" in err.value.message
    assert "granitehybrid" in err.value.hint and "nemotron_h" in err.value.hint


def test_llama_server_automatic_slots_and_fit():
    model = bundled_shape("llama-3.1-8b")
    auto = plan(model, 32768, extra={"server": True})
    # -np unset: 4 slots in one unified cache of -c cells, each slot able to use all of it
    assert auto.log_lines[:3] == (
        "llama_context: n_seq_max             = 4",
        "llama_context: n_ctx                 = 32768",
        "llama_context: n_ctx_seq             = 32768",
    )
    assert auto.max_concurrency == 1.0 and auto.kv_cache_tokens == 32768
    assert any("4 slots sharing one unified cache" in n for n in auto.notes)
    tight = plan(model, 131072, extra={"server": True}, available_kv_bytes=8 * GIB)
    assert not tight.fits and any("--fit (on by default) would lower -c" in n for n in tight.notes)
    given = plan(
        model, 8192, extra={"server": True, "n_seq_max": 2}
    )  # -np 2: as given, not unified
    assert given.log_lines[0] == "llama_context: n_seq_max             = 2"
    with pytest.raises(InputError) as err:
        plan(model, 8192, extra={"fit": "on"})
    assert err.value.code == "unmodelled-option" and "--fit" in err.value.message
    assert plan(model, 8192, extra={"fit": "off"}).fits


def test_engine_kv_per_request_is_one_slots_share_not_the_pool(cli):
    """llama.cpp allocates every slot's cells up front; one request of 8,192 tokens holds 8,192
    cells of one slot: 32 layers × 8 KV heads × 128 × 2 (K, V) × 34/32 B (q8_0) = 69,632 B per
    cell, × 8,192 = 570,425,344 B (544 MiB) — not the 4-slot pool of 2,281,701,376 B."""
    data = cli(
        "plan", "llama-3.1-8b", "--engine", "llamacpp", "--gpu", "RTX-4090", "--max-model-len",
        "8192", "--batch", "4", "--kv-cache-dtype", "q8_0", "--json",
    ).json  # fmt: skip
    assert data["kv_bytes_per_token"] == 69_632
    assert data["engine_kv_bytes_per_request"] == 570_425_344
    assert data["layer_kv_bytes_per_request"] == 570_425_344
    assert data["kv_cache_bytes"] == 4 * 570_425_344


@pytest.mark.parametrize(("options", "words"), [
    ((), "its CUDA backend's context and cuBLAS workspace (outside the buffers it prints) are not "
         "modelled (unconfirmed, not counted)"),
    ((("buffer_name", "CPU"),), "its CPU backend allocates nothing beyond the buffers it prints"),
])  # fmt: skip
def test_no_vllm_non_torch_term_on_llama_cpp_plans(options, words):
    from kvcalc import PlanInputs, plan

    model = bundled_shape("llama-3.1-8b")
    base = {"gpu": "H100", "max_model_len": 8192}
    vllm = plan(model, PlanInputs(**base), with_suggestions=False)
    r = plan(
        model, PlanInputs(**base, engine="llamacpp", engine_options=options), with_suggestions=False
    )
    assert vllm.memory.non_torch_bytes > 0  # vLLM's own term stays
    assert r.memory.non_torch_bytes == 0
    assert any(words in note for note in r.notes)
    # the budget is the GPU less weights and the compute buffer only
    m = r.memory
    assert r.available_kv_bytes == m.total_bytes - m.weights_bytes - m.activation_bytes


def test_llama4_chunk_and_pattern_are_llama_cpp_s_own():
    from dataclasses import replace

    from kvcalc.model.layouts import ChunkedLocal

    model = bundled_shape("llama-4-scout-17b-16e-instruct")
    p = plan(model, 16384)
    # 36 chunked layers: PAD(min(16,384, 8,192 + 512), 256) = 8,704 cells; 12 full layers
    assert [(g.kind, g.num_layers, g.num_blocks) for g in p.groups] == [("full", 12, 16384),
                                                                         ("chunked", 36, 8704)]  # fmt: skip
    # llama.cpp's llama4 loader fixes the chunk at 8,192 and every 4th layer full: others refused
    other_chunk = replace(model, layers=tuple(replace(x, chunk_size=4096) if isinstance(x, ChunkedLocal)
                                              else x for x in model.layers))  # fmt: skip
    with pytest.raises(InputError) as err:
        plan(other_chunk, 16384)
    assert err.value.code == "unsupported-model" and "4,096" in err.value.message
    other_pattern = replace(model, layers=model.layers[1:])
    with pytest.raises(InputError) as err:
        plan(other_pattern, 16384)
    assert "every 4th layer full" in err.value.message
