"""``verify --engine llamacpp --run``: llama.cpp (its Python binding, CPU) loads a GGUF in the
model's layout; its own log lines and row bytes are compared with the ``llamacpp`` engine."""

from __future__ import annotations

from dataclasses import replace

import pytest
from gguf import GGMLQuantizationType as Q
from gguf_helpers import llama_keys, write_gguf
from helpers import assert_clean

from kvcalc.engines.base import EngineRequest
from kvcalc.errors import KvcalcError
from kvcalc.verify.check import verify
from kvcalc.verify.spec import VerifyOptions

pytestmark = pytest.mark.llamacpp


def run(model: str, layers: int | None, dtype: str = "auto", **extra):
    opts = VerifyOptions(
        engine="llamacpp", kv_cache_dtype=dtype, engine_options=tuple(extra.items())
    )
    result = verify(model, opts, layers=layers, run=True)
    assert result.llamacpp is not None
    assert result.llamacpp.measured_lines == result.llamacpp.predicted_lines
    assert result.measured_bytes == result.predicted_bytes and result.passed
    assert result.llamacpp.compute_match
    return result


def test_gqa_llama_prints_what_kvcalc_predicts():
    r = run("llama-3.1-8b", 3, n_ctx=2048)
    # 2,048 cells · 3 layers · 8 KV heads · 128 · 2 B · 2 = 24 MiB
    assert r.measured_bytes == 2048 * 3 * 8 * 128 * 2 * 2 == 25_165_824
    assert r.llamacpp.measured_lines[-1] == (
        "llama_kv_cache: size =   24.00 MiB (  2048 cells,   3 layers,  1/1 seqs), "
        "K (f16):   12.00 MiB, V (f16):   12.00 MiB"
    )
    assert r.llamacpp.architecture == "llama"


def test_qwen3_and_its_head_width():
    r = run("qwen3-8b", 2)
    # 64 tokens asked → 256 cells; 2 layers · 8 · 128 · 2 · 2 B · 256 = 2 MiB
    assert r.llamacpp.architecture == "qwen3" and r.measured_bytes == 2 * 4096 * 256


def test_gemma2_sliding_window_cache():
    r = run("gemma-2-9b-it", 4, n_ctx=8192)
    # 2 full layers · 8,192 cells and 2 sliding (window 4,096): PAD(min(8,192, 4,096 + 512), 256)
    # = 4,608 cells; 8 KV heads · 256 · 2 · 2 B = 8,192 B per layer per cell
    assert r.measured_bytes == 2 * 8192 * 8192 + 2 * 4608 * 8192
    assert (
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 4608 cells"
        in r.llamacpp.measured_lines
    )


def test_gemma3_streams_and_unified():
    separate = run("gemma-3-1b-it", 7, n_ctx=2000, n_seq_max=3)
    assert separate.llamacpp.measured_lines[0] == (
        "llama_context: n_ctx is not divisible by n_seq_max - rounding down to 2304"
    )
    unified = run("gemma-3-1b-it", 7, n_ctx=2000, n_seq_max=3, kv_unified=True)
    # one stream of 2,048 cells; SWA PAD(min(2,048, 512 · 3 + 512), 256) = 2,048
    assert (
        "llama_kv_cache: size =    2.00 MiB (  2048 cells,   1 layers,  3/1 seqs), K (f16):    1.00 MiB, V (f16):    1.00 MiB"
        in unified.llamacpp.measured_lines
    )


def test_swa_full_and_q8_0():
    r = run("gemma-3-1b-it", 6, "q8_0", n_ctx=1000, swa_full=True)
    assert any(
        line.startswith("llama_kv_cache_iswa: using full-size SWA cache")
        for line in r.llamacpp.measured_lines
    )


def test_moe():
    r = run("qwen3-30b-a3b", 2, "q8_0")
    assert r.llamacpp.architecture == "qwen3moe"
    # 4 KV heads · 128 = 512 values = 16 blocks · 34 B = 544 B per side; 2 layers · 256 cells
    assert r.measured_bytes == 2 * 2 * 544 * 256
    assert run("mixtral-8x7b-v0.1", 2).llamacpp.architecture == "llama"


