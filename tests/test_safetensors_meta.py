"""Exact weights from safetensors headers: pure parsing, then real files from ``safetensors``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from helpers import assert_clean
from hubserver import (
    CHECKPOINT_LAYOUT,
    EXPECTED_BY_DTYPE,
    EXPECTED_EXPERTS_BYTES,
    EXPECTED_PARAMETERS,
    EXPECTED_TOTAL_BYTES,
    SHARD_1,
    SHARD_2,
    checkpoint_files,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcalc.errors import KvcalcError
from kvcalc.sources.safetensors_files import read_header, read_local_weights
from kvcalc.sources.safetensors_meta import (
    DTYPE_BITS,
    MAX_HEADER_BYTES,
    SOURCE_HUB,
    SOURCE_LOCAL,
    DtypeTotal,
    TensorEntry,
    from_hub_metadata,
    header_length,
    parse_header,
    summarize,
)


def header(tensors: dict[str, dict]) -> bytes:
    return json.dumps(tensors).encode()


def entry(dtype: str, shape: list[int], begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def write(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


# -- pure parsing ---------------------------------------------------------------------------
def test_a_4096_square_bf16_tensor_is_33554432_bytes():
    raw = header(
        {"__metadata__": {"format": "pt"}, "w": entry("BF16", [4096, 4096], 0, 33_554_432)}
    )
    (tensor,) = parse_header(raw, where="x", data_size_bytes=33_554_432)
    assert tensor == TensorEntry(name="w", dtype="BF16", shape=(4096, 4096), nbytes=33_554_432)
    assert tensor.num_elements == 16_777_216


def test_summary_per_dtype_and_experts():
    raw = header(
        {
            "mlp.experts.w": entry("F8_E4M3", [8, 1024], 0, 8192),  # 8,192 x 1 B
            "mlp.experts.w_scale": entry("F32", [8], 8192, 8224),  # 8 x 4 B = 32 B
            "mlp.shared_experts.w": entry("BF16", [1024], 8224, 10272),  # 1,024 x 2 B = 2,048 B
            "mlp.gate.weight": entry("BF16", [8, 64], 10272, 11296),  # 512 x 2 B = 1,024 B
        }
    )
    w = summarize(parse_header(raw, where="x"), files=["a.safetensors"], source=SOURCE_LOCAL)
    assert w.total_bytes == 8192 + 32 + 2048 + 1024 == 11_296
    assert w.num_parameters == 8192 + 8 + 1024 + 512
    assert w.by_dtype == {"F8_E4M3": (8192, 8192), "BF16": (1536, 3072), "F32": (8, 32)}
    assert w.by_dtype["BF16"] == DtypeTotal(num_parameters=1536, total_bytes=3072)
    assert w.experts_bytes == 8192 + 32
    assert w.non_expert_bytes == 2048 + 1024
    assert w.num_tensors == 4
    assert w.files == ("a.safetensors",)
    assert w.to_dict()["by_dtype"]["F32"] == {"num_parameters": 8, "total_bytes": 32}


def test_sub_byte_and_scalar_and_unknown_dtypes():
    raw = header(
        {
            "fp4": entry("F4", [4, 8], 0, 16),  # 32 x 4 bits = 16 B
            "scalar": entry("F32", [], 16, 20),  # a scalar is one element
            "future": entry("X9", [3, 3], 20, 31),  # unknown dtype: sized by its offsets
        }
    )
    w = summarize(parse_header(raw, where="x", data_size_bytes=31), files=[], source=SOURCE_LOCAL)
    assert w.by_dtype == {"F4": (32, 16), "F32": (1, 4), "X9": (9, 11)}
    assert w.total_bytes == 31


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (header({"w": [1]}), "not an object"),
        (header({"w": {"shape": [1], "data_offsets": [0, 2]}}), "has no dtype"),
        (header({"w": entry("BF16", [-1], 0, 2)}), "has shape"),
        (header({"w": entry("BF16", [True], 0, 2)}), "has shape"),
        (header({"w": entry("BF16", ["4"], 0, 8)}), "has shape"),
        (header({"w": entry("BF16", [1], 4, 2)}), "data_offsets"),
        (header({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0]}}), "data_offsets"),
        (header({"w": entry("BF16", [2, 2], 0, 6)}), "need 8 bytes, its offsets span 6"),
        (header({"w": entry("F4", [3], 0, 2)}), "need 1.5 bytes"),
        (header({"w": entry("BF16", [2, 2], 0, 8)}), "past the data"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (header({"w": entry("BF16", [2**64], 0, 2)}), "has shape"),
        (header({"w": entry("X", [2**62, 2**62, 2**62], 0, 2)}), "too many elements"),
        (header({"w" * 1_000_000: [1]}), "entry 'wwwww"),
    ],
)
def test_invalid_headers_are_one_clear_error(raw, problem):
    with pytest.raises(KvcalcError) as info:
        parse_header(raw, where="shard.safetensors", data_size_bytes=6)
    assert info.value.code == "safetensors-invalid"
    assert info.value.message.startswith("shard.safetensors: not a valid safetensors header")
    assert problem in info.value.message
    assert "\n" not in info.value.message and len(info.value.message) < 400


@pytest.mark.parametrize(
    ("prefix", "file_size", "problem"),
    [
        (b"\x01\x00", None, "shorter than the 8-byte length prefix"),
        (struct.pack("<Q", 0), None, "header length 0"),
        (struct.pack("<Q", MAX_HEADER_BYTES + 1), None, "over the 104,857,600-byte limit"),
        (struct.pack("<Q", 100), 50, "header of 100 bytes in a 50-byte file"),
    ],
)
def test_header_length_is_bounded(prefix, file_size, problem):
    with pytest.raises(KvcalcError, match=problem) as info:
        header_length(prefix, where="f", file_size_bytes=file_size)
    assert info.value.code == "safetensors-invalid"


def test_header_length_little_endian():
    assert header_length(struct.pack("<Q", 0x0102), where="f", file_size_bytes=300) == 258


_DTYPES = sorted(DTYPE_BITS)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_DTYPES), st.lists(st.integers(0, 40), max_size=3)), max_size=12
    )
)
def test_totals_add_up_for_any_header(specs):
    """Build a header packed back to back; the summary must match the hand sum."""
    tensors, offset, expected_bytes, expected_params = {}, 0, 0, 0
    for i, (dtype, shape) in enumerate(specs):
        numel = 1
        for d in shape:
            numel *= d
        bits = DTYPE_BITS[dtype]
        if numel * bits % 8:
            shape, numel = [*shape, 8], numel * 8  # sub-byte dtypes fill whole bytes
        nbytes = numel * bits // 8
        tensors[f"t{i}"] = entry(dtype, shape, offset, offset + nbytes)
        offset += nbytes
        expected_bytes += nbytes
        expected_params += numel
    w = summarize(
        parse_header(header(tensors), where="h", data_size_bytes=offset),
        files=[],
        source=SOURCE_LOCAL,
    )
    assert w.total_bytes == expected_bytes == sum(t.total_bytes for t in w.by_dtype.values())
    assert w.num_parameters == expected_params
    assert w.experts_bytes == 0 and w.non_expert_bytes == expected_bytes


# -- real files written by the safetensors library ------------------------------------------
def assert_checkpoint(w):
    assert w.by_dtype == EXPECTED_BY_DTYPE
    assert w.total_bytes == EXPECTED_TOTAL_BYTES == 8_900
    assert w.num_parameters == EXPECTED_PARAMETERS == 5_921
    assert w.experts_bytes == EXPECTED_EXPERTS_BYTES == 2_176
    assert w.non_expert_bytes == 8_900 - 2_176
    assert w.num_tensors == len(CHECKPOINT_LAYOUT)


def test_local_single_file(tmp_path):
    folder = write(tmp_path / "m", checkpoint_files(sharded=False))
    w = read_local_weights(folder)
    assert_checkpoint(w)
    assert w.files == ("model.safetensors",)
    assert w.source == SOURCE_LOCAL == "safetensors metadata (local)"


def test_local_sharded_with_index_ignores_stray_files(tmp_path):
    folder = write(tmp_path / "m", checkpoint_files(sharded=True))
    (folder / "consolidated.safetensors").write_bytes(
        checkpoint_files(sharded=False)["model.safetensors"]
    )
    w = read_local_weights(folder)
    assert_checkpoint(w)
    assert w.files == (SHARD_1, SHARD_2)


def test_local_shards_without_index(tmp_path):
    files = checkpoint_files(sharded=True)
    del files["model.safetensors.index.json"]
    w = read_local_weights(write(tmp_path / "m", files))
    assert_checkpoint(w)


def test_index_naming_a_missing_shard(tmp_path):
    files = checkpoint_files(sharded=True)
    del files[SHARD_2]
    with pytest.raises(KvcalcError, match="1 shard\\(s\\) missing") as info:
        read_local_weights(write(tmp_path / "m", files))
    assert info.value.code == "safetensors-missing-shard"


@pytest.mark.parametrize(
    ("index", "problem"),
    [
        (b"{oops", "index is not JSON"),
        (b'{"weight_map": [1]}', "no weight_map"),
        (b'{"weight_map": {"w": "../../etc/x.safetensors"}}', "leaves the model folder"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_bad_index(tmp_path, index, problem):
    folder = write(tmp_path / "m", {"model.safetensors.index.json": index})
    with pytest.raises(KvcalcError, match=problem) as info:
        read_local_weights(folder)
    assert info.value.code == "safetensors-invalid"


def test_no_safetensors_means_none(tmp_path):
    folder = write(tmp_path / "m", {"config.json": b"{}", "pytorch_model.bin": b"\0" * 16})
    assert read_local_weights(folder) is None


def test_truncated_data_is_caught_from_the_header(tmp_path):
    data = checkpoint_files(sharded=False)["model.safetensors"]
    path = tmp_path / "model.safetensors"
    path.write_bytes(data[:-100])
    with pytest.raises(KvcalcError, match="past the data") as info:
        read_header(path)
    assert info.value.code == "safetensors-invalid"


def test_truncated_header(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 500) + b'{"w": ')
    with pytest.raises(KvcalcError, match="header of 500 bytes in a 14-byte file"):
        read_header(path)


def test_huge_declared_header_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "model.safetensors"
    with path.open("wb") as f:  # a sparse 200 MB file claiming a 150 MB header
        f.write(struct.pack("<Q", 150 * 1024 * 1024))
        f.truncate(200 * 1024 * 1024)
    with pytest.raises(KvcalcError, match="over the 104,857,600-byte limit"):
        read_header(path)


def test_hub_metadata_converts_like_local_headers(tmp_path):
    """huggingface_hub's own dataclasses (here parsed from local files) give the same totals."""
    from huggingface_hub import get_local_safetensors_metadata

    folder = write(tmp_path / "m", checkpoint_files(sharded=True))
    w = from_hub_metadata(get_local_safetensors_metadata(folder), where="acme/m@main")
    assert_checkpoint(w)
    assert w.files == (SHARD_1, SHARD_2)
    assert w.source == SOURCE_HUB == "safetensors metadata (hub)"


