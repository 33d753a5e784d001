"""llama.cpp's compute buffer for the pure Mamba-2 graph (``mamba2``), against the figures
llama.cpp ``0c1e570`` printed on the CPU (``verify --engine llamacpp --run``, recorded here)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.model.dtypes import FP32
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.model.shape import ModelShape

LLAMACPP = get_engine("llamacpp")


def mamba2(
    layers: int, inner: int, groups: int, state: int, heads: int, kernel: int = 4
) -> ModelShape:
    ssm = Mamba2State(dtype=FP32, ssm_dtype=FP32, conv_kernel=kernel, intermediate_size=inner,
                      n_groups=groups, state_size=state, num_heads=heads, head_dim=inner // heads)  # fmt: skip
    return ModelShape(name="mamba2", model_type="mamba2", layers=(ssm,) * layers, dtype=FP32,
                      num_attention_heads=0, hidden_size=768, max_model_len=1 << 20)  # fmt: skip


def request(model: ModelShape, embd: int, vocab: int, **extra) -> EngineRequest:
    """As ``verify --run`` plans the GGUF it writes: the model's state layout, small widths."""
    dims = GraphDims(arch="mamba2", n_embd=embd, n_ff=0, n_vocab=vocab)
    return EngineRequest(model=replace(model, graph_dims=dims), max_model_len=extra["n_ctx"],
                         available_kv_bytes=1 << 50, extra={**extra, "buffer_name": "CPU"})  # fmt: skip


MAMBA2_130M = mamba2(2, 1536, 1, 128, 24)  # Mamba-2 130M's layers: inner 1,536, state 128, 24 heads
NEMOTRON_M = mamba2(3, 4096, 8, 128, 64)  # Nemotron-H's Mamba-2 layers: 8 groups, 64 heads

#: (model, embedding, vocabulary, options, llama.cpp's ``CPU compute buffer size is … MiB`` at
#: llama_free, four decimals) — printed by llama.cpp 0c1e570 (llama-cpp-python 0.3.36)
RECORDED = [
    (MAMBA2_130M, 64, 384, {"n_ctx": 512}, "20.7168"),
    (MAMBA2_130M, 64, 384, {"n_ctx": 1000, "n_seq_max": 3}, "22.3378"),
    (MAMBA2_130M, 64, 384, {"n_ctx": 512, "n_seq_max": 2, "offload_kqv": False}, "21.5078"),
    (MAMBA2_130M, 64, 384, {"n_ctx": 512, "n_seq_max": 4, "n_ubatch": 100}, "6.4699"),
    (MAMBA2_130M, 768, 20000, {"n_ctx": 600, "n_ubatch": 128, "n_batch": 100}, "8.5091"),
    (NEMOTRON_M, 256, 5000, {"n_ctx": 512}, "53.7696"),
    (NEMOTRON_M, 256, 5000, {"n_ctx": 2048, "n_seq_max": 4, "n_ubatch": 256, "n_batch": 300}, "39.3770"),
    (mamba2(2, 1024, 2, 64, 16, kernel=3), 128, 1000, {"n_ctx": 512, "n_seq_max": 5}, "15.7166"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "embd", "vocab", "extra", "printed"), RECORDED)
def test_mamba2_compute_buffer_equals_what_llama_cpp_printed(model, embd, vocab, extra, printed):
    buffer, why = LLAMACPP.compute_buffer(request(model, embd, vocab, **extra))
    assert why == "" and buffer is not None and buffer.arch == "mamba2"
    assert f"{buffer.bytes / 2**20:.4f}" == printed
    assert buffer.bytes == max(buffer.pp_bytes, buffer.tg_bytes) and buffer.bytes % 32 == 0


def test_the_scan_output_packs_y_and_the_states():
    buffer, _ = LLAMACPP.compute_buffer(request(MAMBA2_130M, 64, 384, n_ctx=512))
    assert buffer is not None and buffer.n_tokens == 512
    # live at the scan: ssm_in's output (2 · 1,536 + 2 · 128 + 24 = 3,352 wide) 3,352 · 512 · 4 B
    # = 6,864,896; the convolution's 1,792 · 512 · 4 = 3,670,016; ssm_scan's y and new state
    # (1,536 · 512 + 128 · 1,536) · 4 = 3,932,160
    assert buffer.pp_bytes > 6_864_896 + 3_670_016 + 3_932_160
    # one token per sequence: the state (786,432 B) dominates the one-token graph
    assert buffer.tg_bytes > (1536 + 128 * 1536) * 4 > buffer.tg_bytes // 2


