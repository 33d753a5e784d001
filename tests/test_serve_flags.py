"""Every flag of vLLM 0.33.0's ``vllm serve`` is classified: modelled, no effect on memory, or not
modelled — walked from vLLM's own parser, recorded (``tests/fixtures/vllm_0_33/serve_flags.json``,
``scripts/serve_flags.py vllm``). A flag the next release adds fails here until it is read and
placed; a flag that gains a ``serve=`` spelling in the settings table becomes modelled by itself.

CI has no vLLM, so the suite checks the recording. To check the recording against vLLM itself,
re-record it with the reference venv (``scripts/serve_flags.py``'s docstring has the command) and
``git diff`` it: a new release's flags show up there, and here as unclassified.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path

import pytest

from kvcalc.engines.flag_table import flag_table
from kvcalc.engines.vllm.serve_flags import (
    ENGINE_OPTION_DESTS,
    NO_EFFECT,
    NO_EFFECT_CONFIG_KEYS,
    NO_EFFECT_VALUES,
    UNMODELLED,
)
from kvcalc.errors import InputError
from kvcalc.planning.servecmd import parse_serve_command
from kvcalc.planning.servecmd_flags import FlagClass, classify, modelled_options, setting_for
from kvcalc.planning.settings import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "tests" / "fixtures" / "vllm_0_33" / "serve_flags.json"
SGLANG_RECORDING = ROOT / "tests" / "fixtures" / "sglang_0_5_23" / "launch_server_flags.json"


def _script():
    spec = importlib.util.spec_from_file_location(
        "serve_flags_script", ROOT / "scripts" / "serve_flags.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorded() -> dict:
    return json.loads(RECORDING.read_text(encoding="utf-8"))


RECORDED = _recorded()
NAMES = [f["options"][0] for f in RECORDED["flags"]]
REVIEWED_UNMODELLED = {name for names in UNMODELLED.values() for name in names}
MODELLED = {
    f["options"][0]
    for f in RECORDED["flags"]
    if set(f["options"]) & modelled_options() or f["dest"] in ENGINE_OPTION_DESTS
}


def test_the_recording_says_where_it_comes_from():
    assert RECORDED["engine"] == "vLLM 0.33.0"
    assert RECORDED["program"] == "vllm serve"
    assert "make_arg_parser" in RECORDED["recorded_with"]
    assert RECORDED["command"].startswith(
        "HF_HUB_OFFLINE=1 $VLLMENV/bin/python scripts/serve_flags.py vllm"
    )
    assert RECORDED["recorded_on"]
    # no path of the recording machine: tests/test_fixture_provenance.py checks every fixture
    # vLLM 0.33.0 make_arg_parser: 320 flags (FrontendArgs, AsyncEngineArgs and serve's own)
    assert len(NAMES) == len(set(NAMES)) == 320


def test_the_runtime_table_is_compiled_from_the_recordings():
    script = _script()
    table = json.loads((ROOT / "kvcalc" / "data" / "serve_flags.json").read_text(encoding="utf-8"))
    assert table == script.compile_table(), "run: python scripts/serve_flags.py compile"
    assert (ROOT / "kvcalc" / "data" / "serve_flags.json").read_text(
        encoding="utf-8"
    ) == script.dump_table(table)


def test_every_recorded_flag_is_classified():
    """Modelled (derived from the settings table), no effect on memory (listed), or reviewed and
    not modelled: a flag in none of them is one nobody has read."""
    unread = [
        n
        for n in NAMES
        if n not in MODELLED | NO_EFFECT | set(NO_EFFECT_VALUES) | REVIEWED_UNMODELLED
    ]
    assert unread == [], "read what vLLM does with these flags and classify them"


def test_no_flag_is_in_two_classes():
    assert MODELLED & NO_EFFECT == set()
    assert MODELLED & set(NO_EFFECT_VALUES) == set()
    assert NO_EFFECT & set(NO_EFFECT_VALUES) == set()
    assert NO_EFFECT & REVIEWED_UNMODELLED == set()
    groups = [set(names) for names in UNMODELLED.values()]
    assert sum(len(g) for g in groups) == len(set().union(*groups))  # one reason each
    # the value-dependent ones are not modelled for the other values, so they are reviewed too
    assert set(NO_EFFECT_VALUES) <= REVIEWED_UNMODELLED


def test_the_lists_name_only_vllm_flags():
    names = set(NAMES)
    assert NO_EFFECT - names == set()
    assert set(NO_EFFECT_VALUES) - names == set()
    assert REVIEWED_UNMODELLED - names == set()
    keys = set(RECORDED["config_keys"]["compilation_config"])
    assert NO_EFFECT_CONFIG_KEYS["compilation_config"] - keys == set()


def test_every_serve_spelling_of_the_settings_is_a_vllm_option():
    options = {o for f in RECORDED["flags"] for o in f["options"]}
    spelled = {o for s in SETTINGS for o in s.serve if "." not in o}
    assert spelled - options == set()
    # and what is modelled today (the flags other streams model join this by themselves)
    assert {"--max-model-len", "--tensor-parallel-size", "--kv-cache-dtype", "--dtype",
            "--compilation-config", "--optimization-level"} <= MODELLED  # fmt: skip


def _sample(flag) -> list[str]:
    """A value vLLM accepts for the flag, as text tokens."""
    if not flag.takes_value:
        return []
    if flag.choices:
        return [flag.shown_choices()[0]]
    setting = setting_for(flag)
    samples = {"model": "m2", "revision": "main", "max_model_len": "4096", "cudagraph_capture_sizes": "8",
               "kv_cache_dtype": "fp8", "quantization": "fp8", "gpu_memory_utilization": "0.8",
               "kv_cache_memory": "8G"}  # fmt: skip
    if setting is not None:
        return [samples.get(setting.name, "16")]
    if flag.dest == "compilation_config":
        return ['{"cudagraph_mode": "FULL"}']
    return ['{"a": 1}' if flag.type in ("parse_dataclass", "_parse_type") else "1"]


@pytest.mark.parametrize("name", NAMES)
def test_each_flag_in_a_command_does_what_its_class_says(name):
    flag = flag_table("vllm").find(name)
    text = ["vllm", "serve", "m", name, *_sample(flag)]
    command = " ".join(shlex.quote(t) for t in text)
    cls = classify(flag, (_sample(flag) or [None])[0])
    if name == "--model":
        command = "vllm serve --model m2"
    if cls is FlagClass.NOT_MODELLED:
        with pytest.raises(InputError) as err:
            parse_serve_command(command)
        assert err.value.code == "flag-not-modelled"
        assert name in err.value.message
        cmd = parse_serve_command(command, ignore_unmodelled=True)
        assert cmd.unmodelled == (name,)
        return
    cmd = parse_serve_command(command)
    assert cmd.unmodelled == ()
    if cls is FlagClass.NO_EFFECT:
        assert cmd.values == {} and cmd.notes == (f"{name}: no effect on memory",)
    elif name not in ("--model", "--revision"):
        assert cmd.values, name


def test_a_flag_that_is_an_engine_option_fills_it():
    # --num-gpu-blocks-override is CacheConfig.num_gpu_blocks_override, kvcalc's -E option of
    # the same name; None (vLLM's _optional_type) leaves it unset
    cmd = parse_serve_command("vllm serve m --num-gpu-blocks-override 1000 -tp 2")
    assert cmd.values == {"engine_options": (("num_gpu_blocks_override", 1000),),
                          "tensor_parallel_size": 2}  # fmt: skip
    assert cmd.describe("engine_options") == "-E num_gpu_blocks_override=1000"
    assert parse_serve_command("vllm serve m --num-gpu-blocks-override None").values == {}
    for bad in ("1k", "1.5", "x"):
        with pytest.raises(InputError) as err:
            parse_serve_command(f"vllm serve m --num-gpu-blocks-override {bad}")
        assert err.value.code == "invalid-serve-command"
    with pytest.raises(InputError) as err:
        parse_serve_command(
            "vllm serve m --num-gpu-blocks-override 10 --num-gpu-blocks-override 20"
        )
    assert err.value.code == "conflicting-flags"


@pytest.mark.parametrize(("command", "choices"), [
    # argparse's own choices (vllm/config/model.py ModelDType)
    ("vllm serve m --dtype bf16", "choose from auto, bfloat16, float, float16, float32, half"),
    # CacheConfig._validate_cache_dtype: vLLM's names, not kvcalc's short ones
    ("vllm serve m --kv-cache-dtype bf16", "accepts only auto, float16, bfloat16, fp8, fp8_e4m3"),
    ("vllm serve m --kv-cache-dtype fp16", "accepts only auto, float16, bfloat16, fp8,"),
    ("vllm serve m -q bitsandbytes", "accepts only awq, auto_awq, fp8, fbgemm_fp8"),
    ("vllm serve m --max-lora-rank 48 --ignore-patterns x", "choose from 1, 8, 16, 32, 64, 128, 256, 320, 512"),
    ("vllm serve m --log-level debug", "choose from CRITICAL, ERROR, WARNING, INFO, DEBUG, NOTSET"),
])  # fmt: skip
def test_what_vllm_refuses_is_refused_with_its_own_list(command, choices):
    with pytest.raises(InputError) as err:
        parse_serve_command(command, ignore_unmodelled=True)
    assert err.value.code == "invalid-serve-command"
    assert choices in err.value.message


def test_vllms_spellings_are_read():
    cmd = parse_serve_command(
        "vllm serve m --dtype half --kv-cache-dtype bfloat16 -q FP8 --log-level DEBUG"
    )
    assert cmd.values == {"dtype": "float16", "kv_cache_dtype": "bfloat16", "quantization": "FP8"}
    assert cmd.notes == ("--log-level: no effect on memory",)


def test_value_dependent_flags():
    assert parse_serve_command("vllm serve m --load-format safetensors").unmodelled == ()
    with pytest.raises(InputError) as err:
        parse_serve_command("vllm serve m --load-format bitsandbytes")
    assert err.value.code == "flag-not-modelled" and "--load-format" in err.value.message
    assert "bitsandbytes" not in err.value.message  # the flag, never its value


def test_hidden_negations_and_switches():
    # EnableDisableAction keeps --no-enable-x registered (vllm/utils/argparse_utils.py)
    assert parse_serve_command("vllm serve m --no-enforce-eager").values == {"enforce_eager": False}
    # a flag's other spellings are named by the flag
    assert parse_serve_command("vllm serve m --disable-log-requests").notes == (
        "--enable-log-requests: no effect on memory",
    )
    # every spelling of a modelled flag is read: --disable-prefix-caching is the hidden
    # --no-enable-prefix-caching's twin (the settings table names only --enable-prefix-caching)
    for off in ("--no-enable-prefix-caching", "--disable-prefix-caching"):
        assert parse_serve_command(f"vllm serve m {off}").values == {"enable_prefix_caching": False}
    with pytest.raises(InputError) as err:
        parse_serve_command("vllm serve m --no-enable-sleep-mode")
    assert "--enable-sleep-mode" in err.value.message  # named by the flag, not the spelling


# -- SGLang 0.5.23: python -m sglang.launch_server ------------------------------------------------
SGLANG = json.loads(SGLANG_RECORDING.read_text(encoding="utf-8"))
SGLANG_NAMES = [f["options"][0] for f in SGLANG["flags"]]


def _sglang_classes():
    from kvcalc.engines.sglang import server_flags as s
    from kvcalc.planning.servecmd_flags import sglang_dialect

    d = sglang_dialect()
    table = flag_table("sglang")
    modelled = {n for n in SGLANG_NAMES if classify(table.find(n), None, d) is FlagClass.MODELLED}
    reviewed = {n for names in s.UNMODELLED.values() for n in names}
    return modelled, s.NO_EFFECT, reviewed, s.UNMODELLED


def test_the_sglang_recording_says_where_it_comes_from():
    assert SGLANG["engine"] == "SGLang 0.5.23"
    assert "ServerArgs.add_cli_args" in SGLANG["recorded_with"]
    assert SGLANG["command"].startswith("$SGLANGENV/bin/python scripts/serve_flags.py sglang")
    # sglang/srt/server_args.py ServerArgs.add_cli_args: 531 flags
    assert len(SGLANG_NAMES) == len(set(SGLANG_NAMES)) == 531


def test_every_sglang_flag_is_classified_once():
    modelled, no_effect, reviewed, groups = _sglang_classes()
    assert [n for n in SGLANG_NAMES if n not in modelled | no_effect | reviewed] == []
    assert modelled & no_effect == set() and no_effect & reviewed == set()
    assert sum(len(g) for g in groups.values()) == len(reviewed)
    assert (no_effect | reviewed) - set(SGLANG_NAMES) == set()
    # the settings' SGLang spellings and the engine options kvcalc reads (-E page_size, ...)
    assert {"--model-path", "--tp-size", "--context-length", "--mem-fraction-static",
            "--max-running-requests", "--page-size", "--max-total-tokens",
            "--disable-radix-cache"} <= modelled  # fmt: skip


@pytest.mark.parametrize("name", SGLANG_NAMES)
def test_each_sglang_flag_does_what_its_class_says(name):
    from kvcalc.planning.servecmd_flags import sglang_dialect

    flag = flag_table("sglang").find(name)
    sample = []
    if flag.takes_value:
        sample = [flag.shown_choices()[0]] if flag.choices else ["1"]
    if name == "--mem-fraction-static" or name.endswith("-ratio"):
        sample = ["0.5"]
    if name == "--attn-dp-size":  # a width of 1 is no DP attention: nothing to set
        sample = ["2"]
    if name == "--cuda-graph-config":  # JSON of phases
        sample = ['{"decode": {"max_bs": 64}}']
    if name in ("--model-path", "--revision", "--dtype", "--quantization", "--kv-cache-dtype"):
        sample = [{"--model-path": "m", "--revision": "main", "--dtype": "half",
                   "--quantization": "fp8", "--kv-cache-dtype": "fp8_e4m3"}[name]]  # fmt: skip
    command = " ".join(
        shlex.quote(t) for t in ["python", "-m", "sglang.launch_server", name, *sample]
    )
    cls = classify(flag, sample[0] if sample else None, sglang_dialect())
    if cls is FlagClass.NOT_MODELLED:
        with pytest.raises(InputError) as err:
            parse_serve_command(command)
        assert err.value.code == "flag-not-modelled" and name in err.value.message
        return
    cmd = parse_serve_command(command)
    assert cmd.values["engine"] == "sglang" and cmd.unmodelled == ()
    if cls is FlagClass.NO_EFFECT:
        assert cmd.notes == (f"{name}: no effect on memory",)
    elif name not in ("--model-path", "--revision"):
        assert set(cmd.values) - {"engine"}, name


def test_an_sglang_command_fills_the_sglang_settings():
    cmd = parse_serve_command(
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 "
        "--mem-fraction-static 0.85 --context-length 32Ki --max-running-requests 64 "
        "--page-size 16 --disable-radix-cache --host 0.0.0.0 --port 30000"
    )
    assert cmd.model == "Qwen/Qwen3-8B"
    # --tp: argparse's unique prefix of --tp-size; 32Ki: SGLang's human_readable_int, 32,768
    assert cmd.values == {
        "engine": "sglang", "tensor_parallel_size": 2, "gpu_memory_utilization": 0.85,
        "max_model_len": 32768, "max_num_seqs": 64,
        "engine_options": (("disable_radix_cache", True), ("page_size", 16)),
    }  # fmt: skip
    assert cmd.notes == ("--host, --port: no effect on memory",)


@pytest.mark.parametrize(("command", "message"), [
    # SGLang's own choices: fp8 is a vLLM name (sglang/srt/server_args.py --kv-cache-dtype)
    ("python -m sglang.launch_server --model-path m --kv-cache-dtype fp8",
     "choose from auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16"),
    # human_readable_int is case-sensitive: K is no suffix
    ("python -m sglang.launch_server --model-path m --context-length 32K", "invalid integer value '32K'"),
    ("python -m sglang.launch_server --model-path m --tp_size 2", "unrecognized argument --tp_size"),
    ("python -m sglang.launch_server m", "unrecognized arguments: 1 argument(s)"),
])  # fmt: skip
def test_what_sglang_refuses_is_refused(command, message):
    with pytest.raises(InputError) as err:
        parse_serve_command(command)
    assert err.value.code == "invalid-serve-command"
    assert message in err.value.message


def test_sglang_unmodelled_flags_are_named():
    with pytest.raises(InputError) as err:
        parse_serve_command(
            "python -m sglang.launch_server --model-path m --dcp-comm-backend a2a --speculative-algorithm "
            "DFLASH --speculative-dflash-block-size 16 --enable-hierarchical-cache "
            "--hicache-storage-backend file"
        )
    assert err.value.code == "flag-not-modelled"
    assert "--dcp-comm-backend (parallelism)" in err.value.message
    assert "--speculative-dflash-block-size (speculative decoding)" in err.value.message
    assert (
        "--hicache-storage-backend (host offload and the hierarchical cache's storage"
        in err.value.message
    )
    assert "--enable-hierarchical-cache" not in err.value.message  # modelled (the host pool)


def test_sglang_speculative_and_dp_attention_flags_are_read():
    """--speculative-algorithm/-draft-model-path/-num-steps fill the spec settings, the topk and
    draft tokens SGLang's engine options; --enable-dp-attention --dp N the DP-attention settings."""
    read = parse_serve_command(
        "python -m sglang.launch_server --model-path m --tp 8 --enable-dp-attention --dp 8 "
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path head "
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    )
    assert read.values == {
        "engine": "sglang", "tensor_parallel_size": 8, "enable_dp_attention": True,
        "data_parallel_size": 8, "spec_method": "EAGLE3", "spec_model": "head", "spec_tokens": 3,
        "engine_options": (("speculative_eagle_topk", 1), ("speculative_num_draft_tokens", 4)),
    }  # fmt: skip


