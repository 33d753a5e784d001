"""Command-line values, fuzzed (hypothesis): negative, zero and absurd numbers (10^40 and 10^400 as
ints, 1e30 and NaN/inf floats, --max-model-len 10^12), unknown units and names, through every
command. Each run ends in a result with finite numbers or one `error[...]` line and its hint: never
a traceback, an overflow, or a hang."""

from __future__ import annotations

import pytest
from helpers import assert_clean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HUGE = ["1" + "0" * 40, "1" + "0" * 400, str(2**63), str(10**12), str(2**40), str(2**40 + 1)]
INTS = st.sampled_from(
    ["0", "-1", "1", "2", "3", "7", "64", "4096", "131072", *HUGE, "1.5", "abc", "", "nan"]
)
#: verify allocates what it is asked for: tiny or absurd (refused before allocating), never in between
VERIFY_INTS = st.sampled_from(["0", "-1", "1", "2", "8", *HUGE, "x"])
FLOATS = st.sampled_from(["0", "-0.0", "0.5", "0.92", "1", "1.0000001", "2", "-1", "nan", "NaN", "inf", "-inf",
                          "1e308", "1e-300", "1e400", "abc", ""])  # fmt: skip
SIZES = st.sampled_from(["80GB", "79.2GiB", "24", "0", "0.5", "1B", "1e30", "80 GX", "20PB", "-1GiB", "nan",
                         "inf GiB", "999999999999999999999GiB", "1125899906842624", "1TiB", " 8 gib ", "GiB", ""])  # fmt: skip
GPUS = st.sampled_from(["H100-80GB", "L4", "a100-80gb", "H1000", "", "🙂", "x" * 300])
ENGINES = st.sampled_from(["vllm", "sglang", "llamacpp", "hf", "trtllm", "llama.cpp", "nope", ""])
DTYPES = st.sampled_from(
    ["auto", "fp8", "bf16", "int8", "nvfp4", "q4_0", "fp8_ds_mla", "fp9", "", "FP8"]
)
TEXT = st.one_of(
    st.text(max_size=12), st.sampled_from(["0.33", "0.6", "none", "awq", "fp8", "bfloat16"])
)
LENGTHS = st.one_of(
    st.lists(st.sampled_from(["1k", "4K", "32k", "1m", "0", "-4k", "1e30", "inf", "nan", "k", "1.5k", HUGE[0]]),
             min_size=0, max_size=4).map(",".join),
    st.text(max_size=10),
)  # fmt: skip
OPTION_VALUES = st.sampled_from(["n_seq_max=4", "n_seq_max=" + HUGE[1], "page_size=0", "page_size=nan",
                                 "swa_full_tokens_ratio=inf", "mem_fraction_static=2", "pp_layer_partition=1.5",
                                 "cache_implementation=static", "tokens_per_block=3", "batch_size=-1",
                                 "usage_context=llm", "=", "noequals", "kv_unified=maybe"])  # fmt: skip
COMMANDS_TEXT = st.sampled_from(["vllm serve llama-3.1-8b --max-model-len " + HUGE[0],
                                 "vllm serve llama-3.1-8b --gpu-memory-utilization nan", "vllm serve 'x",
                                 "vllm serve llama-3.1-8b -tp 1e400", "docker run x", ""])  # fmt: skip

PLAN_OPTIONS = {
    "--gpu": GPUS, "--gpu-memory": SIZES, "--num-gpus": INTS, "-tp": INTS, "-pp": INTS, "--engine": ENGINES,
    "--engine-version": TEXT, "--max-model-len": INTS, "--max-num-seqs": INTS, "--batch": INTS,
    "--kv-cache-dtype": DTYPES, "--dtype": TEXT, "-q": TEXT, "--weights-memory": SIZES,
    "--gpu-memory-utilization": FLOATS, "--block-size": INTS, "--max-num-batched-tokens": INTS,
    "--kv-cache-memory": SIZES, "--prompt-len": INTS, "--output-len": INTS, "--shared-prefix": INTS,
    "--tight-threshold": FLOATS, "-E": OPTION_VALUES, "--from-command": COMMANDS_TEXT,
}  # fmt: skip
COMMANDS = {
    # command: (fixed arguments, fuzzed options, --json)
    "plan": (["plan", "llama-3.1-8b"], PLAN_OPTIONS, True),
    "plan moe": (["plan", "qwen3-30b-a3b"], PLAN_OPTIONS, True),
    "plan hybrid": (["plan", "qwen3-next-80b-a3b-thinking"], PLAN_OPTIONS, False),
    "inspect": (["inspect", "gemma-2-9b-it"], {"--kv-cache-dtype": DTYPES, "--max-model-len": INTS}, True),
    "curve": (["curve", "llama-3.2-1b-instruct"],
              {"--gpu": GPUS, "--gpu-memory": SIZES, "-tp": INTS, "--engine": ENGINES, "--kv-cache-dtype": DTYPES,
               "--lengths": LENGTHS, "--gpu-memory-utilization": FLOATS, "--max-num-seqs": INTS, "-q": TEXT,
               "--weights-memory": SIZES}, True),
    "compare": (["compare", "llama-3.2-1b-instruct", "qwen3-0.6b"],
                {"--max-model-len": INTS, "--gpu": GPUS, "--gpu-memory": SIZES, "-tp": INTS, "--engine": ENGINES,
                 "--kv-cache-dtype": DTYPES, "--gpu-memory-utilization": FLOATS}, True),
    "throughput": (["throughput", "qwen3-1.7b"],
                   {"--gpu": GPUS, "--gpu-memory": SIZES, "--bandwidth": SIZES.map(lambda s: s + "/s"),
                    "--tflops": FLOATS, "-tp": INTS, "--engine": ENGINES, "--max-model-len": INTS,
                    "--kv-cache-dtype": DTYPES, "--gpu-memory-utilization": FLOATS, "--max-num-seqs": INTS,
                    "--batch": INTS, "--prompt-len": INTS, "--output-len": INTS, "--efficiency": FLOATS}, True),
    "verify": (["verify", "llama-3.2-1b-instruct", "--device", "cpu"],
               {"--engine": ENGINES, "--kv-cache-dtype": DTYPES, "-tp": VERIFY_INTS, "--block-size": VERIFY_INTS,
                "--max-model-len": VERIFY_INTS, "--num-blocks": VERIFY_INTS, "--tokens": VERIFY_INTS,
                "--batch": VERIFY_INTS, "--layers": VERIFY_INTS, "--tolerance": FLOATS, "-E": OPTION_VALUES}, True),
}  # fmt: skip
#: plan's usual GPU, added unless the example chose its own hardware (so most runs reach the arithmetic)
_HARDWARE = ("--gpu", "--gpu-memory", "--kv-cache-memory")


