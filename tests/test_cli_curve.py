"""`kvcalc curve`, `kvcalc compare`, `kvcalc throughput`: golden output, JSON keys, errors, the plot file."""

from __future__ import annotations

import sys

import pytest
from golden import assert_golden

from kvcalc.errors import install_hint

SEVEN = ["qwen2.5-1.5b", "qwen2.5-7b", "llama-3.1-8b", "mistral-7b-v0.1", "qwen3-8b", "llama-3.1-70b",
         "llama-3.1-405b"]  # fmt: skip
CURVE_ARGS = ["curve", "qwen3-1.7b", "--gpu", "L4", "--kv-cache-dtype", "bf16", "--kv-cache-dtype", "fp8",
              "--engine", "vllm", "--engine", "sglang", "--lengths", "4K,8K,16K,32K"]  # fmt: skip
SEED_ARGS = ["throughput", "qwen3-1.7b", "--gpu-memory", "8GiB", "--bandwidth", "272GB/s", "--tflops", "30",
             "--max-model-len", "4096", "--prompt-len", "512", "--output-len", "128"]  # fmt: skip

GOLDEN = {
    "curve_qwen3_1_7b_l4_dtypes_engines": (0, CURVE_ARGS),
    "curve_llama31_70b_l4_doesnt_fit": (0, ["curve", "llama-3.1-70b", "--gpu", "L4", "--lengths", "8K,32K"]),
    # below one request is not a bar; SGLang, with nothing that fits, is no series in the chart
    "curve_llama31_70b_h100_tp2_vllm_sglang": (0, ["curve", "llama-3.1-70b", "--gpu", "H100", "-tp", "2", "--engine",
                                                   "vllm", "--engine", "sglang", "--lengths", "2K,8K,16K"]),
    # 2,221,872 tokens / 512 = 4,339.59 requests, but max_num_seqs 1,024 runs at once: marked ‡
    "curve_llama32_1b_h100_max_num_seqs": (0, ["curve", "llama-3.2-1b-instruct", "--gpu", "H100", "--lengths",
                                               "512,1K,4K"]),
    "compare_seven_32k_h100": (0, ["compare", *SEVEN, "--max-model-len", "32768", "--gpu", "H100"]),
    "compare_seven_32k_no_gpu": (0, ["compare", *SEVEN, "--max-model-len", "32768"]),
    "compare_attention_variants_llama31_8b": (0, ["compare", "--attention-variants", "llama-3.1-8b", "--gpu", "H100"]),
    "throughput_qwen3_1_7b_8gib_seed": (0, SEED_ARGS),
    "throughput_llama31_8b_h100_batches": (0, ["throughput", "llama-3.1-8b", "--gpu", "H100", "--max-model-len",
                                               "8192", "--batch", "1", "--batch", "64", "--batch", "1024"]),
    "throughput_llama31_70b_l4_nothing_runs": (1, ["throughput", "llama-3.1-70b", "--gpu", "L4"]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(cli, name):
    code, args = GOLDEN[name]
    result = cli(*args)
    assert result.exit_code == code, result.stderr
    assert_golden(name, result)


def test_curve_json(cli):
    result = cli(*CURVE_ARGS, "--json")
    assert result.exit_code == 0, result.stderr
    data = result.json
    assert data["lengths_tokens"] == [4096, 8192, 16384, 32768]
    assert [s["label"] for s in data["series"]] == [
        "vllm bf16",
        "vllm fp8",
        "sglang bf16",
        "sglang fp8",
    ]
    series = data["series"][0]
    for key in ("engine", "engine_version", "kv_cache_dtype", "available_kv_bytes", "kv_bytes_per_token",
                "max_num_seqs", "verdict", "method", "points"):  # fmt: skip
        assert key in series, key
    assert set(series["points"][0]) == {"length_tokens", "max_concurrency", "kv_cache_tokens", "fits",
                                        "beyond_model_max", "runnable_concurrency",
                                        "capped_by_max_num_seqs"}  # fmt: skip
    assert data["gpu"] == "L4" and data["default_max_model_len"] == 40_960


def test_curve_default_lengths_double_to_the_model_max(cli):
    result = cli("curve", "qwen3-1.7b", "--gpu", "H100", "--json")
    assert result.json["lengths_tokens"] == [1024, 2048, 4096, 8192, 16384, 32768, 40960]


def test_compare_json(cli):
    result = cli("compare", "llama-3.1-8b", "llama-3.1-70b", "--gpu", "H100", "--json")
    assert result.exit_code == 0, result.stderr
    rows = result.json["rows"]
    assert [r["status"] for r in rows] == ["fits", "doesn't fit"]
    for key in ("label", "kv_cache_dtype", "kv_bytes_per_token", "layer_kv_bytes_per_request",
                "engine_kv_bytes_per_request", "weights_bytes", "max_concurrency",
                "kv_cache_tokens", "fits", "verdict", "status", "reason"):  # fmt: skip
        assert key in rows[0], key


def test_throughput_json(cli):
    result = cli(*SEED_ARGS, "--batch", "1", "--batch", "8", "--batch", "32", "--json")
    assert result.exit_code == 0, result.stderr
    data = result.json
    assert data["upper_bound"] is True and data["context_tokens"] == 576
    assert [p["batch"] for p in data["points"]] == [1, 8, 32]
    # 272e9 / 3,507,210,240 B per step
    assert data["points"][0]["tokens_per_s"] == pytest.approx(77.5545, rel=1e-5)
    assert data["points"][0]["bytes_per_step"] == 3_507_210_240
    assert data["prefill"]["bound"] == "compute"


def test_throughput_efficiency_scales(cli):
    result = cli(*SEED_ARGS, "--batch", "1", "--efficiency", "0.5", "--json")
    assert result.json["points"][0]["tokens_per_s"] == pytest.approx(77.5545 / 2, rel=1e-5)
    assert result.json["efficiency_source"] == "given (--efficiency)"


def test_plan_json_carries_the_ceiling(cli):
    result = cli("plan", "qwen3-1.7b", "--gpu", "L4", "--max-model-len", "8192", "--json")
    assert result.exit_code == 0, result.stderr
    t = result.json["throughput"]
    assert t["batch"] == 17 and t["bound"] == "memory" and t["upper_bound"] is True
    assert (
        cli("plan", "qwen3-1.7b", "--gpu", "L4", "--no-throughput", "--json").json["throughput"]
        is None
    )
    assert cli("plan", "qwen3-1.7b", "--gpu-memory", "24", "--json").json["throughput"] is None


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["throughput", "qwen3-1.7b", "--gpu-memory", "8GiB"], "bandwidth-unknown"),
        (["throughput", "qwen3-1.7b", "--gpu", "L4", "--bandwidth", "fast"], "invalid-size"),
        (["curve", "qwen3-1.7b", "--gpu", "L4", "--lengths", "4k,lots"], "invalid-input"),
        (["curve", "qwen3-1.7b"], "missing-gpu"),
        (["curve", "qwen3-1.7b", "--gpu", "L4", "--kv-cache-dtype", "fp7"], "unsupported-dtype"),
        (["compare", "--attention-variants", "llama-3.1-8b", "qwen3-8b"], "invalid-input"),
        (["compare", "--attention-variants", "deepseek-v3"], "unsupported-model"),
        (["compare", "no-such-model-xyz", "--offline"], "model-not-found"),
    ],
)
def test_errors(cli, args, code):
    result = cli(*args)
    assert result.exit_code == 2, result.stdout
    assert result.stderr.startswith(f"error[{code}]"), result.stderr


