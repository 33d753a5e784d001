"""Requirements judged on real plans (the planner itself, no fakes), with hand-checked figures.

Llama-3.1-8B caches 2 (K, V) × 32 layers × 8 KV heads × 128 dims × 2 bytes = 131,072 B per token.
With ``kv_cache_memory: 10GiB`` vLLM makes 10 GiB / (16 tokens × 131,072 B = 2 MiB) = 5,120
blocks = 81,920 tokens: at 16,384 tokens a request, exactly 5.00 concurrent requests.
"""

from __future__ import annotations

import pytest

from kvcalc.deploy import check_paths
from kvcalc.units import GIB

BASE = "model: llama-3.1-8b\nkv_cache_memory: 10GiB\nmax_model_len: 16384\n"


def _check(tmp_path, text: str, **kw):
    path = tmp_path / "d.yaml"
    path.write_text(text, encoding="utf-8")
    report = check_paths([str(path)], **kw)
    assert report.problems == (), report.problems
    (result,) = report.results
    return result


def test_worked_example_passes(tmp_path):
    r = _check(
        tmp_path,
        BASE
        + "max_num_seqs: 4\nbatch: 4\nrequirements:\n  min_concurrency: 4\n  min_headroom: 1.9GiB\n",
    )
    assert r.plan.kv_cache_tokens == 81_920
    assert r.plan.max_concurrency == pytest.approx(5.0)
    # 5 fit in the KV cache, the scheduler runs max_num_seqs = 4 at once: min_concurrency 5 fails
    assert r.plan.runnable_concurrency == 4
    # headroom beyond 4 requests: 1 - 4/5 = 20% of the 10 GiB pool (the planner's float may lose a byte)
    assert r.plan.headroom_bytes == pytest.approx(2 * GIB, abs=1)
    assert r.passed and r.failures == ()


def test_min_concurrency_above_max_num_seqs_fails(tmp_path):
    r = _check(tmp_path, BASE + "max_num_seqs: 4\nrequirements:\n  min_concurrency: 5\n")
    # min_concurrency is the plan's target: below-target, and the requirement fails
    assert r.plan.verdict == "below-target" and r.plan.target_concurrency == 5
    (f,) = [f for f in r.failures if f.requirement == "min_concurrency"]
    assert (f.requirement, f.expected, f.actual) == ("min_concurrency", 5, 4)
    assert "max_num_seqs 4 runs 4 at once" in f.message


@pytest.mark.parametrize("cap", [5, 256, 1024])
def test_max_num_seqs_is_a_cap_not_a_target(tmp_path, cap):
    # 5 requests of 16,384 tokens fit; max_num_seqs 256 (or vLLM's own default, 1,024) caps what
    # runs at once and asks for nothing: the target is min_concurrency 4, met, and the headroom is
    # beyond 4 requests, 1 − 4/5 of the 10 GiB pool = 2 GiB
    r = _check(tmp_path, BASE + f"max_num_seqs: {cap}\nrequirements:\n  min_concurrency: 4\n")
    assert r.plan.verdict == "ok" and r.plan.target_concurrency == 4
    assert r.plan.runnable_concurrency == pytest.approx(5.0)
    assert r.plan.headroom_bytes == pytest.approx(2 * GIB, abs=1)
    assert r.passed and r.failures == ()
    # without a requirement nothing is asked for: headroom beyond one request, 8 GiB
    r = _check(tmp_path, BASE + f"max_num_seqs: {cap}\n")
    assert r.plan.verdict == "ok" and r.plan.target_concurrency is None
    assert r.plan.headroom_bytes == pytest.approx(8 * GIB, abs=1)


def test_min_concurrency_is_the_target_per_replica(tmp_path):
    # 10 across 2 data-parallel replicas: each engine is asked for ceil(10 / 2) = 5
    r = _check(tmp_path, BASE + "num_gpus: 2\nrequirements:\n  min_concurrency: 9\n")
    assert r.plan.target_concurrency == 5 and r.passed


def test_min_concurrency_fails_with_its_line(tmp_path):
    r = _check(tmp_path, BASE + "requirements:\n  min_concurrency: 6\n")
    (f,) = [f for f in r.failures if f.requirement == "min_concurrency"]
    assert (f.requirement, f.expected, f.actual, f.line) == ("min_concurrency", 6, 5.0, 5)
    assert f.message == "5.00 concurrent requests fit at max_model_len 16,384; min_concurrency is 6"


def test_min_concurrency_counts_data_parallel_replicas(tmp_path):
    r = _check(tmp_path, BASE + "num_gpus: 2\nrequirements:\n  min_concurrency: 10\n")
    assert r.plan.data_parallel_replicas == 2 and r.passed