# -- hostile checkpoints through `kvcalc inspect` (hypothesis) ------------------------------------
TINY_CONFIG = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "hidden_size": 64, "intermediate_size": 16, "vocab_size": 64, "max_position_embeddings": 128,
               "torch_dtype": "bfloat16"}  # fmt: skip
_JUNK = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                  st.text(max_size=4), st.lists(st.integers(-2, 2**65), max_size=3), st.just({"a": []}))  # fmt: skip


@st.composite
def hostile_safetensors(draw) -> bytes:
    """A safetensors file, valid to begin with, then broken: truncated, a lying or huge length
    prefix, a header that is not an object, out-of-range offsets, junk in any field."""
    tensors, offset = {}, 0
    for i in range(draw(st.integers(0, 5))):
        dtype = draw(st.sampled_from([*_DTYPES, "X9"]))
        shape = draw(st.lists(st.integers(0, 16), max_size=3))
        numel = 1
        for d in shape:
            numel *= d
        nbytes = numel * DTYPE_BITS.get(dtype, 8) // 8
        tensors[f"model.layers.{i}.mlp.experts.w" if i % 2 else f"t{i}"] = entry(
            dtype, shape, offset, offset + nbytes
        )
        offset += nbytes
    raw = header(tensors)
    data = b"\0" * offset
    op = draw(
        st.sampled_from(
            ["none", "truncate", "length", "not-object", "field", "offsets", "bytes", "deep"]
        )
    )
    if op == "not-object":
        raw = json.dumps(draw(st.one_of(st.lists(_JUNK, max_size=3), _JUNK))).encode()
    elif op == "field" and tensors:
        name = draw(st.sampled_from(sorted(tensors)))
        tensors[name][draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(_JUNK)
        raw = header(tensors)
    elif op == "offsets" and tensors:
        name = draw(st.sampled_from(sorted(tensors)))
        tensors[name]["data_offsets"] = [draw(st.integers(-5, 2**66)), draw(st.integers(-5, 2**66))]
        raw = header(tensors)
    elif op == "bytes":
        at = draw(st.integers(0, max(0, len(raw) - 1)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at + 1 :]
    elif op == "deep":
        raw = b"[" * 50_000 + b"]" * 50_000
    prefix = struct.pack("<Q", len(raw))
    if op == "length":
        prefix = struct.pack("<Q", draw(st.sampled_from([0, 1, len(raw) - 1, len(raw) + 1, len(raw) + offset + 1,
                                                          MAX_HEADER_BYTES + 1, 2**63, 2**64 - 1])) % 2**64)  # fmt: skip
    blob = prefix + raw + data
    if op == "truncate":
        blob = blob[: draw(st.integers(0, len(blob)))]
    return blob


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blob=hostile_safetensors(), sharded=st.booleans(), index=st.sampled_from([
    None, b'{"weight_map": {"w": "model-1.safetensors"}}', b"[]", b'{"weight_map": {"w": "../x.safetensors"}}',
    b'{"weight_map": {"w": 3}}', b"\xff\xfe", b"[" * 50_000, b'{"weight_map": {"w": "' + b"x" * 5000 + b'"}}',
]))  # fmt: skip
def test_hostile_checkpoints_through_inspect(cli, tmp_path_factory, blob, sharded, index):
    folder = tmp_path_factory.mktemp("st")
    (folder / "config.json").write_text(json.dumps(TINY_CONFIG))
    (folder / ("model-1.safetensors" if sharded else "model.safetensors")).write_bytes(blob)
    if index is not None:
        (folder / "model.safetensors.index.json").write_bytes(index)
    result = cli("inspect", str(folder), "--json")
    assert_clean(result, json_output=True)
    if result.exit_code == 2:
        assert result.stderr.startswith("error[safetensors-"), result.stderr


# -- MTP modules: in the checkpoint, not in the target model -------------------------------------
def _tensor(name: str, nbytes: int):
    from kvcalc.sources.safetensors_meta import TensorEntry

    return TensorEntry(name=name, dtype="BF16", shape=(nbytes // 2,), nbytes=nbytes)


_DSV3_LIKE = [  # DeepSeek-V3 names: 61 decoder layers (0-60), its MTP layer is model.layers.61
    _tensor("model.layers.0.self_attn.q_a_proj.weight", 500),
    _tensor("model.layers.60.mlp.experts.0.down_proj.weight", 1_000),
    _tensor("model.layers.61.eh_proj.weight", 300),
    _tensor("model.layers.61.mlp.experts.0.down_proj.weight", 200),
    _tensor("lm_head.weight", 100),
]


def test_mtp_modules_are_counted_apart():
    w = summarize(_DSV3_LIKE, files=[], source=SOURCE_LOCAL)
    assert w.total_bytes == 2_100 and w.experts_bytes == 1_200  # the file, whole
    # vLLM skips model.layers.61 (num_hidden_layers 61, num_nextn_predict_layers 1): 300 + 200 B,
    # 200 of them a routed expert
    assert w.mtp_bytes(61, 1) == (500, 200)
    assert w.mtp_bytes(61, 0) == (0, 0)  # no MTP layers: layer 61 is not skipped
    # Qwen3-Next / MiMo name their MTP modules by prefix (vLLM's WeightsMapper drops them)
    qwen = summarize([_tensor("mtp.fc.weight", 64), _tensor("model.layers.0.x", 8),
                      _tensor("model.mtp_layers.0.y", 16)], files=[], source=SOURCE_LOCAL)  # fmt: skip
    assert qwen.mtp_bytes(48, 1) == (80, 0)


def test_a_plan_does_not_load_the_checkpoints_mtp_module():
    from helpers import bundled_shape

    from kvcalc.planning.core import plan
    from kvcalc.planning.inputs import PlanInputs

    model = bundled_shape("deepseek-v3")
    assert model.num_layers == 61 and len(model.mtp.layers) == 1
    inputs = PlanInputs(gpu="H200", tensor_parallel_size=8, max_model_len=32000,
                        kv_cache_memory_bytes=40 * 2**30)  # fmt: skip
    with_mtp = summarize(_DSV3_LIKE, files=[], source=SOURCE_LOCAL)
    without = summarize([t for t in _DSV3_LIKE if ".61." not in t.name], files=[],
                        source=SOURCE_LOCAL)  # fmt: skip
    a = plan(model, inputs, exact_weights=with_mtp, with_suggestions=False)
    b = plan(model, inputs, exact_weights=without, with_suggestions=False)
    assert a.weights_bytes == b.weights_bytes  # the 500 B of layer 61 are not loaded
    assert any("500 B of MTP modules" in n for n in a.notes)
