"""The torch-free parts of verify: config reduction, calibration records, ``plan --calibration``."""

from __future__ import annotations

import json

import pytest
from helpers import bundled_config

from kvcalc.errors import KvcalcError
from kvcalc.estimate.overhead import Overhead
from kvcalc.hfconfig import parse_config
from kvcalc.hfconfig.reduce import shrink_for_run, slice_layers
from kvcalc.sources.calibration import (
    RECORD_KIND,
    calibrate_overhead,
    load_calibration,
    read_records,
)
from kvcalc.verify.result import ComponentResult, judge, relative_error


def test_slice_layers_keeps_the_pattern():
    gemma = slice_layers(bundled_config("gemma-3-1b-it"), 7)
    shape = parse_config(gemma, name="g")
    assert [x.kind for x in shape.layers] == ["sliding"] * 5 + ["full", "sliding"]
    nemotron = slice_layers(bundled_config("nvidia-nemotron-3-nano-30b-a3b-bf16"), 6)
    assert nemotron["hybrid_override_pattern"] == "MEMEM*"
    assert [x.kind for x in parse_config(nemotron, name="n").layers] == [
        "recurrent",
        "none",
    ] * 2 + ["recurrent", "full"]
    with pytest.raises(KvcalcError) as err:
        slice_layers(bundled_config("gpt2"), 13)
    assert err.value.code == "invalid-input"


def test_shrink_keeps_the_cache_dimensions():
    raw = slice_layers(bundled_config("deepseek-v3"), 2)
    small, changed = shrink_for_run(raw)
    assert (
        small["vocab_size"] == 1024
        and small["n_routed_experts"] == 4
        and small["num_experts_per_tok"] == 2
    )
    assert "quantization_config" not in small and changed["quantization_config"] == "dropped"
    for key in (
        "kv_lora_rank",
        "qk_rope_head_dim",
        "num_attention_heads",
        "hidden_size",
        "num_key_value_heads",
    ):
        assert small[key] == raw[key]
    before, after = parse_config(raw, name="a"), parse_config(small, name="b")
    assert before.layers == after.layers  # the cache cannot tell them apart
    gpt_oss, _ = shrink_for_run(slice_layers(bundled_config("gpt-oss-20b"), 2))
    assert (
        parse_config(gpt_oss, name="g").layers
        == parse_config(slice_layers(bundled_config("gpt-oss-20b"), 2), name="h").layers
    )


def test_judge_and_errors():
    assert relative_error(100, 101) == 0.01 and relative_error(0, 0) == 0.0
    comp = ComponentResult(
        name="x", predicted_bytes=100, measured_bytes=102, relative_error=0.02, tensors=1
    )
    assert judge(1000, 1005, (comp,), 0.01) == (0.005, False)  # every component counts
    assert judge(1000, 1005, (), 0.01) == (0.005, True)


def record(gpu="NVIDIA H100 80GB HBM3", predicted=3 << 30, measured=(3 << 30) + (256 << 20), **kw):
    return {"kind": RECORD_KIND, "version": 1, "gpu_name": gpu, "total_memory_bytes": 85_029_158_912,
            "predicted_overhead_bytes": predicted, "measured_overhead_bytes": measured} | kw  # fmt: skip


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "\n")


def test_load_calibration_median_per_gpu(tmp_path):
    path = tmp_path / "cal.jsonl"
    write(path, [record(), record(measured=(3 << 30) + (512 << 20)), record(measured=(3 << 30) + (128 << 20)),
                 record(gpu="NVIDIA A100-SXM4-80GB", measured=0, total_memory_bytes=85_899_345_920),
                 record(predicted=None, measured=None, check="layout")])  # fmt: skip
    cal = load_calibration(path, "NVIDIA H100 80GB HBM3")
    assert cal.num_records == 3 and cal.extra_overhead_bytes == 256 << 20
    assert load_calibration(path, "h100-sxm").num_records == 3  # catalog names match device names
    assert load_calibration(path, "NVIDIA L4") is None
    assert load_calibration(path, None, 85_029_158_912).num_records == 3  # by memory when unnamed
    base = Overhead(activation_bytes=1, non_torch_bytes=100, cudagraph_bytes=2)
    fixed = calibrate_overhead(
        base, str(path), gpu_name="NVIDIA H100 80GB HBM3", total_memory_bytes=None
    )
    assert fixed.non_torch_bytes == 100 + (256 << 20) and "calibration: +256 MiB" in fixed.notes[-1]
    none = calibrate_overhead(base, str(path), gpu_name="NVIDIA L4", total_memory_bytes=None)
    assert none.non_torch_bytes == 100 and "no --fill record" in none.notes[-1]


def test_bad_calibration_files(tmp_path):
    with pytest.raises(KvcalcError) as err:
        read_records(tmp_path / "missing.jsonl")
    assert err.value.code == "calibration-not-found"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "something else"}\n')
    with pytest.raises(KvcalcError) as err:
        read_records(bad)
    assert err.value.code == "calibration-invalid" and ":1:" in err.value.message


def test_plan_applies_the_calibration(cli, tmp_path):
    path = tmp_path / "cal.jsonl"
    write(path, [record(measured=(3 << 30) + (1 << 30))])  # 1 GiB more overhead than predicted
    args = ("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--max-model-len", "8192", "--json")
    plain = cli(*args).json
    calibrated = cli(*args, "--calibration", str(path)).json
    assert calibrated["memory"]["non_torch_bytes"] == plain["memory"]["non_torch_bytes"] + (1 << 30)
    assert calibrated["available_kv_bytes"] == plain["available_kv_bytes"] - (1 << 30)
    assert any(n.startswith("calibration: +1,024 MiB") for n in calibrated["notes"])
    r = cli(*args, "--calibration", str(tmp_path / "nope.jsonl"))
    assert r.exit_code == 2 and "error[calibration-not-found]" in r.stderr


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (None, "calibration-invalid"),  # /dev/zero: endless, never read whole
        (b"\xff\xfe not utf-8\n", "calibration-invalid"),
        (b"[" * 100_000 + b"\n", "calibration-invalid"),
        (b" " * (16 * 1024 * 1024 + 1), "calibration-invalid"),
        (json.dumps(record(measured=10**400)).encode(), None),  # ignored: no GPU has that
    ],
)
def test_hostile_calibration_files(cli, tmp_path, content, code):
    path = "/dev/zero" if content is None else tmp_path / "cal.jsonl"
    if content is not None:
        path.write_bytes(content)
    r = cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--calibration", str(path))
    if code is None:
        assert r.exit_code in (0, 1) and "no --fill record" in r.stdout, r.stderr
    else:
        assert r.exit_code == 2 and r.stderr.startswith(f"error[{code}]: "), r.stderr
