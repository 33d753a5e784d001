"""llama.cpp's compute buffer: ggml's graph allocator and the rebuilt graphs, against the figures
llama.cpp ``0c1e570`` printed on the CPU (``verify --engine llamacpp --run``, recorded here)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import bundled_shape

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.engines.llamacpp import ggml as g
from kvcalc.model.graph_dims import GraphDims
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

LLAMACPP = get_engine("llamacpp")


def test_allocator_frees_on_the_last_child_and_refills_the_best_hole():
    x = g.inp(g.F32, 16)  # 64 B, a leaf: allocated first, at 0
    a = g.mul_mat(g.external(g.F16, 16, 250), x)  # 1,000 B → 1,024 aligned, at 64
    b = g.mul_mat(
        g.external(g.F16, 250, 50), a
    )  # 200 B → 224, x freed: [0, 64) too small, at 1,088
    c = g.mul_mat(g.external(g.F16, 50, 200), b)  # 800 B: a's freed hole [0, 1,088) holds it, at 0
    graph = g.Graph()
    graph.expand(c)
    # sources first, left to right: every weight before x, then a, b, c
    assert graph.leafs[-1] is x and graph.nodes == [a, b, c]
    assert g.buffer_size(graph) == 64 + 1024 + 224 == 1312


def test_in_place_ops_reuse_their_parent_unless_it_is_an_output():
    x = g.inp(g.F32, 64)  # 256 B
    y = g.dup(g.dup(x, "rms_norm"), "mul", g.external(g.F32, 64))
    graph = g.Graph()
    graph.expand(y)
    assert g.buffer_size(graph) == 256  # rms_norm and mul both write over x
    x2 = g.inp(g.F32, 64)
    n = g.dup(x2, "rms_norm")
    n.is_output = True
    graph = g.Graph()
    graph.expand(g.dup(n, "mul", g.external(g.F32, 64)))
    assert g.buffer_size(graph) == 256 + 256  # an output is never overwritten: mul allocates


def request(model: str, layers: int, widths: tuple[int, int, int], **extra) -> EngineRequest:
    """As ``verify --run`` plans the GGUF it writes: the model's KV layout, small widths."""
    shape = bundled_shape(model)
    shape = replace(shape, layers=shape.layers[:layers])
    arch = {"llama": "llama", "qwen3": "qwen3", "qwen2": "qwen2", "gemma2": "gemma2",
            "gemma3_text": "gemma3"}[shape.model_type]  # fmt: skip
    hidden, ffn, vocab = widths
    dims = GraphDims(arch=arch, n_embd=hidden, n_ff=ffn, n_vocab=vocab, qkv_bias=arch == "qwen2")
    extra.setdefault("n_ctx", 64)
    return EngineRequest(model=replace(shape, graph_dims=dims), max_model_len=extra["n_ctx"],
                         available_kv_bytes=1 << 50, extra={**extra, "buffer_name": "CPU"})  # fmt: skip


#: (model, layers, (embedding, MLP, vocabulary), options, llama.cpp's ``CPU compute buffer size
#: is … MiB`` at llama_free, four decimals) — printed by llama.cpp 0c1e570 (llama-cpp-python 0.3.36)
RECORDED = [
    ("llama-3.1-8b", 2, (64, 64, 384), {"n_ctx": 256}, "8.3193"),
    ("llama-3.1-8b", 2, (64, 64, 384), {"n_ctx": 1024, "flash_attn": "off"}, "86.5098"),
    ("llama-3.1-8b", 2, (256, 1024, 5000), {"n_ctx": 1024}, "24.5137"),
    ("llama-3.1-8b", 2, (256, 1024, 5000), {"n_ctx": 1024, "flash_attn": "off"}, "87.5098"),
    ("llama-3.1-8b", 3, (512, 3000, 20000), {"n_ctx": 600, "n_ubatch": 128, "n_batch": 300}, "10.7065"),
    ("llama-3.1-8b", 2, (128, 512, 1000), {"n_ctx": 2048, "n_seq_max": 3}, "17.5480"),
    ("llama-3.1-8b", 2, (128, 512, 1000), {"n_ctx": 2048, "n_seq_max": 3, "kv_unified": True, "flash_attn": "off"}, "153.0582"),
    ("qwen3-8b", 2, (128, 300, 800), {"n_ctx": 512}, "17.2637"),
    ("qwen3-8b", 2, (64, 64, 384), {"n_ctx": 512, "flash_attn": "off", "n_seq_max": 2}, "37.0098"),
    ("qwen2.5-1.5b", 2, (1536, 300, 800), {"n_ctx": 512}, "15.5137"),
    ("qwen2.5-1.5b", 3, (1536, 64, 384), {"n_ctx": 700, "flash_attn": "off"}, "35.5098"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "layers", "widths", "extra", "printed"), RECORDED)
