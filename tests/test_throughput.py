"""The decode-throughput ceiling: hand-computed points (bytes, bandwidth and FLOPs in comments)."""

from __future__ import annotations

import json
import math
import types
from dataclasses import replace

import pytest

from kvcalc.errors import InputError
from kvcalc.planning.api import attach_throughput, calibrated_efficiency
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.throughput import (
    Roofline,
    batch_limit,
    causal_context_sum,
    decode_point,
    default_batches,
    parse_bandwidth,
    prefill_estimate,
    resolve_roofline,
    step_cost,
    throughput_ceiling,
)
from tests.helpers import bundled_shape

GB = 10**9
QWEN3_1_7B_WEIGHTS = 3_441_149_952  # 1,720,574,976 params × 2 B, tied embedding (all read)
QWEN3_1_7B_KV_PER_TOKEN = 114_688  # 2 × 28 layers × 8 heads × 128 × 2 B


@pytest.fixture(scope="module")
def qwen():
    return bundled_shape("qwen3-1.7b")


def test_qwen3_1_7b_step_cost(qwen):
    cost = step_cost(qwen, context_tokens=576)  # 512 prompt + 128 output / 2
    assert cost.dense_weight_bytes == QWEN3_1_7B_WEIGHTS
    assert cost.expert_weight_bytes == 0
    assert cost.kv_bytes_per_sequence == 576 * QWEN3_1_7B_KV_PER_TOKEN == 66_060_288
    assert cost.kv_bytes_per_token == QWEN3_1_7B_KV_PER_TOKEN
    # 2 FLOPs × 1,720,574,976 active parameters (the tied embedding is the lm_head matmul)
    assert cost.matmul_flops_per_token == 2 * 1_720_574_976
    # 28 layers × 2 · 16 query heads · (128 + 128) = 229,376 FLOPs per context token
    assert cost.attention_flops_per_token(1) == 28 * 2 * 16 * 256 == 229_376


@pytest.mark.parametrize(
    ("batch", "bytes_per_step", "tokens_per_s"),
    [
        # 3,441,149,952 + 1 × 66,060,288 = 3,507,210,240 B; 272e9 / that = 77.55 tok/s
        (1, 3_507_210_240, 77.5545),
        # + 8 × 66,060,288 = 3,969,632,256 B; 8 × 272e9 / that = 548.16
        (8, 3_969_632_256, 548.1616),
        # + 32 × 66,060,288 = 5,555,079,168 B; 32 × 272e9 / that = 1,566.85
        (32, 5_555_079_168, 1566.8544),
    ],
)
def test_qwen3_1_7b_decode_at_272_gb_per_s(qwen, batch, bytes_per_step, tokens_per_s):
    cost = step_cost(qwen, context_tokens=576)
    point = decode_point(cost, Roofline(memory_bandwidth_bytes_per_s=272 * GB), batch)
    assert point.bytes_per_step == bytes_per_step
    assert point.tokens_per_s == pytest.approx(tokens_per_s, rel=1e-5)
    assert point.per_request_tokens_per_s == pytest.approx(tokens_per_s / batch, rel=1e-5)
    assert point.bound == "memory" and point.compute_seconds is None


def test_untied_embedding_is_not_read():
    llama = bundled_shape("llama-3.1-8b")
    cost = step_cost(llama, context_tokens=1)
    # 16,060,522,496 B of bf16 weights less the 128,256 × 4,096 × 2 B input embedding (gathered)
    assert cost.dense_weight_bytes == 16_060_522_496 - 525_336_576 * 2 == 15_009_849_344
    # 2 × (8,030,261,248 − 525,336,576 embedding) FLOPs
    assert cost.matmul_flops_per_token == 2 * (8_030_261_248 - 525_336_576)
    # 32 layers × 2 · 32 heads · 256
    assert cost.attention_flops_per_token(1) == 32 * 2 * 32 * 256


def test_moe_reads_the_experts_a_batch_touches():
    moe = bundled_shape("qwen3-30b-a3b")  # 128 experts, 8 per token
    cost = step_cost(moe, context_tokens=1)
    assert cost.num_experts == 128 and cost.experts_per_token == 8
    assert cost.expert_fraction(1) == pytest.approx(8 / 128)
    assert cost.expert_fraction(4) == pytest.approx(1 - (120 / 128) ** 4)
    assert cost.expert_fraction(512) == pytest.approx(1.0)
    assert cost.weight_bytes(1) == cost.dense_weight_bytes + round(cost.expert_weight_bytes / 16)
    # experts: 57,982,058,496 B of 61,064,245,248; the untied embedding (311,164,928 × 2 B) not read
    assert cost.expert_weight_bytes == 57_982_058_496
    assert cost.dense_weight_bytes == 61_064_245_248 - 57_982_058_496 - 311_164_928 * 2


