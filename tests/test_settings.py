"""The one table of settings: every command, the serve-flag map and the deployment keys read it.

A setting has one name, one parser and one help text everywhere; these tests fail when a command,
the `vllm serve` reader or the deployment-file keys gain a setting the table lacks, or spell one
differently.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from kvcalc.cli.app import _register_commands, app
from kvcalc.deploy.keys import DEPLOYMENT_KEYS, SECTIONS, convert
from kvcalc.errors import InputError
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import FLAGS, parse_serve_command
from kvcalc.planning.settings import BY_FIELD, BY_NAME, SETTINGS, Kind

ROOT = Path(__file__).resolve().parent.parent
PLANNING_COMMANDS = ("plan", "curve", "compare", "throughput")


def _commands() -> dict:
    _register_commands(())
    group = typer.main.get_command(app)  # typer's own click: compared by duck type
    return dict(group.commands)  # type: ignore[attr-defined]


COMMANDS = _commands()


def _options(command: str) -> dict:
    return {p.name: p for p in COMMANDS[command].params if p.param_type_name == "option" and p.name}


def _offered(s) -> list[str]:
    return [c for c in COMMANDS if s.param in _options(c) and not _options(c)[s.param].hidden]


#: one text each kind's parser must read, and what it reads it as
SAMPLES = {
    Kind.TEXT: ("abc", "abc"),
    Kind.COUNT: ("8", 8),
    Kind.TOKENS: ("32K", 32768),
    Kind.FRACTION: ("0.85", 0.85),
    Kind.THRESHOLD: ("5%", 0.05),
    Kind.SIZE: ("20GiB", 20 << 30),
    Kind.ENGINE: ("sglang", "sglang"),
    Kind.WEIGHT_DTYPE: ("half", "float16"),
    Kind.CACHE_DTYPE: ("fp8", "fp8"),
    Kind.GPU: ("L40S", "L40S"),
    Kind.OPTIONS: ("n_seq_max=4", ("n_seq_max", 4)),
    Kind.COUNTS: ("1, 2,4 8", (1, 2, 4, 8)),
    Kind.GRAPH_MODE: ("full_and_piecewise", "FULL_AND_PIECEWISE"),
    Kind.JSON: ('{"method": "mtp"}', '{"method": "mtp"}'),
}
VALUED = [s for s in SETTINGS if s.cli_flags and s.kind is not Kind.BOOL]


@pytest.mark.parametrize("s", [s for s in SETTINGS if s.cli_flags], ids=lambda s: s.name)
def test_every_command_spells_a_setting_the_same_way(s):
    offered = _offered(s)
    assert offered, f"{s.name} is in the table but no command offers it"
    for command in offered:
        option = _options(command)[s.param]
        assert sorted(option.opts + option.secondary_opts) == sorted(s.cli_flags), command
        # the table's help, then at most a note of the command's own
        table = [s.help_for("cli", default_shown=shown).rstrip(".") for shown in (True, False)]
        assert any((option.help or "").startswith(t) for t in table), (command, option.help)


@pytest.mark.parametrize("s", VALUED, ids=lambda s: s.name)
def test_every_command_parses_a_setting_identically(s):
    text, expected = SAMPLES[s.kind]
    assert s.parse(text) == expected
    for command in _offered(s):
        option = _options(command)[s.param]
        ctx = COMMANDS[command].context_class(COMMANDS[command])
        if option.multiple:
            assert tuple(option.process_value(ctx, [text])) == (expected,), command
        else:
            assert option.process_value(ctx, text) == expected, command


@pytest.mark.parametrize("flag", ["-pp", "--num-gpus", "--dtype", "-q", "--weights-memory",
                                  "--block-size", "--kv-cache-memory", "-E", "--engine",
                                  "--max-model-len", "--gpu-memory-utilization"])  # fmt: skip
def test_planning_commands_take_the_deployment_settings(flag):
    takes = {c for c in PLANNING_COMMANDS for o in _options(c).values() if flag in o.opts}
    expected = set(PLANNING_COMMANDS) - ({"curve", "compare"} if flag == "--num-gpus" else set())
    assert takes == expected


def test_no_command_option_reuses_a_table_flag_for_something_else():
    flags = {f: s for s in SETTINGS for f in s.cli_flags}
    for command in COMMANDS:
        for name, option in _options(command).items():
            for flag in option.opts + option.secondary_opts:
                if flag in flags:
                    assert flags[flag].param == name, (command, flag)


def test_repeatable_where_a_command_draws_one_series_each():
    curve = _options("curve")
    assert curve["engine"].multiple and curve["kv_cache_dtype"].multiple
    assert _options("throughput")["batch"].multiple
    assert not _options("plan")["engine"].multiple


def test_engine_is_repeatable_alike_wherever_it_draws_one_row_each():
    """curve, compare and throughput: the same flags, parser and table help for ``--engine``."""
    ctx = COMMANDS["curve"].context_class(COMMANDS["curve"])
    options = {c: _options(c)["engine"] for c in ("curve", "compare", "throughput")}
    for command, option in options.items():
        assert option.multiple and option.opts == ["--engine"], command
        table_help = BY_NAME["engine"].help_for("cli", default_shown=True).rstrip(".")
        assert option.help.startswith(table_help), command
        texts = ["vllm", "sglang", "llama.cpp"]
        parsed = tuple(BY_NAME["engine"].parse(t) for t in texts)
        assert tuple(option.process_value(ctx, texts)) == parsed, command


# -- the serve-flag map and the deployment keys come from the table ------------------------------
def test_serve_flags_are_the_tables():
    assert {name: spellings for name, (_, spellings) in FLAGS.items()} == {
        s.field or s.name: s.serve for s in SETTINGS if s.serve
    }
    assert set(FLAGS) - {"model", "revision"} <= set(PlanInputs.__dataclass_fields__)


def test_deployment_keys_are_the_tables():
    from_table = {s.yaml for s in SETTINGS if s.yaml}
    # the keys only a file has: its name, and recommend (check's search, not a plan setting)
    written = {k.name for k in DEPLOYMENT_KEYS if k.kind != "section"} - {"name", "recommend"}
    written |= {f"workload.{k.name}" for k in SECTIONS["workload"]}
    assert written == from_table
    for key in [*DEPLOYMENT_KEYS, *SECTIONS["workload"]]:
        if key.field:
            assert BY_FIELD[key.field].yaml.rpartition(".")[2] == key.name
            assert key.help == BY_FIELD[key.field].help_for("yaml")


def test_every_plan_input_is_a_setting():
    # unmodelled_flags is filled from a serving command (ignore_unmodelled), never given
    assert set(PlanInputs.__dataclass_fields__) - {"unmodelled_flags"} == set(BY_FIELD)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("max_model_len", "32k", 32000),
        ("max_num_batched_tokens", "8K", 8192),
        ("tensor_parallel_size", "4", 4),
        ("gpu_memory_utilization", "0.8", 0.8),
        ("dtype", "half", "float16"),
    ],
)
def test_the_three_surfaces_read_a_value_alike(name, text, expected):
    s = BY_NAME[name]
    assert s.parse(text) == expected  # the command line
    key = next(k for k in DEPLOYMENT_KEYS if k.field == s.field)
    yaml_value = convert(key, float(text) if s.kind is Kind.FRACTION else
                         int(text) if s.kind is Kind.COUNT else text)  # fmt: skip
    if name == "dtype":  # the file keeps the spelling; the deployment reader normalises it
        assert yaml_value == "half"
    else:
        assert yaml_value == expected  # a deployment file
    flag = s.serve[0]
    assert parse_serve_command(f"vllm serve m {flag} {text}").values == {s.field: expected}


def test_vllm_reads_kv_cache_memory_bytes_as_bytes():
    # vLLM's --kv-cache-memory-bytes is a byte count (human_readable_int); kvcalc's own
    # --kv-cache-memory / kv_cache_memory take a size whose bare small number is GiB
    s = BY_NAME["kv_cache_memory"]
    assert parse_serve_command("vllm serve m --kv-cache-memory-bytes 1000").values == {
        "kv_cache_memory_bytes": 1000
    }
    assert s.parse("20") == 20 << 30


# -- what the commands say ------------------------------------------------------------------------
def test_verify_refuses_gpu_with_its_own_words(cli):
    result = cli("verify", "llama-3.1-8b", "--gpu", "H100")
    assert result.exit_code == 2
    error, hint = result.stderr.splitlines()
    assert error == (
        "error[usage]: verify measures the cache on this machine's device; --gpu names "
        "memory it does not have"
    )
    assert hint.startswith("hint: use --device cpu or --device cuda here")
    assert not re.search(r"--gpu(?![-\w])", cli("verify", "-h").stdout)


def test_compare_refuses_a_gpu_setting_without_a_gpu(cli):
    result = cli("compare", "qwen3-8b", "llama-3.1-8b", "-q", "fp8")
    assert result.exit_code == 2
    assert result.stderr.startswith("error[missing-gpu]: --quantization needs a GPU")


def test_compare_takes_quantization_with_a_gpu(cli):
    rows = cli("compare", "llama-3.1-8b", "--gpu", "L4", "-q", "fp8", "--json").json["rows"]
    plain = cli("compare", "llama-3.1-8b", "--gpu", "L4", "--json").json["rows"]
    # fp8 weights: 1 byte a parameter instead of 2, so about half
    assert rows[0]["weights_bytes"] < 0.6 * plain[0]["weights_bytes"]


def test_curve_takes_pipeline_parallel_like_plan(cli):
    curve = cli("curve", "llama-3.1-8b", "--gpu", "L4", "-pp", "2", "--lengths", "8K", "--json")
    plan = cli("plan", "llama-3.1-8b", "--gpu", "L4", "-pp", "2", "--max-model-len", "8K",
               "--json", "--no-throughput")  # fmt: skip
    assert curve.exit_code == 0 and plan.exit_code == 0
    (point,) = curve.json["series"][0]["points"]
    assert point["max_concurrency"] == pytest.approx(plan.json["max_concurrency"])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_ends_with_the_examples(cli, command):
    text = cli(command, "-h").stdout
    assert text.index("Options:") < text.index("Examples:")
    tail = text[text.index("Examples:") :].strip().splitlines()[1:]
    assert [line for line in tail if line.strip()] and all(
        line.strip().startswith(f"kvcalc {command}") for line in tail if line.strip()
    )


def test_the_table_imports_nothing_heavy():
    code = (
        "import sys, json\n"
        "import kvcalc.planning.settings, kvcalc.cli.options\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'yaml', 'huggingface_hub', 'gguf') or m.startswith(('kvcalc.engines', "
        "'kvcalc.hfconfig', 'kvcalc.sources', 'kvcalc.estimate', 'kvcalc.planning.core')))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert json.loads(done.stdout) == []


def test_a_bad_value_is_kvcalcs_own_error():
    with pytest.raises(InputError, match="--block-size: must be at least 1, got 0"):
        BY_NAME["block_size"].parse("0")
    with pytest.raises(InputError, match="unknown weight dtype 'fp7'"):
        BY_NAME["dtype"].parse("fp7")


def test_a_serving_commands_dtype_auto_still_conflicts_with_a_given_dtype(cli):
    result = cli("plan", "--from-command", "vllm serve llama-3.1-8b --dtype auto", "--gpu", "H100",
                 "--dtype", "bfloat16")  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error[conflicting-options]: dtype is 'bfloat16'")


def test_from_command_fills_what_the_options_left_at_the_tables_default(cli):
    pasted = cli("plan", "--from-command", "vllm serve llama-3.1-8b -tp 2 --max-model-len 8k",
                 "--gpu", "L4", "--json", "--no-throughput").json  # fmt: skip
    typed = cli("plan", "llama-3.1-8b", "-tp", "2", "--max-model-len", "8k", "--gpu", "L4",
                "--json", "--no-throughput").json  # fmt: skip
    assert pasted["inputs"]["tensor_parallel_size"] == 2
    assert pasted["inputs"]["max_model_len"] == 8000
    assert pasted["kv_cache_tokens"] == typed["kv_cache_tokens"]


def test_throughput_reads_a_pasted_serving_command_like_plan(cli):
    pasted = cli("throughput", "llama-3.1-8b", "--gpu", "L4", "--json",
                 "--from-command", "vllm serve llama-3.1-8b --max-model-len 8k --port 8000")  # fmt: skip
    typed = cli("throughput", "llama-3.1-8b", "--gpu", "L4", "--max-model-len", "8k", "--json")
    assert pasted.exit_code == typed.exit_code == 0
    assert pasted.json == typed.json
    # what the command held that kvcalc does not use is said, not dropped
    assert "note: --from-command: --port: no effect on memory" in pasted.stderr
    # a flag vLLM does not have is refused as vLLM refuses it; one kvcalc does not model, by name
    unknown = cli("throughput", "llama-3.1-8b", "--gpu", "L4", "--from-command",
                  "vllm serve llama-3.1-8b --foo 1")  # fmt: skip
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith(
        "error[invalid-serve-command]: vllm serve: unrecognized argument --foo"
    )
    lora = cli("throughput", "llama-3.1-8b", "--gpu", "L4", "--from-command",
               "vllm serve llama-3.1-8b --enable-lora --lora-target-modules o_proj")  # fmt: skip
    assert lora.exit_code == 2
    assert lora.stderr.startswith("error[flag-not-modelled]: kvcalc does not model "
                                  "--lora-target-modules (LoRA adapters)")  # fmt: skip


def test_curve_refuses_a_pasted_command_for_another_model(cli):
    result = cli("curve", "qwen3-8b", "--gpu", "L4", "--from-command", "vllm serve llama-3.1-8b")
    assert result.exit_code == 2
    assert result.stderr.startswith("error[conflicting-options]: the model 'qwen3-8b' differs")


def test_a_deployment_file_takes_allow_long_max_model_len_as_plan_does(cli, tmp_path):
    # Llama-3.1-8B derives 131,072 tokens; 200,000 is refused unless long lengths are allowed
    for allow, verdict_is_wont_start in ((False, True), (True, False)):
        f = tmp_path / "d.yaml"
        f.write_text("model: llama-3.1-8b\ngpu: H200\nmax_model_len: 200000\n"
                     f"allow_long_max_model_len: {str(allow).lower()}\n", encoding="utf-8")  # fmt: skip
        (result,) = cli("check", str(f), "--format", "json").json
        flag = ["--allow-long-max-model-len"] if allow else []
        plan = cli("plan", "llama-3.1-8b", "--gpu", "H200", "--max-model-len", "200000", *flag,
                   "--json", "--no-throughput").json  # fmt: skip
        assert result["verdict"] == plan["verdict"]
        assert (plan["verdict"] == "wont-start") is verdict_is_wont_start