def test_compute_buffer_equals_what_llama_cpp_printed(model, layers, widths, extra, printed):
    buffer, why = LLAMACPP.compute_buffer(request(model, layers, widths, **extra))
    assert why == "" and buffer is not None
    assert f"{buffer.bytes / 2**20:.4f}" == printed
    assert buffer.bytes == max(buffer.pp_bytes, buffer.tg_bytes) and buffer.bytes % 32 == 0


def test_the_logits_dominate_a_wide_vocabulary():
    r = request("llama-3.1-8b", 3, (512, 3000, 20000), n_ctx=600, n_ubatch=128, n_batch=300)
    buffer, _ = LLAMACPP.compute_buffer(r)
    assert buffer is not None and buffer.n_tokens == 128
    # the 128-token graph holds the logits: 128 outputs · 20,000 · 4 B = 10,240,000 B of 11,226,624
    assert buffer.bytes == 11_226_624 and buffer.pp_bytes > 128 * 20000 * 4 > buffer.tg_bytes


def test_without_flash_attention_the_kq_matrix_is_held():
    fa, _ = LLAMACPP.compute_buffer(request("llama-3.1-8b", 2, (64, 64, 384), n_ctx=1024))
    off, _ = LLAMACPP.compute_buffer(
        request("llama-3.1-8b", 2, (64, 64, 384), n_ctx=1024, flash_attn="off")
    )
    assert fa is not None and off is not None
    # KQ: 1,024 cells · 512 tokens · 32 heads · 4 B = 64 MiB more than the flash-attention graph
    assert off.bytes - fa.bytes > 1024 * 512 * 32 * 4


def test_the_cpu_line_is_predicted_and_cuda_is_an_estimate():
    r = request("llama-3.1-8b", 2, (64, 64, 384), n_ctx=256)
    plan = LLAMACPP.plan_kv_cache(r)
    assert plan.log_lines[-1] == "sched_reserve:        CPU compute buffer size =     8.32 MiB"
    gpu = replace(r, extra={k: v for k, v in r.extra.items() if k != "buffer_name"})
    assert not any("compute buffer" in line for line in LLAMACPP.plan_kv_cache(gpu).log_lines)
    buffer, _ = LLAMACPP.compute_buffer(gpu)
    assert buffer is not None and "not confirmed" in buffer.note and "CUDA0" in buffer.note


def test_what_is_not_modelled_is_said():
    gpt2 = bundled_shape("gpt2")
    none, why = LLAMACPP.compute_buffer(
        EngineRequest(model=gpt2, max_model_len=1024, available_kv_bytes=0)
    )
    assert none is None and "the gpt2 graph is not modelled" in why
    scout = bundled_shape("llama-4-scout-17b-16e-instruct")
    none, why = LLAMACPP.compute_buffer(
        EngineRequest(model=scout, max_model_len=4096, available_kv_bytes=0)
    )
    assert none is None and "llama4" in why


def test_a_llama_cpp_plan_takes_the_compute_buffer_as_its_activation():
    p = plan_reference(
        "llama-3.1-8b", PlanInputs(engine="llamacpp", gpu="h100", max_model_len=8192)
    )
    # Llama-3.1-8B (4,096 wide, 14,336 MLP, 128,256 vocabulary), 8,192 cells, 512-token ubatch
    assert p.memory.activation_bytes == 279_447_552  # 266.50 MiB
    assert any("not confirmed" in n for n in p.notes)
    assert not any(n.startswith("activation (") for n in p.notes)


