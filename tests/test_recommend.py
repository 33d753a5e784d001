"""`kvcalc recommend`: the search's answer against an enumeration of every candidate the slow way,
each printed command pasted back, the price files, golden output and the JSON schema."""

from __future__ import annotations

import math
import shlex

import pytest
from golden import assert_golden

from kvcalc.engines.names import EngineName
from kvcalc.model.gpus import get_gpu
from kvcalc.planning.api import plan_reference, read_prices, recommend_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.recommend_result import Requirements, Search

#: the bundled prices (Modal, 2026-05-07): per GPU-hour
L4, L40S, A100_80, H100 = 0.7992, 1.9512, 2.4984, 3.9492


def _slow_best(reference: str, gpus: tuple[str, ...], concurrency: int, max_model_len: int,
               moe: bool, dcp: dict[int, int]):  # fmt: skip
    """Every candidate planned with plan_reference, written out here without the search's code:
    n in 1, 2, 4, 8; TP × PP × DP = n with TP <= 8; EP on and off for a MoE model with TP × DP > 1;
    DCP off or ``dcp[tp]``; KV auto, and fp8 where the GPU has fp8 tensor cores. The best: the
    lowest price per hour (a GPU without a price after, by count), then the fewest settings
    changed, then the most requests."""
    prices = read_prices()
    found = []
    for name in gpus:
        gpu = get_gpu(name)
        for n in (1, 2, 4, 8):
            for tp in (t for t in (1, 2, 4, 8) if n % t == 0):
                for pp in (p for p in (1, 2, 4, 8) if (n // tp) % p == 0):
                    dp = n // (tp * pp)
                    for ep in (False, True) if moe and tp * dp > 1 else (False,):
                        for c in {1, dcp.get(tp, 1)}:
                            for kv in ("auto", "fp8") if gpu.fp8_dense_tflops else ("auto",):
                                inputs = PlanInputs(
                                    gpu=gpu.name, max_model_len=max_model_len,
                                    tensor_parallel_size=tp, pipeline_parallel_size=pp,
                                    data_parallel_size=dp, enable_expert_parallel=ep,
                                    decode_context_parallel_size=c, kv_cache_dtype=kv,
                                    batch=math.ceil(concurrency / dp),
                                )  # fmt: skip
                                try:
                                    plan = plan_reference(reference, inputs, with_suggestions=False)
                                except Exception:  # noqa: BLE001 - the engine refuses the split
                                    continue
                                if not plan.passed:
                                    continue
                                changed = (pp > 1) + (dp > 1) + ep + (c > 1) + (kv != "auto")
                                price = prices.price(gpu.name)  # unpriced: after, by count
                                cost = (price is None, n if price is None else price * n)
                                total = plan.runnable_concurrency * plan.data_parallel_replicas
                                found.append(
                                    ((*cost, changed, -total), (gpu.name, n, tp, pp, dp, ep, c, kv))
                                )
    return min(found)[1] if found else None


def _row(c) -> tuple:
    return (c.gpu, c.num_gpus, c.tensor_parallel_size, c.pipeline_parallel_size,
            c.data_parallel_size, c.enable_expert_parallel, c.decode_context_parallel_size,
            c.kv_cache_dtype)  # fmt: skip


CASES = [
    # dense GQA (8 KV heads: no DCP); a MoE (EP searched); an MLA model (DCP = TP shards the latent)
    ("llama-3.1-8b", ("L4", "L40S", "A100-80GB"), 64, 32768, False, {}),
    ("qwen3-30b-a3b", ("L40S", "H100"), 32, 32768, True, {}),
    ("deepseek-v3", ("H200", "B200"), 16, 16384, True, {2: 2, 4: 4, 8: 8}),
]


@pytest.mark.parametrize(("reference", "gpus", "concurrency", "length", "moe", "dcp"), CASES)
def test_the_recommendation_is_the_best_of_every_candidate_planned(
    reference, gpus, concurrency, length, moe, dcp
):
    base = PlanInputs(gpu=gpus[0], max_model_len=length)
    search = Search(gpus=gpus, engines=(EngineName.VLLM,))
    fast = recommend_reference(reference, base, Requirements(concurrency=concurrency), search)
    assert fast.candidates, fast.rejected
    assert _row(fast.candidates[0]) == _slow_best(reference, gpus, concurrency, length, moe, dcp)
    # and the search's own exhaustive path (no bound, no early stop) ranks every row the same
    slow = recommend_reference(reference, base, Requirements(concurrency=concurrency),
                               Search(gpus=gpus, engines=(EngineName.VLLM,), exhaustive=True))  # fmt: skip
    assert [_row(c) for c in fast.candidates] == [_row(c) for c in slow.candidates]
    assert fast.planned < slow.planned  # the bounds saved plans


def _run_pasted(cli, command: str):
    words = shlex.split(command)
    assert words[:2] == ["kvcalc", "plan"], command
    result = cli(*words[1:], "--json", "--no-throughput")
    assert result.exit_code == 0, result.stderr
    return result.json


_SAME = ("gpu", "num_gpus", "tensor_parallel_size", "pipeline_parallel_size",
         "data_parallel_size", "expert_parallel", "decode_context_parallel_size", "kv_cache_dtype",
         "num_blocks", "kv_cache_bytes", "max_concurrency", "runnable_concurrency", "verdict",
         "weights_bytes")  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ("llama-3.1-8b", "--max-model-len", "32K", "--concurrency", "64", "--gpu", "L4",
         "--gpu", "L40S", "--gpu", "A100-80GB", "--top", "3"),
        ("qwen3-30b-a3b", "--max-model-len", "16K", "--concurrency", "48", "--gpu", "L40S",
         "--gpu", "H100", "--prompt-len", "4000", "--output-len", "1000", "--top", "3",
         "-dp", "2"),
        ("qwen3-8b", "--concurrency", "8", "--max-model-len", "8192", "--gpu", "L4", "--engine",
         "sglang", "--top", "2"),
    ],
)  # fmt: skip
def test_each_printed_command_pasted_back_reproduces_its_row(cli, args):
    result = cli("recommend", *args, "--json")
    assert result.exit_code == 0, result.stderr
    rows = result.json["candidates"]
    assert rows
    for row in rows:
        plan = row["plan"]
        pasted = _run_pasted(cli, row["kvcalc_command"])
        assert {k: pasted[k] for k in _SAME} == {k: plan[k] for k in _SAME}
        # the serving command through --from-command, with the GPU and workload beside it
        serve = row["serve_command"]
        assert serve is not None
        extra = ["--gpu", row["gpu"], "--batch", str(plan["inputs"]["batch"])]
        for key in ("prompt_len", "output_len"):
            if plan["inputs"][key] is not None:
                extra += ["--" + key.replace("_", "-"), str(plan["inputs"][key])]
        served = cli("plan", "--from-command", serve, *extra, "--json", "--no-throughput")
        assert served.exit_code == 0, served.stderr
        assert {k: served.json[k] for k in _SAME} == {k: plan[k] for k in _SAME}