@pytest.mark.parametrize(
    ("dtype", "block_bytes"),
    [("q4_0", 18), ("q4_1", 20), ("iq4_nl", 18), ("q5_0", 22), ("q5_1", 24)],
)
def test_four_and_five_bit_cache_types(dtype, block_bytes):
    r = run("llama-3.1-8b", 2, dtype, n_seq_max=2, n_ctx=600)
    # 2 streams of PAD(768 / 2, 256) = 512 cells... n_ctx PAD(600) = 768 → n_ctx_seq PAD(384) = 512
    assert r.measured_bytes == 2 * 512 * 2 * 2 * (1024 // 32) * block_bytes
    assert r.llamacpp.measured_lines[0].startswith("llama_init_from_model: enabling flash_attn")


def test_quantized_v_without_flash_attention_is_refused_by_llama_cpp_too():
    # kvcalc refuses it ...
    with pytest.raises(KvcalcError) as err:
        run("llama-3.1-8b", 2, "q4_0", flash_attn="off")
    assert err.value.code == "unsupported-dtype"
    # ... and so does llama.cpp, asked directly with the same parameters
    from pathlib import Path
    from tempfile import TemporaryDirectory

    from helpers import bundled_shape

    from kvcalc.verify.llamacpp import run as R
    from kvcalc.verify.llamacpp.gguf import spec_for, write_model

    model = bundled_shape("llama-3.1-8b")
    request = EngineRequest(model=model, max_model_len=256, available_kv_bytes=1 << 40,
                            extra={"n_ctx": 256, "flash_attn": "off"})  # fmt: skip
    with TemporaryDirectory() as tmp:
        from dataclasses import replace

        path = write_model(replace(spec_for(model), num_layers=2), Path(tmp) / "m.gguf")
        with pytest.raises(KvcalcError) as refused:
            R._run(R.import_binding(), path, request, None, "q4_0", "q4_0")
    assert "refused the context" in refused.value.message


@pytest.mark.parametrize(
    ("model", "layers", "widths", "extra"),
    [
        ("llama-3.1-8b", 3, (512, 3000, 20000), {"n_ctx": 600, "n_ubatch": 128, "n_batch": 300}),
        ("llama-3.1-8b", 2, (128, 512, 1000), {"n_ctx": 2048, "n_seq_max": 3, "flash_attn": "off"}),
        ("qwen3-8b", 2, (96, 200, 700), {"n_ctx": 512, "n_seq_max": 2, "kv_unified": True}),
        ("qwen2.5-1.5b", 2, (0, 300, 800), {"n_ctx": 300, "flash_attn": "off"}),
    ],
)
def test_compute_buffer_equals_llama_cpp_s_own(model, layers, widths, extra):
    from helpers import bundled_shape

    from kvcalc.verify.llamacpp.gguf import GgufWidths
    from kvcalc.verify.llamacpp.run import verify_run_llamacpp

    shape = bundled_shape(model)
    shape = replace(shape, layers=shape.layers[:layers])
    opts = VerifyOptions(engine="llamacpp", engine_options=tuple(extra.items()))
    hidden, ffn, vocab = widths  # qwen2's embedding is its heads' width, whatever is asked
    r = verify_run_llamacpp(
        shape, opts, tolerance=0.0, widths=GgufWidths(hidden=hidden or 64, ffn=ffn, vocab=vocab)
    )
    run = r.llamacpp
    assert run is not None and run.compute_match and r.passed
    # llama.cpp's INFO line (two decimals) and its four-decimal figure when the context is freed
    assert run.compute_lines == run.predicted_compute_lines
    assert run.measured_compute_mib == run.predicted_compute_mib != ""
    assert run.predicted_compute_bytes is not None and run.predicted_compute_bytes % 32 == 0


QWEN2MOE = "Qwen--Qwen1.5-MoE-A2.7B-Chat"


@pytest.mark.parametrize(
    ("model", "dtype", "extra"),
    [
        ("qwen3-30b-a3b", "auto", {"n_ctx": 1024, "n_seq_max": 3, "kv_unified": True, "flash_attn": "off"}),
        ("qwen3-30b-a3b", "q8_0", {"n_ctx": 512}),
        (QWEN2MOE, "auto", {"n_ctx": 512, "flash_attn": "off", "n_seq_max": 2}),
        ("mixtral-8x7b-v0.1", "auto", {"n_ctx": 512}),
    ],
)  # fmt: skip
def test_moe_compute_buffer_at_the_model_s_own_widths(model, dtype, extra, tmp_path):
    """Every width the config's (the experts' gigabytes are holes in a sparse file), 2 layers."""
    from helpers import bundled_shape, fixture_config

    from kvcalc.engines.llamacpp.compute import dims_for
    from kvcalc.hfconfig import parse_config
    from kvcalc.verify.llamacpp.gguf import model_widths, spec_for, write_model
    from kvcalc.verify.llamacpp.run import _read_back, verify_run_llamacpp

    if "--" in model:  # kept as test data: a family kvcalc has not verified for the other engines
        shape = parse_config(fixture_config(model), name=model, trust_layout=True)
    else:
        shape = bundled_shape(model)
    shape = replace(shape, layers=shape.layers[:2])
    widths = model_widths(shape)
    # the file's graph widths, read back, are the ones kvcalc reads from the config (bar the vocabulary)
    written = _read_back(write_model(spec_for(shape, widths), tmp_path / "m.gguf"))
    assert written == replace(dims_for(shape), n_vocab=384)
    opts = VerifyOptions(
        engine="llamacpp", kv_cache_dtype=dtype, engine_options=tuple(extra.items())
    )
    r = verify_run_llamacpp(shape, opts, tolerance=0.0, widths=widths)
    run = r.llamacpp
    assert run is not None and run.compute_match and r.passed
    assert run.compute_lines == run.predicted_compute_lines
    assert run.measured_compute_mib == run.predicted_compute_mib != ""


@pytest.mark.parametrize(
    ("model", "layers", "dtype", "extra"),
    [
        ("gemma-2-9b-it", 2, "auto", {"n_ctx": 512, "flash_attn": "off"}),
        ("gemma-2-9b-it", 4, "auto", {"n_ctx": 8192}),
        ("gemma-2-9b-it", 2, "q8_0", {"n_ctx": 1024, "n_seq_max": 2}),
        ("gemma-3-1b-it", 7, "auto", {"n_ctx": 2000, "n_seq_max": 3, "kv_unified": True, "flash_attn": "off"}),
        ("gemma-3-1b-it", 6, "q8_0", {"n_ctx": 1000, "swa_full": True}),
        ("gpt-oss-20b", 2, "auto", {"n_ctx": 512, "flash_attn": "off"}),
        ("gpt-oss-20b", 3, "auto", {"n_ctx": 2000, "n_seq_max": 3}),
        ("gpt-oss-20b", 2, "q8_0", {"n_ctx": 1024, "swa_full": True}),
    ],
)  # fmt: skip
def test_sliding_window_compute_buffer_equals_llama_cpp_s_own(model, layers, dtype, extra):
    r = run(model, layers, dtype, **extra)
    run_ = r.llamacpp
    assert run_.architecture == {"gemma-2-9b-it": "gemma2", "gemma-3-1b-it": "gemma3",
                                 "gpt-oss-20b": "gpt-oss"}[model]  # fmt: skip
    assert run_.compute_lines == run_.predicted_compute_lines != ()
    assert run_.measured_compute_mib == run_.predicted_compute_mib != ""


@pytest.mark.parametrize(
    ("layers", "dtype", "extra"),
    [
        (2, "q8_0", {"n_ctx": 512}),
        (2, "auto", {"n_ctx": 1024, "n_seq_max": 3, "kv_unified": True, "flash_attn": "off"}),
        (3, "auto", {"n_ctx": 300, "n_ubatch": 128}),
    ],
)  # fmt: skip
def test_deepseek2_compute_buffer_at_the_model_s_own_widths(layers, dtype, extra, tmp_path):
    """DeepSeek-V2-Lite: MLA, layer 0 dense, then 64 experts (6 used) beside 2 shared ones."""
    from helpers import deepseek_v2_lite_shape

    from kvcalc.engines.llamacpp.compute import dims_for
    from kvcalc.verify.llamacpp.gguf import model_widths, spec_for, write_model
    from kvcalc.verify.llamacpp.run import _read_back, verify_run_llamacpp

    shape = deepseek_v2_lite_shape()
    shape = replace(shape, layers=shape.layers[:layers])
    widths = model_widths(shape)
    written = _read_back(write_model(spec_for(shape, widths), tmp_path / "m.gguf"))
    assert written is not None and written.arch == "deepseek2" and written.n_layer_dense_lead == 1
    assert written == replace(dims_for(shape), n_vocab=384)  # as kvcalc reads the config
    assert (written.n_expert, written.n_expert_used, written.n_ff_exp, written.n_expert_shared) == (
        64,
        6,
        1408,
        2,
    )
    assert (written.head_k_mla, written.head_v_mla, written.n_lora_q) == (192, 128, 0)
    opts = VerifyOptions(
        engine="llamacpp", kv_cache_dtype=dtype, engine_options=tuple(extra.items())
    )
    r = verify_run_llamacpp(shape, opts, tolerance=0.0, widths=widths)
    run = r.llamacpp
    assert run is not None and run.architecture == "deepseek2" and run.compute_match and r.passed
    assert run.compute_lines == run.predicted_compute_lines != ()
    assert run.measured_compute_mib == run.predicted_compute_mib != ""


def test_deepseek_v3_routing_and_q_lora(tmp_path):
    """DeepSeek-V3, 4 layers (3 dense, 1 MoE): its Q LoRA and its router — sigmoid, 8 expert groups
    of which 4 kept, a selection bias, normalised and scaled weights — written as the converter
    writes them and read back as kvcalc reads the config; 16,384-wide experts, the rest small."""
    from helpers import bundled_shape

    from kvcalc.engines.llamacpp.compute import dims_for
    from kvcalc.verify.llamacpp.gguf import GgufWidths, spec_for, write_model
    from kvcalc.verify.llamacpp.run import _read_back, verify_run_llamacpp

    shape = bundled_shape("deepseek-v3")
    shape = replace(shape, layers=shape.layers[:4])
    widths = GgufWidths(expert_ffn=16384, shared_ffn=16384)
    written = _read_back(write_model(spec_for(shape, widths), tmp_path / "m.gguf"))
    assert written == replace(dims_for(shape), n_embd=64, n_ff=64, n_vocab=384, n_ff_exp=16384)
    opts = VerifyOptions(engine="llamacpp", engine_options=(("n_ctx", 256), ("n_ubatch", 64)))
    r = verify_run_llamacpp(shape, opts, tolerance=0.0, widths=widths)
    run = r.llamacpp
    assert run is not None and run.compute_match and r.passed
    assert run.measured_compute_mib == run.predicted_compute_mib == "96.2043"


def test_a_compute_buffer_not_modelled_is_reported_not_predicted(tmp_path):
    keys = {**llama_keys("deci", layers=2, heads=8, kv_heads=("int32[]", (2, 4)), hidden=512,
                         head_dim=64), "deci.feed_forward_length": 256}  # fmt: skip
    path = write_gguf(tmp_path / "d.gguf", "deci", keys, [("token_embd.weight", (500, 512), Q.F16)])
    r = run(str(path), None, n_ctx=512)
    assert r.llamacpp.compute_lines and not r.llamacpp.predicted_compute_lines
    assert any(n.startswith("compute buffer not modelled (the deci graph") for n in r.notes)


def test_a_gguf_file_verifies(tmp_path):
    keys = {**llama_keys("qwen3", layers=3, heads=8, kv_heads=2, hidden=512, head_dim=128)}
    path = write_gguf(tmp_path / "q.gguf", "qwen3", keys, [("token_embd.weight", (32, 512), Q.F16)])
    r = run(str(path), None, "q8_0")
    assert r.llamacpp.architecture == "qwen3" and r.num_layers == 3


def test_cli_prints_llama_cpp_lines(cli):
    result = cli("verify", "llama-3.1-8b", "--engine", "llamacpp", "--run", "--layers", "2")
    assert_clean(result)
    assert result.exit_code == 0
    assert "printed (= predicted)" in result.stdout
    assert (
        "llama_kv_cache: size =    2.00 MiB (   256 cells,   2 layers,  1/1 seqs)" in result.stdout
    )


def test_the_binding_version_is_named_as_it_is():
    from kvcalc.verify.llamacpp.run import describe_binding

    assert describe_binding("0.3.36") == "0c1e570 (llama-cpp-python 0.3.36)"
    assert describe_binding("0.3.37") == "of llama-cpp-python 0.3.37"  # its llama.cpp is not known


def test_cli_plan_with_gguf_file_on_the_hub(tmp_path, monkeypatch, cli):
    from hubserver import serve_fake_hub

    hub_gen = serve_fake_hub(tmp_path, monkeypatch)
    hub = next(hub_gen)
    try:
        keys = llama_keys(layers=2, heads=8, kv_heads=2, hidden=512)
        body = write_gguf(
            tmp_path / "m.gguf", "llama", keys, [("token_embd.weight", (64, 512), Q.Q8_0)]
        ).read_bytes()
        hub.add("org/m-GGUF", {"m-Q8_0.gguf": body, "m-Q4_0.gguf": body})
        result = cli("plan", "org/m-GGUF", "--gguf-file", "m-Q8_0.gguf", "--engine", "llamacpp",
                     "--gpu-memory", "4GiB", "--max-model-len", "1024", "--json")  # fmt: skip
        assert_clean(result, json_output=True)
        # 2 layers · 2 heads · (64 + 64) · 2 B = 1,024 B per token; 1,024 cells
        assert result.json["kv_cache_bytes"] == 1024 * 1024
        assert result.json["weights_bytes"] == 64 * 16 * 34
    finally:
        hub_gen.close()


def mamba2_gguf(path, layers=24):
    a = "mamba2"  # Mamba-2 130M's shape: 768 wide, inner 1,536, state 128, one group, 24 heads
    keys = {f"{a}.block_count": layers, f"{a}.context_length": 1 << 20, f"{a}.embedding_length": 768,
            f"{a}.ssm.conv_kernel": 4, f"{a}.ssm.inner_size": 1536, f"{a}.ssm.state_size": 128,
            f"{a}.ssm.time_step_rank": 24, f"{a}.ssm.group_count": 1}  # fmt: skip
    return write_gguf(path, a, keys, [("token_embd.weight", (512, 768), Q.F16)])


@pytest.mark.parametrize("extra", [{"n_ctx": 512}, {"n_ctx": 1000, "n_seq_max": 3},
                                   {"n_ctx": 512, "n_seq_max": 2, "offload_kqv": False}])  # fmt: skip
def test_mamba2_recurrent_state(tmp_path, extra):
    r = run(str(mamba2_gguf(tmp_path / "m.gguf")), 2, **extra)
    cells = extra.get("n_seq_max", 1)  # one cell per sequence, whatever n_ctx is
    # R: 3 · (1,536 + 2 · 128) · 4 B = 21,504 B; S: 128 · 1,536 · 4 B = 786,432 B; 2 layers
    assert r.measured_bytes == cells * 2 * (21504 + 786432)
    assert [c.name for c in r.components] == ["recurrent R", "recurrent S"]
    size, r_mib, s_mib = {
        1: ("1.54", "0.04", "1.50"),
        2: ("3.08", "0.08", "3.00"),
        3: ("4.62", "0.12", "4.50"),
    }[cells]
    assert r.llamacpp.measured_lines[-1] == (
        f"llama_memory_recurrent: size =    {size} MiB (     {cells} cells,   2 layers,  {cells} seqs  0 rs_seq), "
        f"R (f32):    {r_mib} MiB, S (f32):    {s_mib} MiB, P (f32):    0.00 MiB"
    )
    # the Mamba-2 graph's compute buffer, predicted and printed (run() compares them)
    assert r.llamacpp.predicted_compute_mib == {1: "20.7168", 2: "21.5078", 3: "22.3378"}[cells]


@pytest.mark.parametrize("flash", ["on", "off"])
def test_per_layer_kv_heads_as_deci(tmp_path, flash):
    keys = {**llama_keys("deci", layers=3, heads=8, kv_heads=("int32[]", (2, 4, 1)), hidden=512,
                         head_dim=64), "deci.feed_forward_length": 256}  # fmt: skip
    path = write_gguf(tmp_path / "d.gguf", "deci", keys, [("token_embd.weight", (500, 512), Q.F16)])
    r = run(str(path), None, n_ctx=512, flash_attn=flash)
    assert r.llamacpp.architecture == "deci"
    if flash == "on":  # 512 cells · (2 + 4 + 1) heads · 64 · 2 B · (K + V)
        assert r.measured_bytes == 512 * 7 * 64 * 2 * 2 == 917_504
    else:  # a transposed V is padded to the widest layer: 4 · 64 in all 3 layers
        assert r.measured_bytes == 512 * 7 * 64 * 2 + 512 * 3 * 256 * 2 == 1_245_184
        assert r.llamacpp.measured_lines[3].endswith("padding V cache to 256")


@pytest.mark.parametrize(("dtype", "extra"), [("auto", {}), ("auto", {"flash_attn": "off", "n_seq_max": 2}),
                                             ("q8_0", {})])  # fmt: skip
def test_mla_as_deepseek2(dtype, extra):
    r = run("deepseek-v3", 2, dtype, n_ctx=512, **extra)
    assert r.llamacpp.architecture == "deepseek2"
    # no V tensor: 512 cells · 2 layers · (512 + 64) latent values, f16 2 B or q8_0 18 blocks · 34 B
    row = 576 * 2 if dtype == "auto" else 18 * 34
    assert r.measured_bytes == 512 * 2 * row
    assert r.llamacpp.measured_lines[-1].endswith(
        "V (%s):    0.00 MiB" % ("f16" if dtype == "auto" else "q8_0")
    )


@pytest.mark.parametrize("extra", [{"n_ctx": 512}, {"n_ctx": 1000, "n_seq_max": 3, "flash_attn": "off"},
                                   {"n_ctx": 1024, "n_seq_max": 2, "kv_unified": True}])  # fmt: skip
def test_nemotron_h_hybrid(extra):
    r = run("nvidia-nemotron-3-nano-30b-a3b-bf16", 6, **extra)  # M E M E M *: layer 5 attends
    assert r.llamacpp.architecture == "nemotron_h"
    seqs = extra.get("n_seq_max", 1)
    cells = {512: 512, 1000: 512, 1024: 1024}[extra["n_ctx"]]  # per stream
    streams = 1 if extra.get("kv_unified") else seqs
    # KV: 1 layer · 2 KV heads · 128 · 2 B · (K + V) per cell; state per sequence: 3 Mamba-2 layers
    # · (R 3 · (4,096 + 2 · 8 · 128) · 4 = 73,728 B + S 128 · 4,096 · 4 = 2,097,152 B)
    assert r.measured_bytes == cells * streams * 1024 + seqs * 3 * (73_728 + 2_097_152)
    assert [c.name for c in r.components] == ["full K", "full V", "recurrent R", "recurrent S"]
    assert r.llamacpp.measured_lines[-1].startswith(
        f"llama_memory_recurrent: size = {seqs * 6.21:7.2f} MiB (     {seqs} cells,   6 layers"
    )
    # the compute buffer, predicted and printed
    assert (
        r.llamacpp.predicted_compute_mib
        == {512: "53.1524", 1000: "61.0362", 1024: "53.7930"}[extra["n_ctx"]]
    )
    if extra.get("flash_attn") == "off":  # head_count_kv is 0 off the attention layer
        assert any(line.endswith("padding V cache to 256") for line in r.llamacpp.measured_lines)


def config_dir(tmp_path, name, **changes):
    import json

    from test_family_hybrids import CONFIGS

    (tmp_path / "config.json").write_text(json.dumps({**CONFIGS[name], **changes}))
    return str(tmp_path)


def test_granite_hybrid(tmp_path):
    # Granite-4.0-H's layout at 512 wide (its loader needs the Mamba inner width = 2 · n_embd):
    # 16 heads of 64, one group, state 256, conv 4; layer 1 attends with 2 KV heads of 64
    path = config_dir(tmp_path, "synthetic--granite-4.0-h-defaults", hidden_size=512, mamba_n_heads=16,
                      num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "mamba"],
                      num_attention_heads=8, num_key_value_heads=2)  # fmt: skip
    for extra, seqs, mib in (
        ({"n_ctx": 512}, 1, "16.5801"),
        ({"n_ctx": 1000, "n_seq_max": 2, "flash_attn": "off"}, 2, "19.6114"),
    ):
        r = run(path, None, **extra)
        assert r.llamacpp.architecture == "granitehybrid"
        assert r.llamacpp.predicted_compute_mib == mib  # the compute buffer, predicted and printed
        # 512 cells per stream · 2 · 64 · 2 B · 2; R 3 · (1,024 + 2 · 256) · 4 = 18,432 B and
        # S 256 · 1,024 · 4 = 1,048,576 B per sequence and Mamba layer
        assert r.measured_bytes == 512 * seqs * 512 + seqs * 3 * (18_432 + 1_048_576)