def test_a_gguf_plan_has_a_compute_buffer_not_zero(tmp_path):
    from gguf import GGMLQuantizationType as Q
    from gguf_helpers import llama_keys, write_gguf

    keys = {
        **llama_keys(layers=2, heads=8, kv_heads=2, hidden=512),
        "llama.feed_forward_length": 1024,
    }
    path = write_gguf(
        tmp_path / "m.gguf", "llama", keys, [("token_embd.weight", (640, 512), Q.Q8_0)]
    )
    p = plan_reference(
        str(path), PlanInputs(engine="llamacpp", gpu_memory_bytes=4 << 30, max_model_len=1024)
    )
    shape = bundled_shape("llama-3.1-8b")  # any llama; only its graph widths differ
    dims = GraphDims(arch="llama", n_embd=512, n_ff=1024, n_vocab=640)
    two = replace(shape, layers=(replace(shape.layers[0], kv_heads=2, k_dim=64, v_dim=64),) * 2,
                  num_attention_heads=8, graph_dims=dims)  # fmt: skip
    expected, _ = LLAMACPP.compute_buffer(
        EngineRequest(model=two, max_model_len=1024, available_kv_bytes=0)
    )
    assert expected is not None and p.memory.activation_bytes == expected.bytes > 0


#: quantized caches: llama.cpp rotates Q/K (a head-wide Hadamard matrix) and V (64 × 64) —
#: (model, layers, widths, cache type, options, llama.cpp's four-decimal figure), printed by 0c1e570
QUANTIZED = [
    ("llama-3.1-8b", 2, (64, 64, 384), "q8_0", {"n_ctx": 512}, "16.9668"),
    ("llama-3.1-8b", 2, (64, 64, 384), "q8_0", {"n_ctx": 512, "type_v": "f16", "flash_attn": "off"}, "45.5723"),
    ("llama-3.1-8b", 2, (64, 64, 384), "q4_0", {"n_ctx": 1024, "n_seq_max": 2}, "16.9668"),
    ("qwen3-8b", 2, (128, 256, 1000), "q8_0", {"n_ctx": 512}, "17.3418"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "layers", "widths", "dtype", "extra", "printed"), QUANTIZED)
def test_quantized_caches_add_the_rotations(model, layers, widths, dtype, extra, printed):
    r = replace(request(model, layers, widths, **extra), kv_cache_dtype=dtype)
    buffer, why = LLAMACPP.compute_buffer(r)
    assert buffer is not None, why
    assert f"{buffer.bytes / 2**20:.4f}" == printed


#: Gemma-2 and Gemma-3: two caches (llama_kv_cache_iswa), their own graphs — (model, layers,
#: widths, cache type, options, llama.cpp's four-decimal figure), printed by 0c1e570. Gemma-2's
#: window is 4,096 (one SWA cache of PAD(min(n_ctx, 4,096 + 512), 256) cells), Gemma-3-1B's 512;
#: 7 Gemma-3 layers are 5 sliding, 1 full, 1 sliding
GEMMA = [
    ("gemma-2-9b-it", 2, (64, 64, 384), "auto", {"n_ctx": 512}, "17.3965"),
    ("gemma-2-9b-it", 2, (64, 64, 384), "auto", {"n_ctx": 512, "flash_attn": "off"}, "50.3887"),
    ("gemma-2-9b-it", 4, (64, 64, 384), "auto", {"n_ctx": 8192}, "29.0215"),
    ("gemma-2-9b-it", 2, (64, 64, 384), "auto", {"n_ctx": 8192, "flash_attn": "off"}, "297.1387"),
    ("gemma-2-9b-it", 2, (128, 256, 1000), "q8_0", {"n_ctx": 1024}, "23.3027"),
    ("gemma-2-9b-it", 2, (128, 256, 1000), "auto", {"n_ctx": 1024, "n_seq_max": 2}, "17.7715"),
    ("gemma-3-1b-it", 7, (64, 64, 384), "auto", {"n_ctx": 512}, "5.5215"),
    ("gemma-3-1b-it", 7, (64, 64, 384), "auto", {"n_ctx": 2000, "n_seq_max": 3}, "6.0334"),
    ("gemma-3-1b-it", 7, (64, 64, 384), "auto", {"n_ctx": 2000, "n_seq_max": 3, "kv_unified": True, "flash_attn": "off"}, "30.5734"),
    ("gemma-3-1b-it", 6, (64, 64, 384), "q8_0", {"n_ctx": 1000, "swa_full": True}, "7.0527"),
    ("gemma-3-1b-it", 7, (64, 64, 384), "auto", {"n_ctx": 4096, "flash_attn": "off"}, "48.5137"),
    ("gemma-3-1b-it", 7, (256, 1024, 5000), "auto", {"n_ctx": 1024, "n_ubatch": 128, "n_batch": 300}, "2.8169"),
    ("gemma-3-1b-it", 7, (64, 64, 384), "q8_0", {"n_ctx": 1024, "type_v": "f16", "flash_attn": "off"}, "17.0137"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "layers", "widths", "dtype", "extra", "printed"), GEMMA)