def test_pinned_settings_are_kept_and_the_searched_ones_vary(cli):
    result = cli("recommend", "llama-3.1-8b", "--concurrency", "16", "--max-model-len", "8192",
                 "--gpu", "L4", "--gpu", "L40S", "-tp", "2", "--gpu-memory-utilization", "0.85",
                 "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    for row in result.json["candidates"]:
        assert row["tensor_parallel_size"] == 2
        assert row["plan"]["memory"]["gpu_memory_utilization"] == 0.85
        assert "--gpu-memory-utilization 0.85" in row["kvcalc_command"]
        assert "--gpu-memory-utilization 0.85" in row["serve_command"]


def test_from_command_fixes_its_settings(cli):
    result = cli("recommend", "--from-command", "vllm serve meta-llama/Llama-3.1-8B -tp 4 "
                 "--max-model-len 16384", "--concurrency", "32", "--gpu", "L4", "--gpu", "L40S",
                 "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    rows = result.json["candidates"]
    assert rows and all(r["tensor_parallel_size"] == 4 for r in rows)
    assert all(r["plan"]["max_model_len"] == 16384 for r in rows)


def test_nothing_meets_the_requirements_exits_1_and_says_why(cli):
    result = cli("recommend", "llama-3.1-70b", "--concurrency", "4", "--gpu", "T4",
                 "--max-model-len", "8192")  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert "No searched deployment meets the requirements." in result.stdout
    assert "8× T4 ($4.72/h): weights alone" in result.stdout


def test_min_decode_and_headroom_are_requirements(cli):
    base = ("recommend", "llama-3.1-8b", "--concurrency", "16", "--max-model-len", "8192",
            "--gpu", "L4", "--gpu", "H100", "--json")  # fmt: skip
    plain = cli(*base).json["candidates"][0]
    assert plain["gpu"] == "L4"
    fast = cli(*base, "--min-decode-tokens-per-s", "2000").json["candidates"]
    assert all(c["decode_tokens_per_s_upper_bound"] >= 2000 for c in fast)
    roomy = cli(*base, "--min-headroom", "0.5").json["candidates"]
    assert all(c["headroom_fraction"] >= 0.5 for c in roomy)


def test_the_objectives_rank_differently(cli):
    base = ("recommend", "llama-3.1-8b", "--concurrency", "32", "--max-model-len", "8192",
            "--gpu", "L4", "--gpu", "H100", "--json")  # fmt: skip
    cost = cli(*base).json["candidates"]
    gpus = cli(*base, "--objective", "gpus").json["candidates"]
    tpd = cli(*base, "--objective", "tokens-per-dollar").json["candidates"]
    assert [c["usd_per_hour"] for c in cost] == sorted(c["usd_per_hour"] for c in cost)
    assert [c["num_gpus"] for c in gpus] == sorted(c["num_gpus"] for c in gpus)
    per_dollar = [c["decode_tokens_per_s_upper_bound"] / c["usd_per_hour"] for c in tpd]
    assert per_dollar == sorted(per_dollar, reverse=True)


def test_an_unpriced_gpu_ranks_by_count_after_the_priced_and_says_so(cli):
    result = cli("recommend", "llama-3.1-8b", "--concurrency", "8", "--max-model-len", "8192",
                 "--gpu", "L40", "--gpu", "L4", "--json")  # fmt: skip
    rows = result.json["candidates"]
    priced = [r for r in rows if r["usd_per_hour"] is not None]
    assert rows[: len(priced)] == priced and priced
    unpriced = rows[len(priced) :]
    assert unpriced and [r["num_gpus"] for r in unpriced] == sorted(r["num_gpus"] for r in unpriced)
    assert all(r["usd_per_million_output_tokens"] is None for r in unpriced)
    assert any("price unknown for L40" in n for n in result.json["notes"])


PRICE_ERRORS = [
    ("bad.yaml", "H100: [1, 2\n", "not valid YAML (line 2)"),
    ("unknown.yaml", "H900: 2.5\n", "unknown GPU 'H900'"),
    ("negative.yaml", "H100: -1\n", "a price must be a finite number above 0, got -1"),
    ("twice.yaml", "H100: 2\nH100-SXM: 3\n", "H100-SXM is priced twice ('H100-SXM')"),
    ("words.csv", "gpu,usd_per_hour\nL4,cheap\n", "L4: 'cheap' is not a number of dollars"),
    ("header.csv", "name,price\nL4,1\n", "the first line must be the header gpu,usd_per_hour"),
    ("columns.csv", "gpu,usd_per_hour\nL4,1,2\n", "row 2: expected 2 columns, got 3"),
    ("empty.yaml", "{}\n", "no prices in it"),
]


@pytest.mark.parametrize(("name", "text", "message"), PRICE_ERRORS)
def test_price_files_with_errors_are_refused_by_name(cli, tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = cli("recommend", "llama-3.1-8b", "--concurrency", "4", "--gpu", "L4",
                 "--prices", str(path))  # fmt: skip
    assert result.exit_code == 2, result.stdout
    assert result.stderr.startswith(f"error[invalid-prices]: prices {path}: "), result.stderr
    assert message in result.stderr
    assert "\nhint: " in result.stderr


def test_a_price_file_replaces_the_table_yaml_csv_and_the_environment(cli, tmp_path, monkeypatch):
    csv_file = tmp_path / "p.csv"
    csv_file.write_text("gpu,usd_per_hour\nL4,10\nL40S,1\n", encoding="utf-8")
    args = ("recommend", "llama-3.1-8b", "--concurrency", "16", "--max-model-len", "8192",
            "--gpu", "L4", "--gpu", "L40S", "--json")  # fmt: skip
    result = cli(*args, "--prices", str(csv_file)).json
    assert result["candidates"][0]["gpu"] == "L40S"  # L4 at $10 is dearer now
    assert result["prices"] == f"{csv_file} (undated)"
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text("- {gpu: L4, usd_per_hour: 0.5}\n", encoding="utf-8")
    monkeypatch.setenv("KVCALC_PRICES", str(yaml_file))
    result = cli(*args).json
    assert result["candidates"][0]["gpu"] == "L4"
    assert result["candidates"][0]["usd_per_hour"] == 0.5 * result["candidates"][0]["num_gpus"]
    missing = cli(*args, "--prices", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2
    assert missing.stderr.startswith("error[invalid-prices]: prices ")


def test_the_bundled_prices_name_their_date_and_source():
    table = read_prices()
    assert table.date == "2026-05-07"
    assert "modal.com/pricing" in table.source
    # Modal's per-second rates x 3600: H100 $0.001097/s = $3.9492/h
    assert table.price("H100") == pytest.approx(0.001097 * 3600)
    assert (table.price("L4"), table.price("L40S"), table.price("A100-80GB")) == (L4, L40S, A100_80)
    assert table.price("H200") is None  # no list price cited: unknown, never guessed


def test_recommend_golden(cli):
    result = cli("recommend", "llama-3.1-8b", "--max-model-len", "32K", "--concurrency", "64",
                 "--gpu", "L4", "--gpu", "L40S", "--gpu", "A100-80GB", "--gpu", "H100",
                 "--top", "3", "--explain")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert_golden("recommend_llama31_8b_32k_64", result)
    head = result.stdout.split("\nCommands")[0].splitlines()
    assert max(len(line) for line in head) <= 80


def test_recommend_json_matches_its_schema(cli):
    import jsonschema

    from kvcalc.render.json_shapes import schema

    result = cli("recommend", "qwen3-30b-a3b", "--concurrency", "16", "--max-model-len", "8192",
                 "--gpu", "L40S", "--gpu", "H100", "--top", "2", "--json")  # fmt: skip
    jsonschema.validate(result.json, schema("recommend"))
    printed = cli("schema", "recommend")
    assert printed.exit_code == 0
    assert printed.json["title"] == "kvcalc recommend --json"
