"""``recommend: true`` in a deployment file (:mod:`kvcalc.deploy.cheaper`): the cheaper deployment
``check`` names is the cheapest that meets the file's own requirements, found the slow way here
(every priced GPU × count × split the engine takes, each planned and judged)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import ROOT

from kvcalc.deploy.cheaper import cheaper_deployment
from kvcalc.deploy.judge import judge
from kvcalc.deploy.run import plan_deployment, read_file
from kvcalc.engines.names import EngineName
from kvcalc.errors import KvcalcError
from kvcalc.planning import recommend_space as space
from kvcalc.planning.api import plan_reference, read_prices

EXAMPLE = str(ROOT / "tests" / "fixtures" / "deployments" / "good" / "recommend.yaml")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("KVCALC_PRICES", raising=False)


def _deployment(text: str, tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(text)
    (dep,), problems = read_file(str(path))
    assert problems == []
    return dep


def _prices(tmp_path, **usd):
    path = tmp_path / "prices.yaml"
    lines = ['date: "2026-12-01"', "source: test table", "usd_per_gpu_hour:"]
    path.write_text("\n".join([*lines, *(f"  {gpu}: {p}" for gpu, p in usd.items())]) + "\n")
    return str(path)


def test_the_example_finds_two_t4s_at_the_bundled_prices():
    # bundled prices (Modal, 2026-05-07): H100-SXM $3.9492/h; T4 $0.5904/h, so 2 × T4 = $1.1808/h.
    # Llama-3.1-8B in fp16 (T4 has no bf16): 14.99 GiB of weights, more than one T4's 14.75 GiB;
    # 1 × L4 ($0.7992) holds 3.90 of the 8 requests (`kvcalc plan llama-3.1-8b --gpu L4
    # --max-model-len 8192 --batch 8`: below-target), so the cheapest is 2 × T4 at TP 2.
    (dep,), _ = read_file(EXAMPLE)
    found = cheaper_deployment(dep, plan_deployment(dep, with_suggestions=False))
    assert found.own_usd_per_hour == pytest.approx(3.9492)
    assert found.cheaper is not None
    assert (found.cheaper.gpu, found.cheaper.num_gpus) == ("T4", 2)
    assert found.cheaper.tensor_parallel_size == 2
    assert found.cheaper.usd_per_hour == pytest.approx(2 * 0.5904)
    assert found.cheaper.total_concurrency >= 8  # min_concurrency
    assert found.cheaper.kvcalc_command == (
        "kvcalc plan llama-3.1-8b --gpu T4 -tp 2 --max-model-len 8192 --batch 8"
    )


def _slow_cheapest(dep, table):
    """Every priced GPU × count (1, 2, 4, 8) × split of vLLM, planned and judged: the cheapest
    that passes the file's requirements and costs less than the deployment's own GPUs."""
    own_plan = plan_deployment(dep, with_suggestions=False)
    own = table.price(dep.inputs.gpu) * own_plan.num_gpus
    from kvcalc.planning.api import resolve_model_cached

    shape = resolve_model_cached(dep.model).shape
    base = replace(dep.inputs, num_gpus=None, tensor_parallel_size=1)
    best = None
    for gpu, usd in table.usd_per_gpu_hour.items():
        for n in space.gpu_counts(1, None):
            if usd * n >= own:
                continue
            for split in space.splits(shape, EngineName.VLLM, n, base, frozenset()):
                inputs = space.inputs_for(base, EngineName.VLLM, gpu, split,
                                          dep.inputs.kv_cache_dtype, None, 8)  # fmt: skip
                try:
                    result = plan_reference(dep.model, inputs, with_suggestions=False)
                except KvcalcError:  # a split the engine refuses
                    continue
                if not judge(dep, result) and (best is None or usd * n < best[0]):
                    best = (usd * n, gpu, n)
    return best


@pytest.mark.parametrize(
    "usd",
    [
        {"H100-SXM": 3.9492, "L4": 0.7992, "T4": 0.5904},
        {"H100-SXM": 3.9492, "L4": 0.5, "T4": 0.5904},  # 2 × L4 ($1.00) beats 2 × T4 ($1.18)
        {"H100-SXM": 3.9492, "A100-80GB": 1.5, "L40S": 1.9512},  # 1 × A100 at $1.50
    ],
    ids=["t4", "l4", "a100"],
)
def test_cheaper_equals_the_slow_search(tmp_path, usd):
    (dep,), _ = read_file(EXAMPLE)
    path = _prices(tmp_path, **usd)
    found = cheaper_deployment(dep, plan_deployment(dep, with_suggestions=False), prices=path)
    slow = _slow_cheapest(dep, read_prices(path))
    assert slow is not None and found.cheaper is not None
    assert (found.cheaper.usd_per_hour, found.cheaper.gpu, found.cheaper.num_gpus) == (
        pytest.approx(slow[0]), slow[1], slow[2])  # fmt: skip


def test_nothing_cheaper_when_the_own_gpu_is_the_cheapest(tmp_path):
    (dep,), _ = read_file(EXAMPLE)
    path = _prices(tmp_path, **{"H100-SXM": 0.10, "T4": 0.5904})
    found = cheaper_deployment(dep, plan_deployment(dep, with_suggestions=False), prices=path)
    assert found.cheaper is None and found.own_usd_per_hour == pytest.approx(0.10)
    assert "no cheaper deployment" in found.message


def test_requirements_are_the_files_own(tmp_path):
    # min_max_model_len 131,072 with max_model_len 8,192 already fails; the candidates keep
    # max_model_len 8,192 so none passes either: nothing cheaper is offered
    dep = _deployment(
        "model: llama-3.1-8b\ngpu: H100-80GB\nmax_model_len: 8192\nrecommend: true\n"
        "requirements:\n  min_concurrency: 8\n  min_max_model_len: 131072\n",
        tmp_path,
    )
    found = cheaper_deployment(dep, plan_deployment(dep, with_suggestions=False))
    assert found.cheaper is None


def test_unpriced_gpu_says_so(tmp_path):
    dep = _deployment("model: llama-3.1-8b\ngpu: H200\nrecommend: true\n", tmp_path)
    found = cheaper_deployment(dep, plan_deployment(dep, with_suggestions=False))
    assert found.cheaper is None and found.own_usd_per_hour is None
    assert "no price for H200" in found.message


def test_check_cli_note_json_and_fail_on_cheaper(cli):
    passed = cli("check", EXAMPLE)
    assert passed.exit_code == 0, passed.stderr
    assert "recommend: 2 × T4 (TP 2) meets the same requirements for $1.18/h" in passed.stdout
    failed = cli("check", EXAMPLE, "--fail-on", "cheaper", "-f", "json")
    assert failed.exit_code == 1
    (entry,) = failed.json
    assert entry["passed"] is False
    (failure,) = entry["failures"]
    assert failure["requirement"] == "recommend"
    assert failure["line"] == 8  # the `recommend: true` line of the example
    assert failure["expected"] == pytest.approx(3.9492)
    assert failure["actual"] == pytest.approx(1.1808)
    assert entry["recommend"]["cheaper"]["gpu"] == "T4"


def test_recommend_must_be_a_boolean(cli, tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\ngpu: H100-80GB\nrecommend: sometimes\n")
    result = cli("check", str(path))
    assert result.exit_code == 2
    assert "recommend" in result.stderr