def test_gemma_graphs_with_two_caches(model, layers, widths, dtype, extra, printed):
    r = replace(request(model, layers, widths, **extra), kv_cache_dtype=dtype)
    buffer, why = LLAMACPP.compute_buffer(r)
    assert buffer is not None, why
    assert f"{buffer.bytes / 2**20:.4f}" == printed


def moe_request(model: str, layers: int, dtype: str = "auto", **extra) -> EngineRequest:
    """As ``verify --run`` writes a MoE model with its own widths (``model_widths``): every
    width the config's, the vocabulary 384; the graph widths are the ones kvcalc reads from the
    config, as llama.cpp's converter would write them."""
    from helpers import fixture_config

    from kvcalc.engines.llamacpp.compute import dims_for
    from kvcalc.hfconfig import parse_config

    if "--" in model:  # a config kept as test data, of a family kvcalc has not verified
        shape = parse_config(fixture_config(model), name=model, trust_layout=True)
    else:
        shape = bundled_shape(model)
    shape = replace(shape, layers=shape.layers[:layers])
    dims = dims_for(shape)
    assert dims is not None
    extra.setdefault("n_ctx", 512)
    return EngineRequest(model=replace(shape, graph_dims=replace(dims, n_vocab=384)),
                         max_model_len=extra["n_ctx"], available_kv_bytes=1 << 50, kv_cache_dtype=dtype,
                         extra={**extra, "buffer_name": "CPU"})  # fmt: skip


QWEN2MOE = "Qwen--Qwen1.5-MoE-A2.7B-Chat"
#: MoE graphs at the configs' own widths, 2 layers, vocabulary 384: (model, cache type, options,
#: llama.cpp 0c1e570's four-decimal ``CPU compute buffer size``), printed by ``verify --run``
RECORDED_MOE = [
    ("qwen3-30b-a3b", "auto", {"n_ctx": 256}, "44.1318"),
    ("qwen3-30b-a3b", "auto", {"flash_attn": "off"}, "87.0098"),
    ("qwen3-30b-a3b", "auto", {"n_ctx": 1024, "n_seq_max": 2}, "88.5137"),
    ("qwen3-30b-a3b", "auto", {"n_ctx": 1024, "n_seq_max": 3, "kv_unified": True, "flash_attn": "off"}, "96.1974"),
    ("qwen3-30b-a3b", "auto", {"n_ctx": 600, "n_ubatch": 128, "n_batch": 300}, "22.1909"),
    ("qwen3-30b-a3b", "q8_0", {}, "88.5918"),
    (QWEN2MOE, "auto", {}, "49.5137"),
    (QWEN2MOE, "auto", {"flash_attn": "off", "n_seq_max": 2}, "57.5098"),
    (QWEN2MOE, "q8_0", {"n_ctx": 768}, "55.0840"),
    ("mixtral-8x7b-v0.1", "auto", {}, "200.5137"),
    ("mixtral-8x7b-v0.1", "auto", {"n_ctx": 1024, "flash_attn": "off", "n_seq_max": 2, "kv_unified": True}, "206.0098"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "dtype", "extra", "printed"), RECORDED_MOE)
def test_moe_compute_buffer_equals_what_llama_cpp_printed(model, dtype, extra, printed):
    buffer, why = LLAMACPP.compute_buffer(moe_request(model, 2, dtype, **extra))
    assert buffer is not None, why
    assert f"{buffer.bytes / 2**20:.4f}" == printed


def test_the_sliding_cache_sizes_the_sliding_layers_kq():
    # without flash attention each layer holds KQ: cells × 512 tokens × 16 heads × 4 B; 8,192 cells
    # in the full cache, PAD(min(8,192, 4,096 + 512), 256) = 4,608 in the sliding one
    full_kq, swa_kq = 8192 * 512 * 16 * 4, 4608 * 512 * 16 * 4
    buffer, _ = LLAMACPP.compute_buffer(
        request("gemma-2-9b-it", 2, (64, 64, 384), n_ctx=8192, flash_attn="off")
    )
    assert buffer is not None and buffer.bytes > full_kq > swa_kq
    full, _ = LLAMACPP.compute_buffer(
        request("gemma-2-9b-it", 2, (64, 64, 384), n_ctx=8192, flash_attn="off", swa_full=True)
    )
    assert full is not None and full.bytes >= buffer.bytes


