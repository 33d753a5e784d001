"""`kvcalc plan`: golden output for a handful of plans, exit codes, JSON keys."""

from __future__ import annotations

import pytest
from golden import assert_golden

PLAN_KEYS = ("engine", "kv_cache_dtype", "block_size", "num_blocks", "kv_cache_bytes", "kv_cache_tokens",
             "max_concurrency", "available_kv_bytes", "available_kv_bytes_low", "available_kv_bytes_high",
             "weights_bytes", "num_parameters", "kv_bytes_per_token",
             "verdict", "max_model_len", "estimated_max_model_len")  # fmt: skip

GOLDEN_PLANS = {
    # ok on an H100 with the model's own 131,072 context
    "plan_llama31_8b_h100": (0, ["llama-3.1-8b", "--gpu", "H100-80GB"]),
    # the worked example: 10 GiB of KV, 32K context, exact engine figures
    "plan_llama31_8b_10gib_32k": (0, ["llama-3.1-8b", "--kv-cache-memory", "10GiB", "--max-model-len", "32768"]),
    # does not start: 16 GiB needed per request
    "plan_llama31_8b_wont_start": (1, ["llama-3.1-8b", "--kv-cache-memory", "10", "--max-model-len", "131072"]),
    # below target on the seed's 40 GB card
    "plan_llama2_13b_40gb_batch": (1, ["llama-2-13b-hf", "--gpu-memory", "40GB", "--max-model-len", "4096", "--batch", "8"]),
    # weights do not fit
    "plan_llama31_70b_l4": (1, ["llama-3.1-70b", "--gpu", "L4"]),
    # hybrid groups, fp8, TP
    "plan_gemma2_fp8_tp2": (0, ["gemma-2-9b-it", "--gpu", "L40S", "-tp", "2", "--kv-cache-dtype", "fp8"]),
    # llama.cpp with 4 slots
    "plan_llamacpp_slots": (0, ["llama-3.1-8b", "--engine", "llamacpp", "--gpu", "RTX-4090", "--max-model-len", "8192", "--batch", "4", "--kv-cache-dtype", "q8_0"]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GOLDEN_PLANS))
def test_plan_golden(cli, name):
    code, args = GOLDEN_PLANS[name]
    result = cli("plan", *args, "--no-throughput")
    assert result.exit_code == code, result.stderr
    assert_golden(name, result)


def test_plan_json_contract(cli):
    result = cli(
        "plan", "llama-3.1-8b", "--kv-cache-memory", "10GiB", "--max-model-len", "8192", "--json"
    )
    assert result.exit_code == 0, result.stderr
    data = result.json
    for key in PLAN_KEYS:
        assert key in data, key
    # 10 GiB // 65,536 B pages // 32 layers = 5,120 blocks of 16 tokens
    assert (data["num_blocks"], data["kv_cache_tokens"], data["max_concurrency"]) == (
        5120,
        81920,
        10.0,
    )
    assert data["kv_cache_bytes"] == 10 * 2**30 and data["kv_bytes_per_token"] == 131072
    assert data["verdict"] == "ok" and data["estimated_max_model_len"] is None


def test_plan_json_exit_1_when_it_does_not_fit(cli):
    result = cli("plan", "llama-3.1-8b", "--kv-cache-memory", "10GiB", "--json")
    assert result.exit_code == 1
    assert (
        result.json["verdict"] == "wont-start" and result.json["estimated_max_model_len"] == 81904
    )


@pytest.mark.parametrize(
    "args, code",
    [
        (["llama-3.1-8b"], "missing-gpu"),
        (["llama-3.1-8b", "--gpu", "H1000"], "unknown-gpu"),
        (["llama-3.1-8b", "--gpu-memory", "80 parsecs"], "invalid-size"),
        (["llama-3.1-8b", "--gpu", "H100", "--engine", "ollama"], "unknown-engine"),
        (["llama-3.1-8b", "--gpu", "H100", "--gpu-memory-utilization", "1.5"], "invalid-input"),
        (["llama-3.1-8b", "--gpu", "H100", "--kv-cache-dtype", "fp4x"], "unsupported-dtype"),
        (["llama-3.1-8b", "--gpu", "H100", "-tp", "3"], "invalid-parallelism"),
        (["llama-3.1-8b", "--gpu", "H100", "--engine-option", "nonsense"], "invalid-input"),
    ],
)
def test_plan_errors(cli, args, code):
    result = cli("plan", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"error[{code}]"), result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_gpu_suggests(cli):
    result = cli("plan", "llama-3.1-8b", "--gpu", "H100-80G")
    assert result.exit_code in (0, 2)
    if result.exit_code == 2:
        assert "did you mean" in result.stderr


def test_negative_budget_is_shown_the_same_everywhere(cli):
    # gpt-oss-120b on one H100 with vLLM 0.10.1 and no FlashInfer: weights 65.91 + activation 7.33
    # + non-torch 0.02 GiB exceed int(79.22 GiB × 0.9) = 71.30 GiB, so vLLM logs a negative
    # "Available KV cache memory" (vllm-23278 printed -2.14 GiB) and refuses to start. The table,
    # the engine log line and the JSON all show the same negative figure, never 0.00.
    args = ("plan", "gpt-oss-120b", "--gpu", "H100", "--engine-version", "0.10.1",
            "-E", "flashinfer_sampler=false", "--no-throughput")  # fmt: skip
    data = cli(*args, "--json").json
    available = data["available_kv_bytes"]
    assert available < 0 and data["verdict"] == "wont-start" and data["num_blocks"] == 0
    shown = f"{available / (1 << 30):.2f} GiB"
    assert shown == "-1.97 GiB"
    assert data["log_lines"][0] == f"Available KV cache memory: {shown}"
    assert data["available_kv_bytes_low"] < available < data["available_kv_bytes_high"]
    table = cli(*args)
    assert table.exit_code == 1
    assert "│ available for KV per GPU" in table.stdout and f"{shown} ± 0.35" in table.stdout
    assert f"Available KV cache memory: {shown}" in table.stdout


def test_notes_wrap_with_a_hanging_indent_on_a_terminal(cli, monkeypatch):
    """At 80 columns a long note continues under its own text, not under the dash; piped output
    keeps each note on one line (for grep)."""
    import kvcalc.render.console as console

    monkeypatch.setattr(console, "stdout_is_terminal", lambda: True)
    out = cli("plan", "qwen3-1.7b", "--gpu", "H100", "--max-model-len", "4096").stdout
    notes = out[out.index("Notes:") :].splitlines()[1:]
    assert notes[0].startswith("  - activation") and len(notes) > 3
    assert all(len(line) <= 80 for line in notes)
    assert all(line.startswith(("  - ", "    ")) for line in notes)
    assert notes[1].startswith("    ") and not notes[1].startswith("    -")