@pytest.mark.parametrize(
    "flags",
    ["--attn-dp-size 8", "--attention-data-parallel-size=8", "--enable-dp-attention --attn-dp-size 8",
     "--attn-dp-size 8 --dp-size 1"],
)  # fmt: skip
def test_sglang_attn_dp_size_is_dp_attention(flags):
    """SGLang 0.5.23's spelling of DP attention (arg_groups/parallel_hook.py
    handle_deprecated_dp_attention turns --dp-size N --enable-dp-attention into attn_dp_size N,
    dp_size 1): the same settings as the deprecated form."""
    read = parse_serve_command(f"python -m sglang.launch_server --model-path m --tp 8 {flags}")
    assert read.values == {"engine": "sglang", "tensor_parallel_size": 8,
                           "enable_dp_attention": True, "data_parallel_size": 8}  # fmt: skip


def test_sglang_attn_dp_size_edges():
    one = parse_serve_command(
        "python -m sglang.launch_server --model-path m --tp 8 --attn-dp-size 1"
    )
    assert one.values == {"engine": "sglang", "tensor_parallel_size": 8}  # width 1: no DP attention
    with pytest.raises(InputError) as err:  # parallel_hook.py: "--attn-dp-size must be positive"
        parse_serve_command("python -m sglang.launch_server --model-path m --attn-dp-size 0")
    assert err.value.code == "invalid-serve-command" and "must be positive" in err.value.message
    with pytest.raises(InputError) as err:  # replicas of an attention-DP group
        parse_serve_command(
            "python -m sglang.launch_server --model-path m --tp 8 --dp-size 2 --attn-dp-size 4"
        )
    assert err.value.code == "unsupported-parallelism"
    assert "--dp-size 2 with --attn-dp-size 4" in err.value.message