def test_soft_capping_works_in_place():
    # Gemma-3 soft-caps its logits only when its file says so: scale, tanh and scale overwrite
    # the logits (one consumer each), so the buffer is the same either way
    r = request("gemma-3-1b-it", 7, (64, 64, 384), n_ctx=1024, flash_attn="off")
    dims = r.model.graph_dims
    capped = replace(r, model=replace(r.model, graph_dims=replace(dims, final_logit_softcap=True)))
    a, _ = LLAMACPP.compute_buffer(r)
    b, _ = LLAMACPP.compute_buffer(capped)
    assert a is not None and b is not None and a.bytes == b.bytes


def test_a_gemma_config_plans_its_compute_buffer():
    p = plan_reference(
        "gemma-3-1b-it", PlanInputs(engine="llamacpp", gpu="h100", max_model_len=8192)
    )
    assert p.memory.activation_bytes > 0
    assert not any(n.startswith("compute buffer not modelled") for n in p.notes)
    assert any("not confirmed" in n for n in p.notes)


def test_every_layer_sliding_is_refused():
    shape = bundled_shape("gemma-3-1b-it")
    sliding = replace(shape, layers=shape.layers[:3])  # layers 0-2 all slide
    none, why = LLAMACPP.compute_buffer(
        EngineRequest(model=sliding, max_model_len=1024, available_kv_bytes=0)
    )
    assert none is None and "every layer slides" in why


@pytest.mark.parametrize(("arch", "softcap", "expected"), [("gemma3", 30.0, True), ("gemma3", None, False),
                                                           ("gemma2", 30.0, False)])  # fmt: skip
def test_a_gemma_gguf_says_whether_its_logits_are_soft_capped(tmp_path, arch, softcap, expected):
    from gguf import GGMLQuantizationType as Q
    from gguf_helpers import llama_keys, write_gguf

    from kvcalc.sources.gguf.files import read_local
    from kvcalc.sources.gguf.model import parse_gguf

    keys = {**llama_keys(arch, layers=2, heads=4, kv_heads=1, hidden=256, head_dim=64),
            f"{arch}.feed_forward_length": 512, f"{arch}.attention.sliding_window": 512}  # fmt: skip
    if softcap is not None:
        keys[f"{arch}.final_logit_softcapping"] = softcap
    path = write_gguf(tmp_path / "g.gguf", arch, keys, [("token_embd.weight", (300, 256), Q.F16)])
    model = read_local(path)
    dims = parse_gguf(model.metadata, name="g", where="g.gguf",
                      tensors={t.name: t.dims for t in model.tensors()}).graph_dims  # fmt: skip
    # Gemma-3 reads the key; Gemma-2 soft-caps whatever it says, so the flag is Gemma-3's alone
    assert dims is not None and dims.final_logit_softcap is expected
    assert dims.arch == arch and dims.n_vocab == 300


def test_the_experts_outputs_dominate_a_moe_graph():
    buffer, _ = LLAMACPP.compute_buffer(moe_request("mixtral-8x7b-v0.1", 2))
    assert buffer is not None and buffer.n_tokens == 512
    # the experts' up and gate outputs (14,336 · 2 experts · 512 tokens · 4 B = 56 MiB each) and
    # the weighted down projections (4,096 · 2 · 512 · 4 B = 16 MiB) are live at once
    assert buffer.bytes > 2 * 14336 * 2 * 512 * 4 + 4096 * 2 * 512 * 4


def test_a_moe_plan_carries_its_compute_buffer():
    p = plan_reference(
        "qwen3-30b-a3b", PlanInputs(engine="llamacpp", gpu="h100", max_model_len=8192)
    )
    assert p.memory.activation_bytes > 0
    assert not any("compute buffer not modelled" in n for n in p.notes)


