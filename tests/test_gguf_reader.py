"""GGUF headers: files written by the ``gguf`` package, read back; malformed ones refused."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader
from gguf_helpers import llama_keys, write_gguf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcalc.errors import ConfigError, KvcalcError
from kvcalc.model.layouts import FullAttention, MLALatent, SlidingWindow
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.sources.gguf.files import read_local, shard_names, split_parts
from kvcalc.sources.gguf.header import Skipped, read_header
from kvcalc.sources.gguf.model import parse_gguf


def header_of(path: Path):
    with path.open("rb") as f:
        return read_header(f, size=path.stat().st_size, where=str(path))


def small_llama(path: Path, **kw) -> Path:
    keys = llama_keys(**kw)
    return write_gguf(path, "llama", keys, [("token_embd.weight", (32, 256), Q.F16)])


# -- reading what the gguf package writes -----------------------------------------------------
def test_header_matches_the_gguf_packages_own_reader(tmp_path):
    path = write_gguf(
        tmp_path / "m.gguf",
        "llama",
        {
            **llama_keys(),
            "tokenizer.ggml.tokens": [f"t{i}" for i in range(5000)],
            "general.name": "tiny",
            "llama.rope.freq_base": 10000.0,
        },  # fmt: skip
        [
            ("token_embd.weight", (5000, 256), Q.Q8_0),
            ("blk.0.attn_q.weight", (256, 256), Q.Q4_K),
            ("output_norm.weight", (256,), Q.F32),
            ("blk.0.ffn_down.weight", (512, 256), Q.IQ4_XS),
        ],  # fmt: skip
    )
    ours = header_of(path)
    theirs = GGUFReader(path)
    assert ours.data_offset == theirs.data_offset
    assert [(t.name, t.ggml_type, t.dims, t.offset, t.nbytes) for t in ours.tensors] == [
        (t.name, t.tensor_type.name, tuple(int(d) for d in t.shape), int(t.data_offset) - theirs.data_offset, int(t.n_bytes))
        for t in theirs.tensors
    ]  # fmt: skip
    assert ours.metadata["general.name"] == "tiny"
    assert ours.metadata["llama.block_count"] == 2
    # the 5,000-token vocabulary is skipped, not kept
    assert ours.metadata["tokenizer.ggml.tokens"] == Skipped("ARRAY[STRING]", 5000)


def test_exact_bytes_of_quantized_tensors(tmp_path):
    path = write_gguf(
        tmp_path / "q.gguf", "llama", llama_keys(),
        [("a", (2, 512), Q.Q4_K), ("b", (3, 64), Q.Q8_0), ("c", (1, 256), Q.IQ2_XXS),
         ("d", (4, 32), Q.Q5_1), ("e", (2, 256), Q.Q6_K), ("f", (10,), Q.F32)],
    )  # fmt: skip
    sizes = {t.name: t.nbytes for t in header_of(path).tensors}
    assert sizes == {
        "a": 2 * (512 // 256) * 144,  # Q4_K: 256 values in 144 B → 576
        "b": 3 * (64 // 32) * 34,  # Q8_0: 32 values in 34 B → 204
        "c": 66,  # IQ2_XXS: 256 values in 66 B
        "d": 4 * 24,  # Q5_1: 32 values in 24 B
        "e": 2 * 210,  # Q6_K: 256 values in 210 B
        "f": 40,
    }
    weights = read_local(path).weights(source="test")
    assert weights.by_dtype["Q4_K"].total_bytes == 576
    assert weights.by_dtype["Q4_K"].num_parameters == 1024
    assert weights.total_bytes == 576 + 204 + 66 + 96 + 420 + 40


def test_split_files_read_as_one_model(tmp_path):
    tensors = [(f"blk.{i}.attn_q.weight", (256, 256), Q.Q8_0) for i in range(5)]
    write_gguf(tmp_path / "m.gguf", "llama", llama_keys(), tensors, split_max_tensors=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert split_parts(names[1]) == ("m", 2, 3) and shard_names(names[1]) == names
    model = read_local(tmp_path / names[2])  # any shard
    assert model.files == tuple(names)
    weights = model.weights(source="test")
    assert weights.num_tensors == 5
    assert weights.total_bytes == 5 * 256 * (256 // 32) * 34  # 348,160
    assert model.metadata["llama.block_count"] == 2


def test_missing_shard_is_one_error(tmp_path):
    tensors = [(f"t{i}", (32, 32), Q.F16) for i in range(4)]
    write_gguf(tmp_path / "m.gguf", "llama", llama_keys(), tensors, split_max_tensors=2)
    (tmp_path / "m-00002-of-00002.gguf").unlink()
    with pytest.raises(KvcalcError) as err:
        read_local(tmp_path / "m-00001-of-00002.gguf")
    assert err.value.code == "gguf-missing-shard"


# -- malformed files: one error each, bounded memory ------------------------------------------
def _expect(path: Path, code: str) -> KvcalcError:
    tracemalloc.start()
    try:
        with pytest.raises(KvcalcError) as err:
            header_of(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.code == code, err.value.message
    assert "\n" not in err.value.message
    assert peak < 8 * 1024 * 1024, peak  # never what the file claims
    return err.value


def test_wrong_magic(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGML" + bytes(100))
    _expect(path, "gguf-not-gguf")


def test_truncated_header(tmp_path):
    full = small_llama(tmp_path / "m.gguf").read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(full[:150])
    assert "offset" in _expect(path, "gguf-truncated").message


def test_lying_tensor_count(tmp_path):
    data = bytearray(small_llama(tmp_path / "m.gguf").read_bytes())
    data[8:16] = struct.pack("<Q", 1 << 40)  # a trillion tensors in a few kB
    path = tmp_path / "lie.gguf"
    path.write_bytes(bytes(data))
    _expect(path, "gguf-truncated")


def test_tensor_count_one_too_many(tmp_path):
    data = bytearray(small_llama(tmp_path / "m.gguf").read_bytes())
    (count,) = struct.unpack("<Q", data[8:16])
    data[8:16] = struct.pack("<Q", count + 1)
    path = tmp_path / "lie.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(KvcalcError) as err:
        header_of(path)
    assert err.value.code in ("gguf-truncated", "gguf-invalid")


def test_huge_declared_string(tmp_path):
    # magic, version 3, 0 tensors, 1 key whose name claims 2^62 bytes
    raw = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 62) + b"abc"
    path = tmp_path / "s.gguf"
    path.write_bytes(raw)
    _expect(path, "gguf-truncated")


def test_huge_declared_array(tmp_path):
    key = b"llama.x"
    raw = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
           + struct.pack("<IIQ", 9, 4, 1 << 50))  # array of 2^50 uint32  # fmt: skip
    path = tmp_path / "a.gguf"
    path.write_bytes(raw + bytes(64))
    _expect(path, "gguf-truncated")


def test_unknown_value_type(tmp_path):
    key = b"k"
    raw = (
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + key + struct.pack("<I", 99)
    )
    path = tmp_path / "t.gguf"
    path.write_bytes(raw + bytes(16))
    _expect(path, "gguf-invalid")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_damage_is_one_error_or_a_header(tmp_path_factory, data):
    base = tmp_path_factory.mktemp("fz") / "m.gguf"
    raw = bytearray(small_llama(base).read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    base.write_bytes(bytes(raw))
    try:
        header_of(base)
    except KvcalcError as exc:
        assert exc.code.startswith("gguf-") and "\n" not in exc.message


# -- keys → layout ----------------------------------------------------------------------------
def model_of(path: Path):
    header = read_local(path)
    return parse_gguf(header.metadata, name=path.stem, where=str(path))


def test_gqa_llama_layout(tmp_path):
    shape = model_of(small_llama(tmp_path / "m.gguf", layers=3, heads=8, kv_heads=2, hidden=512))
    assert shape.num_layers == 3
    assert shape.layers[0] == FullAttention(dtype=shape.dtype, kv_heads=2, k_dim=64, v_dim=64)
    # 3 layers · 2 heads · (64 + 64) · 2 B = 1,536 B per token
    assert shape.bytes_per_token == 1536
    assert shape.max_model_len == 4096


def test_a_file_without_head_count_kv_has_as_many_kv_heads_as_heads(tmp_path):
    # llama.cpp 0c1e570, src/llama-model.cpp llama_model::load_hparams: n_head_kv_arr = n_head_arr,
    # then get_key_or_arr(LLM_KV_ATTENTION_HEAD_COUNT_KV, ..., required=false) — the key is optional
    keys = llama_keys(layers=3, heads=8, hidden=512)
    del keys["llama.attention.head_count_kv"]
    shape = model_of(write_gguf(tmp_path / "m.gguf", "llama", keys))
    assert [x.num_kv_heads for x in shape.layers] == [8, 8, 8]
    # 3 layers · 8 heads · (64 + 64) · 2 B = 6,144 B per token (one KV head: 768)
    assert shape.bytes_per_token == 6144


def test_per_layer_kv_heads(tmp_path):
    keys = llama_keys("deci", layers=3, heads=8, kv_heads=("int32[]", [2, 4, 8]), hidden=512)
    shape = model_of(write_gguf(tmp_path / "m.gguf", "deci", keys))
    assert [x.num_kv_heads for x in shape.layers] == [2, 4, 8]
    # llama's loader shapes attn_k/attn_v by layer 0's heads: such a file does not load
    keys = llama_keys(layers=3, heads=8, kv_heads=("int32[]", [2, 4, 8]), hidden=512)
    with pytest.raises(KvcalcError) as err:
        model_of(write_gguf(tmp_path / "l.gguf", "llama", keys))
    assert err.value.code == "config-unsupported" and "head_count_kv" in err.value.message
    zero = llama_keys("deci", layers=2, heads=8, kv_heads=("int32[]", [2, 0]), hidden=512)
    with pytest.raises(KvcalcError) as err:
        model_of(write_gguf(tmp_path / "z.gguf", "deci", zero))
    assert err.value.code == "config-invalid"


def test_gemma2_sliding_pattern_and_default_window(tmp_path):
    keys = llama_keys("gemma2", layers=4, heads=4, kv_heads=2, hidden=256, head_dim=128)
    shape = model_of(write_gguf(tmp_path / "g.gguf", "gemma2", keys))
    # period 2: layer i slides when i % 2 < 1 → layers 0 and 2; window defaults to 4096
    assert [x.kind for x in shape.layers] == ["sliding", "full", "sliding", "full"]
    assert shape.layers[0].window == 4096


def test_gemma3_period_six_and_key(tmp_path):
    keys = {**llama_keys("gemma3", layers=7, heads=4, kv_heads=1, hidden=256, head_dim=256),
            "gemma3.attention.sliding_window": 512}  # fmt: skip
    shape = model_of(write_gguf(tmp_path / "g.gguf", "gemma3", keys))
    assert [x.kind for x in shape.layers] == ["sliding"] * 5 + ["full", "sliding"]
    assert isinstance(shape.layers[0], SlidingWindow) and shape.layers[0].window == 512


def test_gemma3_without_window_is_all_full(tmp_path):
    keys = llama_keys("gemma3", layers=6, heads=4, kv_heads=1, hidden=256, head_dim=256)
    assert model_of(write_gguf(tmp_path / "g.gguf", "gemma3", keys)).kinds == ("full",)


def test_explicit_bool_pattern(tmp_path):
    keys = {**llama_keys("gpt-oss", layers=3, heads=4, kv_heads=2, hidden=256, head_dim=64),
            "gpt-oss.attention.sliding_window": 128,
            "gpt-oss.attention.sliding_window_pattern": [False, True, True]}  # fmt: skip
    shape = model_of(write_gguf(tmp_path / "o.gguf", "gpt-oss", keys))
    assert [x.kind for x in shape.layers] == ["full", "sliding", "sliding"]


def test_llama_ignores_a_sliding_window_key(tmp_path):
    keys = {**llama_keys(), "llama.attention.sliding_window": 4096}
    assert model_of(write_gguf(tmp_path / "m.gguf", "llama", keys)).kinds == ("full",)


def test_mla(tmp_path):
    keys = {**llama_keys("deepseek2", layers=2, heads=16, kv_heads=1, hidden=1024),
            "deepseek2.attention.key_length": 576, "deepseek2.attention.value_length": 512,
            "deepseek2.attention.key_length_mla": 192, "deepseek2.attention.value_length_mla": 128,
            "deepseek2.attention.kv_lora_rank": 512, "deepseek2.rope.dimension_count": 64}  # fmt: skip
    shape = model_of(write_gguf(tmp_path / "d.gguf", "deepseek2", keys))
    assert isinstance(shape.layers[0], MLALatent)
    assert shape.bytes_per_token == 2 * 576 * 2  # (512 + 64) values · 2 B · 2 layers


def test_nextn_layers_are_left_out(tmp_path):
    keys = {**llama_keys("qwen3moe", layers=5), "qwen3moe.nextn_predict_layers": 1}
    assert model_of(write_gguf(tmp_path / "m.gguf", "qwen3moe", keys)).num_layers == 4


def test_mamba2_state(tmp_path):
    keys = {"mamba2.block_count": 2, "mamba2.context_length": 1 << 20, "mamba2.embedding_length": 256,
            "mamba2.ssm.conv_kernel": 4, "mamba2.ssm.inner_size": 512, "mamba2.ssm.state_size": 16,
            "mamba2.ssm.time_step_rank": 8, "mamba2.ssm.group_count": 1}  # fmt: skip
    shape = model_of(write_gguf(tmp_path / "m.gguf", "mamba2", keys))
    assert isinstance(shape.layers[0], Mamba2State)
    # conv (3, 512 + 2·16) f32 = 6,528 B; ssm (8, 64, 16) f32 = 32,768 B; per layer 39,296
    assert shape.state_bytes_per_sequence == 2 * 39_296


def test_unknown_architecture_is_refused_by_name(tmp_path):
    keys = llama_keys("rwkv7")
    with pytest.raises(ConfigError) as err:
        model_of(write_gguf(tmp_path / "r.gguf", "rwkv7", keys))
    assert err.value.code == "config-unsupported" and "'rwkv7'" in err.value.message


def test_missing_key_is_named(tmp_path):
    keys = llama_keys()
    del keys["llama.block_count"]
    with pytest.raises(ConfigError) as err:
        model_of(write_gguf(tmp_path / "m.gguf", "llama", keys))
    assert "llama.block_count" in err.value.message


# -- through the CLI --------------------------------------------------------------------------
def test_cli_inspect_plan_compare_curve_on_a_gguf(tmp_path, cli):
    from helpers import assert_clean

    keys = llama_keys(
        "qwen3", layers=4, heads=8, kv_heads=2, hidden=512, head_dim=128, context=8192
    )
    path = str(write_gguf(tmp_path / "q3-Q8_0.gguf", "qwen3", keys,
                          [("token_embd.weight", (1000, 512), Q.Q8_0), ("output_norm.weight", (512,), Q.F32)]))  # fmt: skip
    data = cli("inspect", path, "--json").json
    # 4 layers · 2 heads · (128 + 128) · 2 B = 4,096 B per token
    assert data["kv_bytes_per_token"] == 4096
    assert data["weights"]["by_dtype"] == {
        "Q8_0": {"num_parameters": 512_000, "total_bytes": 1000 * 16 * 34},
        "F32": {"num_parameters": 512, "total_bytes": 2048},
    }
    plan = cli(
        "plan",
        path,
        "--engine",
        "llamacpp",
        "--gpu-memory",
        "8GiB",
        "--max-model-len",
        "4096",
        "--json",
    )
    assert_clean(plan, json_output=True)
    assert (
        plan.json["kv_cache_bytes"] == 4096 * 4096
        and plan.json["weights_bytes"] == 1000 * 16 * 34 + 2048
    )
    assert_clean(cli("compare", path, "llama-3.1-8b", "--max-model-len", "4096"))
    assert_clean(
        cli("curve", path, "--gpu-memory", "8GiB", "--engine", "llamacpp", "--lengths", "1k,4k")
    )


def test_cli_gguf_file_option_needs_a_hub_id(cli):
    result = cli("inspect", "org/name:Q4_K_M", "--gguf-file", "x.gguf")
    assert result.exit_code == 2 and "error[conflicting-options]" in result.stderr


# -- graph widths (llama.cpp's compute buffer) -------------------------------------------------
def test_graph_widths_come_from_the_keys_and_the_tensor_infos(tmp_path):
    from kvcalc.sources.gguf.load import load_gguf_path

    keys = {**llama_keys("qwen2", layers=2, heads=4, kv_heads=2, hidden=256),
            "qwen2.feed_forward_length": 688}  # fmt: skip
    tensors = [("token_embd.weight", (1000, 256), Q.F16), ("blk.0.attn_q.bias", (256,), Q.F32)]
    dims = load_gguf_path(write_gguf(tmp_path / "q.gguf", "qwen2", keys, tensors)).shape.graph_dims
    # the vocabulary is token_embd's row count (ggml ne[1]), what get_rows picks from
    assert dims is not None and (dims.arch, dims.n_embd, dims.n_ff, dims.n_vocab) == (
        "qwen2",
        256,
        688,
        1000,
    )
    assert dims.qkv_bias and dims.unmodelled_tensors == ()
    fused = [
        ("token_embd.weight", (1000, 256), Q.F16),
        ("blk.0.attn_qkv.weight", (512, 256), Q.F16),
    ]
    dims = load_gguf_path(write_gguf(tmp_path / "f.gguf", "qwen2", keys, fused)).shape.graph_dims
    assert dims is not None and dims.unmodelled_tensors == ("attn_qkv.weight",)
    no_mlp = load_gguf_path(write_gguf(tmp_path / "n.gguf", "llama", llama_keys(), tensors[:1]))
    assert no_mlp.shape.graph_dims is None  # no feed_forward_length: the graph is not known


# -- the GGUF's widths for the engines that estimate an activation peak (issue: no overhead) --------
def _qwen3_gguf(tmp_path: Path) -> str:
    keys = {**llama_keys("qwen3", layers=4, heads=8, kv_heads=2, hidden=512, head_dim=128,
                         context=8192), "qwen3.feed_forward_length": 1536}  # fmt: skip
    tensors = [("token_embd.weight", (32000, 512), Q.Q8_0), ("output_norm.weight", (512,), Q.F32)]
    return str(write_gguf(tmp_path / "q3-Q8_0.gguf", "qwen3", keys, tensors))


def test_gguf_header_gives_the_widths_vllm_profiles(tmp_path, cli):
    """The header holds the vocabulary (token_embd's 32,000 rows) and feed_forward_length (1,536):
    planned under a vLLM that loaded GGUF files the profile run is estimated, not 0 B. Sampler
    peak (vLLM 0.28, L4: 256 sequences, 2,048 tokens): 256 rows × 32,000 logits × 14.94 B =
    122,388,480 B + the 2,048 × 512 × 2 B hidden states (2,097,152 B) = 124,485,632 B, above the
    forward's 141% × 2,048 × 2 B × (3 · 1,536 + 2 · 512 = 5,632 values) = 32,526,583 B."""
    path = _qwen3_gguf(tmp_path)
    shape = load_gguf(path)
    w = shape.weights
    assert (w.vocab_size, w.intermediate_size, w.hidden_size, w.num_layers) == (32000, 1536, 512, 4)
    assert (w.attention.num_heads, w.attention.num_kv_heads, w.attention.head_dim) == (8, 2, 128)
    data = cli("plan", path, "--gpu", "L4", "--max-model-len", "4096", "--engine-version", "0.28",
               "--json").json  # fmt: skip
    memory = data["memory"]
    assert memory["activation_bytes"] == 124_485_632
    assert memory["non_torch_bytes"] > 0 and memory["cudagraph_bytes"] > 0
    assert data["weights_bytes"] == 1000 * 32 * 16 * 34 + 2048  # still the file's own bytes


def test_vllm_033_refuses_a_gguf(tmp_path, cli):
    """vLLM 0.33.0 has no GGUF loader ('gguf' left QUANTIZATION_METHODS): ``vllm serve FILE.gguf``
    stops in ModelConfig ("Invalid repository ID or local directory specified")."""
    result = cli("plan", _qwen3_gguf(tmp_path), "--gpu", "L4", "--max-model-len", "4096")
    assert result.exit_code == 2 and "error[unsupported-model]" in result.stderr
    assert "GGUF" in result.stderr and "--engine llamacpp" in result.stderr


def test_llamacpp_gguf_plan_has_no_stale_overhead_note(tmp_path, cli):
    """llama.cpp's compute buffer replaces the activation estimate: no "no overhead estimate" note."""
    notes = cli("plan", _qwen3_gguf(tmp_path), "--engine", "llamacpp", "--gpu", "L4",
                "--max-model-len", "4096", "--json").json["notes"]  # fmt: skip
    assert not [n for n in notes if "no overhead estimate" in n]
    assert [n for n in notes if "compute buffer" in n]


def load_gguf(path: str):
    from kvcalc.sources.gguf.load import load_gguf_path

    return load_gguf_path(Path(path)).shape


def test_transformers_engine_refuses_a_gguf(tmp_path, cli):
    """transformers dequantizes a GGUF when it loads it (load_gguf_checkpoint): planning the file's
    quantized bytes as its weights would be silently wrong."""
    result = cli("plan", _qwen3_gguf(tmp_path), "--engine", "hf", "--gpu", "L4")
    assert result.exit_code == 2 and "error[unsupported-model]" in result.stderr
    assert "dequantizes" in result.stderr