def test_compute_roof_binds_at_large_batch(qwen):
    cost = step_cost(qwen, context_tokens=576)
    roof = Roofline(memory_bandwidth_bytes_per_s=272 * GB, peak_flops_per_s=30e12)
    # per token 3,441,149,952 + 576 × 229,376 = 3,573,270,528 FLOPs
    assert cost.flops_per_token == 3_441_149_952 + 576 * 229_376
    low = decode_point(cost, roof, 1)
    assert low.bound == "memory"
    assert low.compute_seconds == pytest.approx(3_573_270_528 / 30e12)
    slow_chip = Roofline(memory_bandwidth_bytes_per_s=272 * GB, peak_flops_per_s=1e12)
    high = decode_point(cost, slow_chip, 256)
    assert high.bound == "compute"
    assert high.tokens_per_s == pytest.approx(1e12 / 3_573_270_528)


def test_sliding_windows_cap_kv_reads():
    gpt_oss = bundled_shape("gpt-oss-20b")  # 12 sliding (128 tokens) + 12 full layers, 8 heads × 64
    cost = step_cost(gpt_oss, context_tokens=4096)
    per_layer_token = 2 * 8 * 64 * 2  # 2,048 B
    assert cost.kv_bytes_per_sequence == 12 * per_layer_token * 4096 + 12 * per_layer_token * 128


def test_tensor_parallel_splits_everything(qwen):
    one = step_cost(qwen, context_tokens=1000)
    two = step_cost(qwen, context_tokens=1000, tensor_parallel_size=2)
    assert two.kv_bytes_per_sequence * 2 == one.kv_bytes_per_sequence
    assert two.matmul_flops_per_token * 2 == pytest.approx(one.matmul_flops_per_token)


def test_causal_context_sum():
    assert causal_context_sum(512, None) == 512 * 513 // 2 == 131_328
    assert causal_context_sum(4, 2) == 1 + 2 + 2 + 2
    assert causal_context_sum(3, 10) == 6


def test_prefill_is_compute_bound(qwen):
    cost = step_cost(qwen, context_tokens=576)
    roof = Roofline(memory_bandwidth_bytes_per_s=272 * GB, peak_flops_per_s=30e12)
    est = prefill_estimate(cost, roof, 512)
    # 2 × 1,720,574,976 × 512 + 229,376 × Σ_{t ≤ 512} t = 1,761,868,775,424 + 30,123,491,328
    assert est.flops == 1_791_992_266_752
    assert est.seconds == pytest.approx(1_791_992_266_752 / 30e12)
    assert est.bound == "compute"


def test_default_batches_and_bandwidth_parsing():
    assert default_batches(1) == (1,)
    assert default_batches(33) == (1, 2, 4, 8, 16, 32, 33)
    assert parse_bandwidth("448GB/s") == 448e9
    assert parse_bandwidth("3.35TB/s") == 3.35e12
    assert parse_bandwidth("936") == 936e9  # a bare number means GB/s
    with pytest.raises(InputError):
        parse_bandwidth("fast")


def test_roofline_needs_a_bandwidth():
    with pytest.raises(InputError) as info:
        resolve_roofline(PlanInputs(gpu_memory_bytes=8 << 30))
    assert info.value.code == "bandwidth-unknown"
    roof = resolve_roofline(PlanInputs(gpu="L4"), bandwidth="100GB/s", tflops=10)
    assert roof.memory_bandwidth_bytes_per_s == 100e9 and roof.peak_flops_per_s == 10e12
    assert resolve_roofline(PlanInputs(gpu="H100")).peak_flops_per_s == pytest.approx(989.4e12)


def test_plan_attaches_the_ceiling_at_its_concurrency(qwen):
    inputs = PlanInputs(gpu="L4", max_model_len=8192)
    result = plan(qwen, inputs, with_suggestions=False, with_throughput=True)
    t = result.throughput
    assert set(t) >= {
        "batch",
        "tokens_per_s",
        "per_request_tokens_per_s",
        "bound",
        "bytes_per_step",
        "assumptions",
    }
    # batch = min(floor(max_concurrency), max_num_seqs)
    assert t["batch"] == min(math.floor(result.max_concurrency), result.max_num_seqs)
    # every sequence at max_model_len: 8,192 × 114,688 = 939,524,096 B each; L4 reads 300 GB/s
    expected_bytes = QWEN3_1_7B_WEIGHTS + t["batch"] * 939_524_096
    assert t["bytes_per_step"] == expected_bytes
    assert t["tokens_per_s"] == pytest.approx(t["batch"] * 300e9 / expected_bytes)
    assert t["bound"] == "memory" and t["context_tokens"] == 8192
    assert attach_throughput(result, inputs, qwen) is result  # idempotent