def test_moe_graphs_llama_cpp_would_build_otherwise_are_refused():
    r = moe_request("qwen3-30b-a3b", 2)
    dims = r.model.graph_dims
    assert dims is not None and LLAMACPP.compute_buffer(r)[0] is not None

    def why(**changes) -> str:
        model = replace(r.model, graph_dims=replace(dims, **changes))
        buffer, reason = LLAMACPP.compute_buffer(replace(r, model=model))
        assert buffer is None
        return reason

    assert "shared experts in a qwen3moe graph" in why(shared_expert=True)
    assert "shared experts in a llama graph" in why(arch="llama", shared_expert=True)  # Granite
    assert "without experts" in why(n_expert=0)


def deepseek_request(layers: int, dtype: str = "auto", **extra) -> EngineRequest:
    """DeepSeek-V2-Lite as ``verify --run`` writes it at its own widths (vocabulary 384): MLA with
    192-wide Q heads (128 + 64 RoPE), 128-wide V heads, no Q LoRA; layer 0 dense (10,944), then 64
    experts of 1,408, 6 per token, and 2 shared ones."""
    from helpers import deepseek_v2_lite_shape

    shape = deepseek_v2_lite_shape()
    dims = GraphDims(arch="deepseek2", n_embd=2048, n_ff=10944, n_vocab=384, n_expert=64,
                     n_expert_used=6, n_ff_exp=1408, n_expert_shared=2, n_layer_dense_lead=1,
                     head_k_mla=192, head_v_mla=128)  # fmt: skip
    extra.setdefault("n_ctx", 512)
    return EngineRequest(model=replace(shape, layers=shape.layers[:layers], graph_dims=dims),
                         max_model_len=extra["n_ctx"], available_kv_bytes=1 << 50, kv_cache_dtype=dtype,
                         extra={**extra, "buffer_name": "CPU"})  # fmt: skip


#: DeepSeek-V2-Lite's deepseek2 graph (MLA, a dense layer, experts with shared ones): (layers, cache
#: type, options, llama.cpp 0c1e570's four-decimal figure), printed by ``verify --run``
RECORDED_DEEPSEEK2 = [
    (2, "auto", {}, "80.6348"),
    (2, "auto", {"flash_attn": "off"}, "77.1348"),
    (2, "auto", {"n_ctx": 1024, "n_seq_max": 2}, "80.6348"),
    (2, "auto", {"n_ctx": 1024, "n_seq_max": 3, "kv_unified": True, "flash_attn": "off"}, "88.1817"),
    (2, "q8_0", {}, "80.6348"),
    (3, "auto", {"n_ctx": 300, "n_ubatch": 128}, "20.1587"),
]  # fmt: skip


@pytest.mark.parametrize(("layers", "dtype", "extra", "printed"), RECORDED_DEEPSEEK2)
def test_deepseek2_compute_buffer_equals_what_llama_cpp_printed(layers, dtype, extra, printed):
    buffer, why = LLAMACPP.compute_buffer(deepseek_request(layers, dtype, **extra))
    assert buffer is not None, why
    assert f"{buffer.bytes / 2**20:.4f}" == printed


def oss_request(
    model: str, layers: int, widths: tuple[int, int, int, int], **extra
) -> EngineRequest:
    """gpt-oss as ``verify --run`` writes it: the file's graph widths as kvcalc reads them back."""
    shape = bundled_shape(model)
    hidden, ffn, vocab, expert_ffn = widths
    moe = shape.weights.moe
    dims = GraphDims(arch="gpt-oss", n_embd=hidden, n_ff=ffn, n_vocab=vocab, n_expert=moe.num_experts,
                     n_expert_used=moe.experts_per_token, n_ff_exp=expert_ffn, qkv_bias=True,
                     unmodelled_tensors=("attn_output.bias",))  # fmt: skip
    extra.setdefault("n_ctx", 64)
    return EngineRequest(model=replace(shape, layers=shape.layers[:layers], graph_dims=dims),
                         max_model_len=extra["n_ctx"], available_kv_bytes=1 << 50,
                         extra={**extra, "buffer_name": "CPU"})  # fmt: skip