def test_several_sequences_scan_one_state_each():
    one, _ = LLAMACPP.compute_buffer(request(MAMBA2_130M, 64, 384, n_ctx=512))
    four, _ = LLAMACPP.compute_buffer(request(MAMBA2_130M, 64, 384, n_ctx=512, n_seq_max=4))
    assert one is not None and four is not None
    # the one-token graph of 4 sequences holds 4 states where 1 held one: 3 · 786,432 B more
    assert four.tg_bytes - one.tg_bytes >= 3 * 128 * 1536 * 4


def test_mamba2_layers_of_other_kinds_are_refused():
    from helpers import bundled_shape

    attn = bundled_shape("llama-3.1-8b").layers[0]
    mixed = replace(MAMBA2_130M, layers=(*MAMBA2_130M.layers, attn))
    none, why = LLAMACPP.compute_buffer(request(mixed, 64, 384, n_ctx=512))
    assert none is None and "only Mamba-2 layers" in why


def test_a_mamba2_gguf_plan_carries_its_compute_buffer(tmp_path):
    from gguf import GGMLQuantizationType as Q
    from gguf_helpers import write_gguf

    from kvcalc.planning.api import plan_reference
    from kvcalc.planning.inputs import PlanInputs

    a = "mamba2"  # Mamba-2 130M's shape, 2 layers, a 384-token vocabulary 64 wide
    keys = {f"{a}.block_count": 2, f"{a}.context_length": 1 << 20, f"{a}.embedding_length": 64,
            f"{a}.ssm.conv_kernel": 4, f"{a}.ssm.inner_size": 1536, f"{a}.ssm.state_size": 128,
            f"{a}.ssm.time_step_rank": 24, f"{a}.ssm.group_count": 1}  # fmt: skip
    path = write_gguf(tmp_path / "m.gguf", a, keys, [("token_embd.weight", (384, 64), Q.F16)])
    p = plan_reference(
        str(path), PlanInputs(engine="llamacpp", gpu_memory_bytes=4 << 30, max_model_len=512)
    )
    # the first recorded case: 20.7168 MiB
    assert p.memory.activation_bytes == 21_723_168
    assert not any("compute buffer not modelled" in n for n in p.notes)


def granite(rope: bool = True) -> ModelShape:
    """Granite-4.0-H's layout at 512 wide (Mamba inner 1,024, 16 heads of 64, state 256), layer 1
    attending with 8 heads and 2 KV heads of 64, as ``verify --run`` writes it (MLP 64, 384 tokens)."""
    from helpers import bundled_shape

    ssm = mamba2(1, 1024, 1, 256, 16).layers[0]
    attn = replace(bundled_shape("llama-3.1-8b").layers[0], kv_heads=2, k_dim=64, v_dim=64)
    dims = GraphDims(arch="granitehybrid", n_embd=512, n_ff=64, n_vocab=384, rope=rope)
    return ModelShape(name="granite", model_type="granitemoehybrid", layers=(ssm, attn, ssm, ssm),
                      dtype=FP32, num_attention_heads=8, hidden_size=512, max_model_len=1 << 17,
                      graph_dims=dims)  # fmt: skip


#: (RoPE, cache type, options, llama.cpp's four-decimal figure), printed by 0c1e570; RoPE off:
#: ``granitehybrid.rope.scaling.finetuned`` false, as the converter writes Granite-4.0-H ("nope")
RECORDED_GRANITE = [
    (True, "auto", {"n_ctx": 512}, "16.5801"),
    (True, "auto", {"n_ctx": 1000, "n_seq_max": 2, "flash_attn": "off"}, "19.6114"),
    (True, "auto", {"n_ctx": 1024, "n_seq_max": 3, "kv_unified": True}, "20.1838"),
    (True, "q8_0", {"n_ctx": 512}, "16.6114"),
    (False, "auto", {"n_ctx": 512}, "16.5782"),
    (False, "auto", {"n_ctx": 1000, "n_seq_max": 2, "flash_attn": "off"}, "19.6094"),
]  # fmt: skip