def test_plot_without_matplotlib(cli, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    target = tmp_path / "curve.png"
    result = cli("curve", "qwen3-1.7b", "--gpu", "L4", "--lengths", "4k", "--plot", str(target))
    assert result.exit_code == 2
    # kvcalc is not on the package index: the hint installs from a checkout or the repository
    assert result.stderr == "error[matplotlib-missing]: matplotlib is not installed, so --plot cannot draw\n" \
                            f"hint: {install_hint('plot')}\n"  # fmt: skip
    assert not target.exists()


@pytest.mark.parametrize(("suffix", "magic"), [("png", b"\x89PNG"), ("svg", b"<?xml")])
def test_plot_file_is_written(cli, tmp_path, suffix, magic):
    pytest.importorskip("matplotlib")
    target = tmp_path / f"curve.{suffix}"
    result = cli(*CURVE_ARGS, "--plot", str(target))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == f"wrote {target}\n"
    data = target.read_bytes()
    assert len(data) > 1000 and data.startswith(magic)


def test_curve_points_say_where_max_num_seqs_binds(cli):
    data = cli(
        "curve", "llama-3.2-1b-instruct", "--gpu", "H100", "--lengths", "512,1K,4K", "--json"
    ).json
    (series,) = data["series"]
    assert series["max_num_seqs"] == 1024
    by = {p["length_tokens"]: p for p in series["points"]}
    # 2,221,872 tokens hold 4,339.59 requests of 512 and 2,169.80 of 1,024: both above 1,024
    assert by[512]["capped_by_max_num_seqs"] and by[512]["runnable_concurrency"] == 1024
    assert by[1024]["capped_by_max_num_seqs"] and by[1024]["max_concurrency"] > 2000
    # 542.45 of 4,096: the KV cache limits, not the cap
    assert not by[4096]["capped_by_max_num_seqs"]
    assert by[4096]["runnable_concurrency"] == by[4096]["max_concurrency"]


def test_plot_leaves_out_series_with_no_line_and_names_tp(cli):
    from kvcalc.render.curve_view import plot_title, plotted_series

    args = ("curve", "llama-3.1-70b", "--gpu", "H100", "-tp", "2", "--engine", "vllm", "--engine", "sglang",
            "--lengths", "2K,8K,16K", "--json")  # fmt: skip
    data = cli(*args).json
    from types import SimpleNamespace as NS

    curve = NS(
        **{
            **data,
            "series": [
                NS(**{**s, "points": [NS(**p) for p in s["points"]]}) for s in data["series"]
            ],
        }
    )
    assert plot_title(curve) == "meta-llama/Llama-3.1-70B on H100-SXM × TP 2"
    drawn, left_out = plotted_series(curve)
    assert [s.label for s, _ in drawn] == ["vllm"]
    # 16,384 tokens: 0.58 of one request, not drawn
    assert [p.length_tokens for p in drawn[0][1]] == [2048, 8192]
    assert left_out == [
        "sglang: nothing fits (the weights need 65.74 GiB per GPU but the engine may use 63.78 GiB)"
    ]