def test_granite_hybrid_without_rope(tmp_path, monkeypatch):
    from kvcalc.verify.llamacpp import gguf as llamacpp_gguf

    # Granite-4.0-H's converter writes rope.scaling.finetuned false ("nope"): no positions input
    keys = llamacpp_gguf.hybrid_keys
    monkeypatch.setattr(llamacpp_gguf, "hybrid_keys",
                        lambda spec: {**keys(spec), "rope.scaling.finetuned": False})  # fmt: skip
    path = config_dir(tmp_path, "synthetic--granite-4.0-h-defaults", hidden_size=512, mamba_n_heads=16,
                      num_hidden_layers=4, layer_types=["mamba", "attention", "mamba", "mamba"],
                      num_attention_heads=8, num_key_value_heads=2)  # fmt: skip
    r = run(path, None, n_ctx=512)
    # 2,048 B (the 512 positions · 4 B) below the RoPE graph's 16.5801 MiB
    assert r.llamacpp.predicted_compute_mib == "16.5782"


def test_jamba_mamba1_hybrid(tmp_path):
    # Jamba's layout at 256 wide (Mamba inner 2 · 256 = 512, state 16, conv 4; 4 heads of 64, 2 KV):
    # attention at layer 1 (offset 1, period 4), Mamba-1 elsewhere
    path = config_dir(tmp_path, "ai21labs--AI21-Jamba-1.5-Mini", hidden_size=256, num_attention_heads=4,
                      num_key_value_heads=2, num_hidden_layers=4, attn_layer_offset=1,
                      attn_layer_period=4, num_experts=1, mamba_dt_rank=16)  # fmt: skip
    r = run(path, None, n_ctx=1000, n_seq_max=3, flash_attn="off")
    assert r.llamacpp.architecture == "jamba"
    # KV 3 streams · 512 cells · 2 · 64 · 2 B · 2; per sequence and Mamba-1 layer R 3 · 512 · 4 =
    # 6,144 B (no groups), S 16 · 512 · 4 = 32,768 B
    assert r.measured_bytes == 3 * 512 * 512 + 3 * 3 * (6_144 + 32_768)
    assert any(line.endswith("padding V cache to 128") for line in r.llamacpp.measured_lines)