@pytest.mark.parametrize(("rope", "dtype", "extra", "printed"), RECORDED_GRANITE)
def test_granite_hybrid_compute_buffer_equals_what_llama_cpp_printed(rope, dtype, extra, printed):
    r = EngineRequest(model=granite(rope), kv_cache_dtype=dtype, max_model_len=extra["n_ctx"],
                      available_kv_bytes=1 << 50, extra={**extra, "buffer_name": "CPU"})  # fmt: skip
    buffer, why = LLAMACPP.compute_buffer(r)
    assert why == "" and buffer is not None and buffer.arch == "granitehybrid"
    assert f"{buffer.bytes / 2**20:.4f}" == printed


def test_granite_without_rope_drops_the_positions():
    with_rope, _ = LLAMACPP.compute_buffer(request_for(granite(True)))
    without, _ = LLAMACPP.compute_buffer(request_for(granite(False)))
    assert with_rope is not None and without is not None
    # the 512-token positions input: 512 · 4 B = 2,048 B
    assert with_rope.bytes - without.bytes == 2048


def request_for(model: ModelShape) -> EngineRequest:
    return EngineRequest(model=model, max_model_len=512, available_kv_bytes=1 << 50,
                         extra={"n_ctx": 512, "buffer_name": "CPU"})  # fmt: skip


def test_granite_experts_are_refused():
    model = granite()
    assert model.graph_dims is not None
    moe = replace(model, graph_dims=replace(model.graph_dims, n_expert=4, n_expert_used=2))
    none, why = LLAMACPP.compute_buffer(request_for(moe))
    assert none is None and "granitehybrid" in why and "not modelled" in why


def nemotron_h(n_ff: int, vocab: int) -> ModelShape:
    """Nemotron-3-Nano's first 6 layers (M E M E M *: Mamba-2, MLP, ..., attention in layer 5), the
    expert layers written as MLP blocks, 64 wide, as ``verify --run`` writes them."""
    from helpers import bundled_shape

    shape = bundled_shape("nvidia-nemotron-3-nano-30b-a3b-bf16")
    dims = GraphDims(arch="nemotron_h", n_embd=64, n_ff=n_ff, n_vocab=vocab)
    return replace(shape, layers=shape.layers[:6], graph_dims=dims)


#: (MLP width, vocabulary, options, llama.cpp's four-decimal figure), printed by 0c1e570
RECORDED_NEMOTRON = [
    (64, 384, {"n_ctx": 512}, "53.1524"),
    (64, 384, {"n_ctx": 1000, "n_seq_max": 3, "flash_attn": "off"}, "61.0362"),
    (64, 384, {"n_ctx": 1024, "n_seq_max": 2, "kv_unified": True}, "53.7930"),
    (30000, 1000, {"n_ctx": 512}, "67.5508"),  # the MLP's 30,000 · 512 · 4 B up projection
    (30000, 1000, {"n_ctx": 4096, "flash_attn": "off"}, "273.3828"),  # KQ over 4,096 cells
]  # fmt: skip


@pytest.mark.parametrize(("n_ff", "vocab", "extra", "printed"), RECORDED_NEMOTRON)
def test_nemotron_h_compute_buffer_equals_what_llama_cpp_printed(n_ff, vocab, extra, printed):
    r = EngineRequest(model=nemotron_h(n_ff, vocab), max_model_len=extra["n_ctx"],
                      available_kv_bytes=1 << 50, extra={**extra, "buffer_name": "CPU"})  # fmt: skip
    buffer, why = LLAMACPP.compute_buffer(r)
    assert why == "" and buffer is not None and buffer.arch == "nemotron_h"
    assert f"{buffer.bytes / 2**20:.4f}" == printed


def test_nemotron_h_experts_are_refused():
    model = nemotron_h(64, 384)
    assert model.graph_dims is not None
    moe = replace(model, graph_dims=replace(model.graph_dims, n_expert=128, n_expert_used=6))
    none, why = LLAMACPP.compute_buffer(request_for(moe))
    assert none is None and "not modelled" in why