@st.composite
def invocation(draw, name: str) -> tuple[list[str], bool]:
    fixed, options, json_out = COMMANDS[name]
    chosen = draw(st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=4, unique=True))
    args = list(fixed)
    for flag in chosen:
        args += [flag, draw(options[flag])]
    if name.startswith(("plan", "curve", "throughput")) and not set(chosen) & set(_HARDWARE):
        args += ["--gpu", "H100-80GB"]
    return args + (["--json"] if json_out else []), json_out


@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_option_values(cli, command, data):
    args, json_out = data.draw(invocation(command))
    assert_clean(cli(*args), json_output=json_out)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(args=st.lists(st.one_of(st.sampled_from(["plan", "inspect", "check", "-h", "--json", "--gpu", "-tp", "--",
                                                "--token", "-E", "llama-3.1-8b", "--version", "="]),
                               st.text(max_size=8)), max_size=6))  # fmt: skip
def test_any_argument_list(cli, tmp_path, monkeypatch, args):
    """Arbitrary words on the command line: a result, help, or a usage error; never a crash."""
    monkeypatch.chdir(tmp_path)  # `check` on a random word must not find the repository's files
    result = cli(*args)
    assert "Traceback" not in result.stdout + result.stderr
    assert "error[internal]" not in result.stderr, result.stderr
    assert result.exit_code in (0, 1, 2)


#: inputs that crashed before (each now a result or its documented error), kept as fixed cases
REGRESSIONS = [
    (["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--max-model-len", HUGE[1], "--json"], "invalid-input"),
    (["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--block-size", HUGE[1]], "invalid-input"),
    (["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--engine", "llamacpp", "--max-model-len", HUGE[1]], "invalid-input"),
    (["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "-pp", "2", "-E", "pp_layer_partition=1.5"], "invalid-parallelism"),
    (["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "-pp", "2", "-E", "pp_layer_partition=16,16", "--json"], None),
    (["plan", "gemma-2-9b-it", "--gpu", "H100-80GB", "--engine", "sglang", "-E", "swa_full_tokens_ratio=abc"], "invalid-input"),
    (["plan", "gemma-2-9b-it", "--gpu", "H100-80GB", "--engine", "sglang", "-E", "mem_fraction_static=abc"], "invalid-input"),
    (["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--engine", "llamacpp", "-E", f"n_seq_max={HUGE[1]}"], "invalid-input"),
    (["curve", "llama-3.1-8b", "--gpu", ""], "invalid-input"),
    (["curve", "llama-3.1-8b", "--gpu", "L4", "--lengths", "inf"], "invalid-input"),
    (["curve", "llama-3.1-8b", "--gpu", "L4", "--lengths", HUGE[1]], "invalid-input"),
    (["compare", "llama-3.1-8b", "qwen3-8b", "--max-model-len", HUGE[1]], "invalid-input"),
    (["throughput", "llama-3.1-8b", "--gpu", "H100-80GB", "--batch", HUGE[1]], "invalid-input"),
    (["verify", "llama-3.1-8b", "--device", "cpu", "--max-model-len", HUGE[1]], "invalid-input"),
    (["verify", "llama-3.1-8b", "--device", "cpu", "--tokens", HUGE[1], "--engine", "hf"], "invalid-input"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "code"), REGRESSIONS, ids=[" ".join(a)[:70] for a, _ in REGRESSIONS]
)
def test_inputs_that_crashed_before(cli, args, code):
    result = cli(*args)
    assert_clean(result, json_output="--json" in args)
    if code is None:
        assert result.exit_code in (0, 1), result.stderr
    else:
        assert result.stderr.startswith(f"error[{code}]: "), result.stderr