def test_min_concurrency_uses_the_workload_when_given(tmp_path):
    # 4,096 tokens a request: 256 blocks each → 5,120 / 256 = 20 requests
    r = _check(
        tmp_path,
        BASE + "workload: {prompt_len: 3072, output_len: 1024}\n"
        "requirements: {min_concurrency: 21}\n",
    )
    (f,) = [f for f in r.failures if f.requirement == "min_concurrency"]
    assert f.actual == pytest.approx(20.0)
    assert "at the workload's 4,096 tokens" in f.message


def test_min_headroom_bytes_and_percent(tmp_path):
    r = _check(tmp_path, BASE + "batch: 4\nrequirements:\n  min_headroom: 3GiB\n")
    (f,) = r.failures
    assert (f.requirement, f.expected, f.line) == ("min_headroom", 3 * GIB, 6)
    assert f.actual == pytest.approx(2 * GIB, abs=1)
    assert f.message == (
        "KV headroom is 2.00 GiB beyond the target concurrency; min_headroom is 3.00 GiB"
    )
    r = _check(tmp_path, BASE + "batch: 4\nrequirements:\n  min_headroom: 25%\n")
    (f,) = r.failures
    assert (f.expected, f.actual) == (0.25, pytest.approx(0.2))


def test_min_max_model_len(tmp_path):
    r = _check(tmp_path, BASE + "requirements: {min_max_model_len: 32k}\n")
    (f,) = r.failures
    assert (f.expected, f.actual) == (32_000, 16_384)
    assert f.message == "max_model_len is 16,384 tokens; min_max_model_len is 32,000"


def test_wont_start_always_fails_and_points_at_max_model_len(tmp_path):
    r = _check(tmp_path, "model: llama-3.1-8b\nkv_cache_memory: 1GiB\nmax_model_len: 16384\n")
    (f,) = r.failures
    assert (f.requirement, f.actual, f.line) == ("allow_verdicts", "wont-start", 3)
    assert f.message.startswith("verdict wont-start: one request of 16,384 tokens needs 2.00 GiB")
    assert r.plan.suggestions, "failing deployments carry the planner's suggestions"


def test_tight_passes_by_default_and_fails_on_request(tmp_path):
    # 5 requests fit, 5 wanted: no headroom left → tight
    text = BASE + "batch: 5\n"
    assert _check(tmp_path, text).plan.verdict == "tight"
    assert _check(tmp_path, text).passed
    r = _check(tmp_path, text, fail_on=["tight"])
    (f,) = r.failures
    assert f.expected == ["ok"] and f.message.startswith("verdict tight (--fail-on tight): ")


def test_below_target_can_be_allowed(tmp_path):
    text = BASE + "batch: 6\n"
    assert _check(tmp_path, text).failures[0].actual == "below-target"
    assert _check(
        tmp_path, text + "requirements: {allow_verdicts: [ok, tight, below-target]}\n"
    ).passed


def test_identical_deployments_are_planned_once(tmp_path):
    path = tmp_path / "many.yaml"
    entry = "  - {model: llama-3.1-8b, kv_cache_memory: 10GiB, max_model_len: 16384}\n"
    path.write_text("deployments:\n" + entry * 50, encoding="utf-8")
    report = check_paths([str(path)])
    plans = {id(r.plan) for r in report.results}
    assert len(report.results) == 50 and len(plans) == 1
    assert [r.deployment.name for r in report.results][:2] == ["many#1", "many#2"]


def test_suggestions_keep_the_files_requirements(tmp_path):
    # Llama-3.1-70B at TP 2 on A100s holds ~33k tokens of KV: 65,536 does not start. The longest
    # that fits (28,224 at the pessimistic end) is below the file's min_max_model_len 32,768, so
    # it is not offered; TP 4 is, measured at the workload's 8,000 + 1,000 tokens
    text = ("model: llama-3.1-70b\ngpu: A100-80GB\ntensor_parallel_size: 2\nmax_model_len: 65536\n"
            "workload: {prompt_len: 8000, output_len: 1000}\n"
            "requirements:\n  min_max_model_len: 32768\n")  # fmt: skip
    r = _check(tmp_path, text)
    assert r.plan.verdict == "wont-start" and r.plan.suggestions
    for s in r.plan.suggestions:
        assert s.change.get("max_model_len", 32_768) >= 32_768
        assert s.verdict in ("ok", "tight")
    (tp,) = [s for s in r.plan.suggestions if "tensor_parallel_size" in s.change]
    assert "requests of the workload's 9,000 tokens" in tp.text