#: gpt-oss: two caches (window 128: PAD(min(n_ctx, 128 + 512), 256) = 768 SWA cells), sinks,
#: biases, 32 (120B: 128) experts of which 4 are used — (model, layers, (embedding, MLP, vocabulary,
#: expert MLP), cache type, options, llama.cpp's four-decimal figure), printed by 0c1e570
GPT_OSS = [
    ("gpt-oss-20b", 2, (64, 64, 384, 32), "auto", {"n_ctx": 512}, "17.3965"),
    ("gpt-oss-20b", 2, (64, 64, 384, 32), "auto", {"n_ctx": 512, "flash_attn": "off"}, "86.3887"),
    ("gpt-oss-20b", 2, (256, 64, 5000, 512), "auto", {"n_ctx": 2048}, "21.7715"),
    ("gpt-oss-20b", 2, (256, 64, 5000, 512), "auto", {"n_ctx": 2048, "flash_attn": "off"}, "282.0137"),
    ("gpt-oss-20b", 3, (64, 64, 384, 32), "auto", {"n_ctx": 2000, "n_seq_max": 3}, "17.9316"),
    ("gpt-oss-20b", 2, (64, 64, 384, 32), "auto", {"n_ctx": 1024, "n_seq_max": 2, "kv_unified": True, "flash_attn": "off"}, "151.6387"),
    ("gpt-oss-20b", 2, (64, 64, 384, 32), "q8_0", {"n_ctx": 1024}, "18.2090"),
    ("gpt-oss-20b", 2, (64, 64, 384, 32), "q8_0", {"n_ctx": 1024, "swa_full": True}, "18.4590"),
    ("gpt-oss-20b", 4, (128, 64, 1000, 256), "auto", {"n_ctx": 1024, "n_ubatch": 128, "n_batch": 300}, "6.2866"),
    ("gpt-oss-120b", 2, (64, 64, 384, 32), "q8_0", {"n_ctx": 1024, "type_v": "f16", "flash_attn": "off"}, "143.6699"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "layers", "widths", "dtype", "extra", "printed"), GPT_OSS)
def test_gpt_oss_graphs(model, layers, widths, dtype, extra, printed):
    r = replace(oss_request(model, layers, widths, **extra), kv_cache_dtype=dtype)
    buffer, why = LLAMACPP.compute_buffer(r)
    assert buffer is not None, why
    assert f"{buffer.bytes / 2**20:.4f}" == printed


def test_the_outputs_are_counted_before_the_tokens_are_rounded_to_the_sequences():
    # 3 sequences: a 513-token graph (512 rounded up to a multiple of 3) with 512 outputs,
    # min(n_ubatch, n_batch): one output row fewer than tokens; llama.cpp printed 88.1817 MiB
    r = deepseek_request(2, n_ctx=1024, n_seq_max=3, kv_unified=True, flash_attn="off")
    buffer, _ = LLAMACPP.compute_buffer(r)
    assert buffer is not None and buffer.n_tokens == 513 and buffer.bytes == 92_465_248


def test_deepseek2_graphs_it_does_not_rebuild_are_refused():
    r = deepseek_request(2)
    dims = r.model.graph_dims
    assert dims is not None

    def why(**changes) -> str:
        model = replace(r.model, graph_dims=replace(dims, **changes))
        buffer, reason = LLAMACPP.compute_buffer(replace(r, model=model))
        assert buffer is None
        return reason

    assert "attn_kv_b" in why(head_k_mla=0, head_v_mla=0)  # a legacy file: MHA over attn_kv_b
    assert "expert groups" in why(
        n_expert_groups=8, n_group_used=8
    )  # llama.cpp asserts used < groups
    assert "without shared experts" in why(n_expert_shared=0)


def test_a_gpt_oss_config_plans_its_compute_buffer():
    p = plan_reference("gpt-oss-20b", PlanInputs(engine="llamacpp", gpu="h100", max_model_len=8192))
    assert p.memory.activation_bytes > 0
    assert not any(n.startswith("compute buffer not modelled") for n in p.notes)


def test_sliding_window_graphs_refuse_what_their_architecture_lacks():
    gemma = request("gemma-2-9b-it", 2, (64, 64, 384), n_ctx=512)
    dims = gemma.model.graph_dims
    moe = replace(
        gemma, model=replace(gemma.model, graph_dims=replace(dims, n_expert=8, n_expert_used=2))
    )
    assert "experts in a gemma2 graph" in LLAMACPP.compute_buffer(moe)[1]
    oss = oss_request("gpt-oss-20b", 2, (64, 64, 384, 32), n_ctx=512)
    dense = replace(
        oss, model=replace(oss.model, graph_dims=replace(oss.model.graph_dims, n_expert=0))
    )
    assert "gpt-oss model without experts" in LLAMACPP.compute_buffer(dense)[1]
    # gemma's graph has no output-projection bias node: a file with one is not modelled
    biased = replace(gemma, model=replace(gemma.model, graph_dims=replace(
        dims, unmodelled_tensors=("attn_output.bias",))))  # fmt: skip
    assert "attn_output.bias" in LLAMACPP.compute_buffer(biased)[1]