def test_plan_ceiling_uses_the_workload_context(qwen):
    inputs = PlanInputs(gpu="L4", max_model_len=8192, prompt_len=512, output_len=128, batch=8)
    t = plan(qwen, inputs, with_suggestions=False, with_throughput=True).throughput
    assert t["batch"] == 8 and t["context_tokens"] == 576
    assert t["bytes_per_step"] == QWEN3_1_7B_WEIGHTS + 8 * 66_060_288


@pytest.mark.parametrize(
    "inputs",
    [
        PlanInputs(gpu_memory_bytes=24 << 30, max_model_len=8192),  # no bandwidth known
        PlanInputs(gpu="L4", max_model_len=8192, gpu_memory_utilization=0.1),  # does not fit
    ],
)
def test_plan_skips_the_ceiling(qwen, inputs):
    result = plan(qwen, inputs, with_suggestions=False, with_throughput=True)
    assert result.throughput is None


def test_batch_limit_is_zero_when_nothing_fits():
    result = plan(bundled_shape("llama-3.1-70b"), PlanInputs(gpu="L4"), with_suggestions=False)
    assert batch_limit(result) == 0
    report = throughput_ceiling(bundled_shape("llama-3.1-70b"), result, PlanInputs(gpu="L4"),
                                Roofline(memory_bandwidth_bytes_per_s=300e9))  # fmt: skip
    assert report.points == () and report.verdict == "weights-dont-fit"


def test_calibration_record_scales_the_ceiling(qwen, monkeypatch):
    import kvcalc.sources.calibration

    seen = {}

    def load_calibration(path, gpu_name, total_memory_bytes=None):
        seen["args"] = (path, gpu_name)
        return types.SimpleNamespace(decode_efficiency=0.5)

    monkeypatch.setattr(kvcalc.sources.calibration, "load_calibration", load_calibration)
    inputs = PlanInputs(gpu="L4", max_model_len=8192)
    result = plan(qwen, inputs, with_suggestions=False, with_throughput=True)
    assert result.throughput["efficiency"] == 1.0
    assert calibrated_efficiency(replace(inputs, calibration="rec.jsonl"), "L4") == (
        0.5,
        "measured (rec.jsonl)",
    )
    assert seen["args"] == ("rec.jsonl", "L4")
    halved = attach_throughput(
        replace(result, throughput=None), replace(inputs, calibration="rec.jsonl"), qwen
    )
    assert halved.throughput["tokens_per_s"] == pytest.approx(result.throughput["tokens_per_s"] / 2)


def test_memory_only_calibration_records_leave_the_ceiling_alone(tmp_path):
    record = {"kind": "kvcalc-verify", "version": 1, "gpu_name": "NVIDIA L4", "predicted_overhead_bytes": 1,
              "measured_overhead_bytes": 2}  # fmt: skip
    path = tmp_path / "rec.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    efficiency, source = calibrated_efficiency(PlanInputs(gpu="L4", calibration=str(path)), "L4")
    assert efficiency == 1.0 and "no decode measurement" in source
    assert calibrated_efficiency(PlanInputs(gpu="L4"), "L4") == (1.0, "none (pure ceiling)")


def test_efficiency_must_be_sensible(qwen):
    result = plan(qwen, PlanInputs(gpu="L4", max_model_len=8192), with_suggestions=False)
    with pytest.raises(InputError):
        throughput_ceiling(qwen, result, PlanInputs(gpu="L4"), Roofline(memory_bandwidth_bytes_per_s=1e9),
                           efficiency=0)  # fmt: skip
    with pytest.raises(InputError):
        Roofline(memory_bandwidth_bytes_per_s=0)


def test_throughput_cli_one_entry_per_engine_equal_to_each_single_engine_run(cli):
    """--engine repeated: each engine's entry is exactly that engine's run alone (top level: the first)."""
    args = ("throughput", "qwen3-1.7b", "--gpu", "L4", "--prompt-len", "512", "--json")
    both = cli(*args, "--engine", "vllm", "--engine", "sglang")
    assert both.exit_code == 0, both.stderr
    assert [e["engine"] for e in both.json["engines"]] == ["vllm", "sglang"]
    for entry in both.json["engines"]:
        alone = cli(*args, "--engine", entry["engine"]).json
        (single,) = alone["engines"]
        assert entry == single
        assert {k: alone[k] for k in entry} == entry  # the single run's top level, too
    assert {k: both.json[k] for k in both.json["engines"][0]} == both.json["engines"][0]
    # the engines differ here: batch limit 256 (vLLM, max_num_seqs) vs 211 (SGLang's pool)
    assert [e["batch_limit"] for e in both.json["engines"]] == [256, 211]


def test_throughput_table_per_engine(cli):
    out = cli("throughput", "qwen3-1.7b", "--gpu", "L4", "--engine", "vllm", "--engine", "sglang")
    assert out.exit_code == 0, out.stderr
    assert "L4 (300 GB/s, 121.0 TFLOP/s), vllm," in out.stdout
    assert "L4 (300 GB/s, 121.0 TFLOP/s), sglang," in out.stdout