def test_falcon_h1_every_layer_in_both_caches(tmp_path):
    path = config_dir(tmp_path, "synthetic--falcon-h1-defaults")
    r = run(path, 2, n_ctx=512, n_seq_max=2)
    assert r.llamacpp.architecture == "falcon-h1"
    # both layers attend (8 KV heads of 128: 2 streams · 256 cells · 4,096 B) and hold a Mamba-2
    # state: R 3 · (1,024 + 2 · 256) · 4 = 18,432 B, S 256 · 1,024 · 4 = 1,048,576 B per sequence
    assert r.measured_bytes == 2 * 2 * 256 * 4096 + 2 * 2 * (18_432 + 1_048_576)
    assert [c.num_layers for c in r.components] == [2, 2, 2, 2]


def test_lfm2_short_convolutions(tmp_path):
    # LFM2's layout at 256 wide (the state is the embedding's width): attention at layer 2
    path = config_dir(tmp_path, "LiquidAI--LFM2-1.2B", hidden_size=256, conv_dim=256, conv_dim_out=256,
                      block_dim=256, num_attention_heads=4, num_heads=4, num_key_value_heads=2,
                      num_hidden_layers=4, full_attn_idxs=[2])  # fmt: skip
    r = run(path, None, n_ctx=512, flash_attn="off")
    assert r.llamacpp.architecture == "lfm2"
    # KV 512 · 2 · 64 · 2 B · 2; R (3 − 1) · 256 · 4 = 2,048 B per conv layer, no S state
    assert r.measured_bytes == 512 * 512 + 3 * 2_048
    assert r.llamacpp.measured_lines[-1].endswith("S (f32):    0.00 MiB, P (f32):    0.00 MiB")


