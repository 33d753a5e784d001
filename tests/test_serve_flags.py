"""Every flag of vLLM 0.33.0's ``vllm serve`` is classified: modelled, no effect on memory, or not
modelled — walked from vLLM's own parser, recorded (``tests/fixtures/vllm_0_33/serve_flags.json``,
``scripts/serve_flags.py vllm``). A flag the next release adds fails here until it is read and
placed; a flag that gains a ``serve=`` spelling in the settings table becomes modelled by itself.

With ``KVCALC_VLLM_PYTHON`` set to the reference venv's python (vLLM 0.33.0 installed) and
``KVCALC_VLLM_REFERENCE`` to the reference harness's folder, the parser is rebuilt and must equal
the recording; CI has no vLLM and checks the recording.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from kvcalc.engines.flag_table import flag_table
from kvcalc.engines.vllm.serve_flags import (
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
MODELLED = {f["options"][0] for f in RECORDED["flags"] if set(f["options"]) & modelled_options()}


def test_the_recording_says_where_it_comes_from():
    assert RECORDED["engine"] == "vLLM 0.33.0"
    assert RECORDED["program"] == "vllm serve"
    assert "make_arg_parser" in RECORDED["recorded_with"]
    assert RECORDED["command"].startswith(
        "HF_HUB_OFFLINE=1 $VLLMENV/bin/python scripts/serve_flags.py vllm"
    )
    assert RECORDED["recorded_on"]
    for path in (RECORDING, SGLANG_RECORDING):
        assert "/work/" not in path.read_text(encoding="utf-8")
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
    assert parse_serve_command("vllm serve m --no-enable-prefix-caching").values == {
        "enable_prefix_caching": False
    }
    with pytest.raises(InputError) as err:
        parse_serve_command("vllm serve m --no-enable-chunked-prefill")
    assert "--enable-chunked-prefill" in err.value.message  # named by the flag, not the spelling


@pytest.mark.skipif(not os.environ.get("KVCALC_VLLM_PYTHON"), reason="no vLLM reference venv")
def test_the_recording_is_vllms_parser_today():
    out = subprocess.run(
        [os.environ["KVCALC_VLLM_PYTHON"], str(ROOT / "scripts" / "serve_flags.py"), "vllm",
         "--harness", os.environ["KVCALC_VLLM_REFERENCE"]],
        capture_output=True, text=True, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    live = json.loads(out.stdout)
    assert live["engine"] == RECORDED["engine"]
    assert live["flags"] == RECORDED["flags"], "a new vLLM: re-record, then classify the new flags"
    assert live["validated"] == RECORDED["validated"]
    assert live["config_keys"] == RECORDED["config_keys"]
