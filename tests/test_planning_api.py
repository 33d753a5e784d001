"""``kvcalc.planning.api``: the one planning module that reads files, and the cache it keeps.

Two bugs the loose structure let in (issue 12): a process kept planning the old model after its
``config.json`` was edited (the cache was keyed on the reference string), and ``plan()``, documented
as pure, read the calibration file itself.
"""

from __future__ import annotations

import json
import os

import pytest

from kvcalc.errors import InputError
from kvcalc.estimate.calibration import Calibration
from kvcalc.planning import api
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.sources.cache import ModelCache
from tests.helpers import bundled_shape

#: 2 layers, 2 KV heads of 64 / 4 = 16 dims, bf16: 2 (K, V) x 2 x 2 x 16 x 2 B = 256 B per token
TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16"}  # fmt: skip


def write_config(folder, **changes):
    path = folder / "config.json"
    path.write_text(json.dumps(TINY | changes), encoding="utf-8")
    return path


def test_an_edited_config_is_read_again(tmp_path):
    write_config(tmp_path)
    inputs = PlanInputs(gpu="L4", max_model_len=4096)
    first = api.plan_reference(str(tmp_path), inputs)
    assert first.kv_bytes_per_token == 256
    # 16 layers now: 2 x 16 x 2 x 16 x 2 B = 2,048 B per token
    path = write_config(tmp_path, num_hidden_layers=16)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert api.plan_reference(str(tmp_path), inputs).kv_bytes_per_token == 2048


def test_an_unchanged_model_is_loaded_once(tmp_path):
    write_config(tmp_path)
    cache = ModelCache()
    first = cache.load(str(tmp_path))
    assert cache.load(str(tmp_path)) is first and len(cache) == 1
    assert cache.load("llama-3.1-8b") is cache.load("llama-3.1-8b")  # bundled: keyed on the name
    # same size (one digit for another), other modification time: read again
    write_config(tmp_path, num_key_value_heads=1)
    os.utime(tmp_path / "config.json", ns=(1, 2))
    assert cache.load(str(tmp_path)).shape.layers[0].num_kv_heads == 1


def test_weight_files_beside_the_config_are_part_of_the_key(tmp_path):
    write_config(tmp_path)
    cache = ModelCache()
    first = cache.load(str(tmp_path))
    (tmp_path / "model.safetensors.index.json").write_text("{}", encoding="utf-8")
    assert cache.load(str(tmp_path)) is not first


def record(predicted, measured):
    return {"kind": "kvcalc-verify", "version": 1, "gpu_name": "NVIDIA H100 80GB HBM3",
            "total_memory_bytes": 85_029_158_912, "predicted_overhead_bytes": predicted,
            "measured_overhead_bytes": measured}  # fmt: skip


def test_plan_reads_no_calibration_file(tmp_path, monkeypatch):
    path = tmp_path / "cal.jsonl"
    path.write_text(json.dumps(record(3 << 30, (3 << 30) + (512 << 20))) + "\n", encoding="utf-8")
    llama = bundled_shape("llama-3.1-8b")
    inputs = PlanInputs(gpu="H100-80GB", max_model_len=8192, calibration=str(path))
    via_api = api.plan_reference("llama-3.1-8b", inputs)

    import kvcalc.sources.calibration as calibration

    def no_reading(*args, **kwargs):
        raise AssertionError("plan() read a file")

    monkeypatch.setattr(calibration, "read_records", no_reading)
    with pytest.raises(InputError, match="reads no files"):
        plan(llama, inputs)  # a named file it was not given is refused, never ignored
    given = Calibration(gpu_name="NVIDIA H100 80GB HBM3", num_records=1,
                        extra_overhead_bytes=512 << 20, source=str(path))  # fmt: skip
    pure = plan(llama, inputs, calibration=given)
    plain = plan(llama, PlanInputs(gpu="H100-80GB", max_model_len=8192))
    # +512 MiB of non-torch overhead from the record, 512 MiB less for the KV cache
    assert pure.memory.non_torch_bytes == plain.memory.non_torch_bytes + (512 << 20)
    assert pure.available_kv_bytes == plain.available_kv_bytes - (512 << 20)
    assert pure.memory == via_api.memory and pure.num_blocks == via_api.num_blocks


def test_a_calibration_without_a_record_for_the_gpu_says_so():
    none = Calibration(
        gpu_name="NVIDIA L4", num_records=0, extra_overhead_bytes=0, source="c.jsonl"
    )
    llama = bundled_shape("llama-3.1-8b")
    inputs = PlanInputs(gpu="L4", max_model_len=8192, calibration="c.jsonl")
    result = plan(llama, inputs, calibration=none)
    plain = plan(llama, PlanInputs(gpu="L4", max_model_len=8192))
    assert result.memory == plain.memory
    assert "calibration: no --fill record for NVIDIA L4 in c.jsonl" in result.notes