def v3_request(**extra) -> EngineRequest:
    """DeepSeek-V3 cut to 4 layers (3 dense, 1 with 256 experts) as ``verify --run`` wrote it:
    its Q LoRA, MLA and router (sigmoid, 8 groups of which 4 kept, a selection bias, normalised,
    ×2.5), a 64-wide embedding and dense MLP, 16,384-wide experts (so the experts' block holds the
    peak), vocabulary 384."""
    from kvcalc.engines.llamacpp.compute import dims_for

    shape = bundled_shape("deepseek-v3")
    shape = replace(shape, layers=shape.layers[:4])
    dims = replace(dims_for(shape), n_embd=64, n_ff=64, n_vocab=384, n_ff_exp=16384)
    return EngineRequest(model=replace(shape, graph_dims=dims), max_model_len=256,
                         available_kv_bytes=1 << 50, extra={"n_ctx": 256, **extra, "buffer_name": "CPU"})  # fmt: skip


@pytest.mark.parametrize(("n_ubatch", "printed"), [(256, "384.8174"), (64, "96.2043")])
def test_deepseek_v3_routing_equals_what_llama_cpp_printed(n_ubatch, printed):
    buffer, why = LLAMACPP.compute_buffer(v3_request(n_ubatch=n_ubatch))
    assert buffer is not None, why
    assert f"{buffer.bytes / 2**20:.4f}" == printed


def test_the_v3_case_tells_the_routing_apart():
    # the group-limited routing and the selection bias each change the figure llama.cpp matched:
    # 403,510,272 B; without groups 403,772,416 B, without the bias 403,903,488 B
    r = v3_request(n_ubatch=256)
    dims = r.model.graph_dims
    sizes = []
    for changes in ({}, {"n_expert_groups": 1}, {"expert_probs_bias": False}):
        model = replace(r.model, graph_dims=replace(dims, **changes))
        buffer, _ = LLAMACPP.compute_buffer(replace(r, model=model))
        assert buffer is not None
        sizes.append(buffer.bytes)
    assert sizes == [403_510_272, 403_772_416, 403_903_488]


def test_a_deepseek_config_plans_its_compute_buffer():
    p = plan_reference("deepseek-v3", PlanInputs(engine="llamacpp", gpu="h200", max_model_len=8192))
    assert p.memory.activation_bytes > 0
    assert not any("compute buffer not modelled" in n for n in p.notes)


def test_fused_gate_up_experts_are_not_modelled(tmp_path):
    # convert_hf_to_gguf.py --fuse-gate-up-exps writes one ffn_gate_up_exps per layer, which
    # deepseek2's loader takes instead of ffn_gate_exps/ffn_up_exps (one mul_mat_id, two views)
    from gguf import GGMLQuantizationType as Q
    from gguf_helpers import llama_keys, write_gguf

    from kvcalc.sources.gguf.files import read_local
    from kvcalc.sources.gguf.model import parse_gguf

    keys = {**llama_keys("qwen3moe", layers=2, heads=4, kv_heads=1, hidden=256, head_dim=64),
            "qwen3moe.feed_forward_length": 512, "qwen3moe.expert_count": 8,
            "qwen3moe.expert_used_count": 2}  # fmt: skip
    tensors = [
        ("token_embd.weight", (300, 256), Q.F16),
        ("blk.0.ffn_gate_up_exps.weight", (8, 64, 256), Q.F16),
    ]
    model = read_local(write_gguf(tmp_path / "f.gguf", "qwen3moe", keys, tensors))
    shape = parse_gguf(model.metadata, name="f", where="f.gguf",
                       tensors={t.name: t.dims for t in model.tensors()})  # fmt: skip
    none, why = LLAMACPP.compute_buffer(
        EngineRequest(model=shape, max_model_len=512, available_kv_bytes=0)
    )
    assert none is None and "ffn_gate_up_exps.weight" in why