@pytest.mark.parametrize(
    ("model", "arch"),
    [("qwen3-next-80b-a3b-thinking", "qwen3next"), ("qwen3.5-35b-a3b", "qwen35moe")],
)
def test_gated_deltanet_hybrids(model, arch):
    r = run(model, 4, n_ctx=1000, n_seq_max=2, flash_attn="off")
    assert r.llamacpp.architecture == arch
    # layer 3 attends (interval 4): 2 KV heads of 256 → 2 streams · 512 cells · 2,048 B; per
    # sequence and DeltaNet layer R 3 · (32 · 128 + 2 · 16 · 128) · 4 = 98,304 B,
    # S 128 · 32 · 128 · 4 = 2,097,152 B
    assert r.measured_bytes == 2 * 512 * 2048 + 2 * 3 * (98_304 + 2_097_152)


def test_dense_qwen35(tmp_path):
    import json

    from kvcalc.sources.bundled import find_bundled

    # Qwen3.5-35B-A3B's text layers without the experts: llama.cpp's dense qwen35
    text = dict(find_bundled("qwen3.5-35b-a3b").load()["text_config"])
    for key in ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                "shared_expert_intermediate_size", "mlp_only_layers"):  # fmt: skip
        text.pop(key, None)
    text |= {"model_type": "qwen3_5_text", "intermediate_size": 1024}
    (tmp_path / "config.json").write_text(json.dumps(text))
    r = run(str(tmp_path), 4, n_ctx=512)
    assert r.llamacpp.architecture == "qwen35"
    # one attention layer of 512 cells · 2,048 B; 3 DeltaNet layers as in Qwen3.5-35B-A3B
    assert r.measured_bytes == 512 * 2048 + 3 * (98_304 + 2_097_152)


@pytest.mark.parametrize(("extra", "swa_cells"), [({"n_ctx": 16384}, 8704),
                                                 ({"n_ctx": 16384, "n_seq_max": 2, "kv_unified": True}, 16384)])  # fmt: skip
def test_llama4_chunked_attention(extra, swa_cells):
    r = run("llama-4-scout-17b-16e-instruct", 4, **extra)
    assert r.llamacpp.architecture == "llama4"
    # layers 0–2 chunked, layer 3 full; 8 KV heads · 128 · 2 B · 2 = 4,096 B per cell and layer.
    # chunk cache: PAD(min(16,384, 8,192 · (unified ? 2 : 1) + 512), 256) cells
    assert r.measured_bytes == 16384 * 4096 + 3 * swa_cells * 4096
    assert [c.name for c in r.components] == ["full K", "full V", "chunked K", "chunked V"]
    assert f"llama_kv_cache_iswa: creating     SWA KV cache, size = {swa_cells} cells" in (
        r.llamacpp.measured_lines
    )