def test_sglang_docker_and_cli_forms():
    docker = parse_serve_command(
        "docker run --gpus all lmsysorg/sglang:latest python3 -m sglang.launch_server "
        "--model-path m --tp-size 4"
    )
    cli = parse_serve_command("sglang serve --model-path m --tp-size 4")
    assert docker.values == cli.values == {"engine": "sglang", "tensor_parallel_size": 4}


def test_an_sglang_command_plans_as_the_same_settings_typed(cli):
    pasted = cli("plan", "--gpu", "H100-80GB", "--json", "--no-throughput", "--from-command",
                 "python -m sglang.launch_server --model-path llama-3.1-8b --tp 2 "
                 "--mem-fraction-static 0.85 --context-length 32k --page-size 16 --port 30000")  # fmt: skip
    typed = cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--json", "--no-throughput",
                "--engine", "sglang", "-tp", "2", "--gpu-memory-utilization", "0.85",
                "--max-model-len", "32k", "-E", "page_size=16")  # fmt: skip
    assert pasted.exit_code == typed.exit_code == 0, pasted.stderr
    a, b = pasted.json, typed.json
    assert a["engine"] == "sglang" and a["notes"][0] == "--port: no effect on memory"
    assert {k: v for k, v in a.items() if k != "notes"} == {
        k: v for k, v in b.items() if k != "notes"
    }


def test_every_sglang_spelling_of_the_settings_is_an_sglang_option():
    options = {o for f in SGLANG["flags"] for o in f["options"]}
    assert {o for s in SETTINGS for o in s.sglang} - options == set()
    # the engine options kvcalc's SGLang module reads, by SGLang's own dest names
    from kvcalc.engines.sglang.defaults import EXTRA_KEYS

    dests = {f["dest"] for f in SGLANG["flags"]}
    assert set(EXTRA_KEYS) - dests == {"hybrid_swa"}  # no flag: -E only
