"""vLLM's CUDA-graph settings on every surface: the command line, ``vllm serve`` commands (with
``-cc``/``--compilation-config`` and ``-O`` levels), deployment files, and what a plan does with them."""

from __future__ import annotations

import json

import pytest
from helpers import bundled_shape

from kvcalc import PlanInputs, plan
from kvcalc.deploy.keys import BY_NAME as YAML_KEYS
from kvcalc.deploy.keys import BadValue, convert
from kvcalc.errors import InputError
from kvcalc.planning.servecmd import parse_serve_command


def _values(command: str) -> dict:
    return parse_serve_command(command).values


@pytest.mark.parametrize(("command", "expected"), [
    ("vllm serve m --cudagraph-capture-sizes 1 2 4 8 --max-num-seqs 8",
     {"cudagraph_capture_sizes": (1, 2, 4, 8), "max_num_seqs": 8}),
    ("vllm serve m --cudagraph-capture-sizes=1,2,4", {"cudagraph_capture_sizes": (1, 2, 4)}),
    ("vllm serve m --max-cudagraph-capture-size 64", {"max_cudagraph_capture_size": 64}),
    ("vllm serve m -cc.cudagraph_mode=piecewise", {"cudagraph_mode": "PIECEWISE"}),
    ("vllm serve m --compilation-config.cudagraph_mode FULL", {"cudagraph_mode": "FULL"}),
    ("vllm serve m -cc.cudagraph_capture_sizes=[1,2,4]", {"cudagraph_capture_sizes": (1, 2, 4)}),
    ("vllm serve m -cc.cudagraph_capture_sizes+ 1,2,4", {"cudagraph_capture_sizes": (1, 2, 4)}),
    ("""vllm serve m -cc '{"cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": 128}'""",
     {"cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": 128}),
    ("""vllm serve m --compilation-config='{"cudagraph_capture_sizes":[8,16]}'""",
     {"cudagraph_capture_sizes": (8, 16)}),
    # an optimisation level fills the mode its defaults set, unless the mode is given
    ("vllm serve m -O0", {"cudagraph_mode": "NONE"}),
    ("vllm serve m -O 1", {"cudagraph_mode": "PIECEWISE"}),
    ("vllm serve m --optimization-level=3", {"cudagraph_mode": "FULL_AND_PIECEWISE"}),
    ("vllm serve m -O1 -cc.cudagraph_mode=FULL", {"cudagraph_mode": "FULL"}),
])  # fmt: skip
def test_serve_command_graph_flags(command, expected):
    assert _values(command) == expected


def test_other_compilation_keys_are_refused_by_name_or_said_to_have_no_effect():
    text = """vllm serve m -cc '{"mode": 3, "cudagraph_mode": "FULL", "cache_dir": "/c"}'"""
    with pytest.raises(InputError) as err:
        parse_serve_command(text)
    assert err.value.code == "flag-not-modelled"
    assert "-cc.mode" in err.value.message and "cache_dir" not in err.value.message
    cmd = parse_serve_command(text, ignore_unmodelled=True)
    assert cmd.values == {"cudagraph_mode": "FULL"}
    assert cmd.unmodelled == ("-cc.mode",)
    assert "-cc.cache_dir: no effect on memory" in cmd.notes


@pytest.mark.parametrize("command", [
    "vllm serve m -cc '{not json'",
    "vllm serve m -cc.cudagraph_mode=FULL_ONLY",
    "vllm serve m -O5",
    "vllm serve m --cudagraph-capture-sizes x",
    "vllm serve m -cc",
])  # fmt: skip
def test_bad_graph_flags_are_refused(command):
    with pytest.raises(InputError) as err:
        parse_serve_command(command)
    assert err.value.code in ("invalid-serve-command", "conflicting-flags")


def test_the_same_mode_twice_must_agree():
    with pytest.raises(InputError) as err:
        parse_serve_command(
            'vllm serve m -cc.cudagraph_mode=FULL -cc \'{"cudagraph_mode": "NONE"}\''
        )
    assert err.value.code == "conflicting-flags"


def test_deployment_file_values():
    sizes, mode = YAML_KEYS["cudagraph_capture_sizes"], YAML_KEYS["cudagraph_mode"]
    assert convert(sizes, [1, 2, 4]) == (1, 2, 4)
    assert convert(sizes, "1, 2,4") == (1, 2, 4)
    assert convert(mode, "FULL_and_piecewise") == "full_and_piecewise"
    for bad_sizes in ([], [0], "x", [1.5], {"a": 1}):
        with pytest.raises(BadValue):
            convert(sizes, bad_sizes)
    with pytest.raises(BadValue):
        convert(mode, "fullest")


def test_plan_inputs_normalise_and_refuse():
    inputs = PlanInputs(gpu="H100", cudagraph_capture_sizes=[4, 1], cudagraph_mode="piecewise")
    assert inputs.cudagraph_capture_sizes == (4, 1) and inputs.cudagraph_mode == "PIECEWISE"
    assert json.loads(json.dumps(inputs.to_dict()))["cudagraph_mode"] == "PIECEWISE"
    for bad in ({"cudagraph_capture_sizes": ()}, {"cudagraph_capture_sizes": (0,)},
                {"cudagraph_capture_sizes": "1,2"}, {"max_cudagraph_capture_size": 0},
                {"max_cudagraph_capture_size": True}, {"cudagraph_mode": "sometimes"}):  # fmt: skip
        with pytest.raises(InputError) as err:
            PlanInputs(gpu="H100", **bad)
        assert err.value.code == "invalid-cudagraph-setting"


def _graph_note(result) -> str:
    return next(n for n in result.notes if n.startswith("CUDA graphs"))


def test_plans_use_the_graphs_the_settings_give():
    llama = bundled_shape("llama-3.1-8b")
    base = dict(gpu="H100", max_model_len=8192)
    default = plan(llama, PlanInputs(**base), with_suggestions=False)
    # 1,024 seqs on an H100: 51 sizes 1-512, FULL_AND_PIECEWISE
    assert "51 PIECEWISE (largest 512) + 51 FULL (largest 512)" in _graph_note(default)
    # four sizes, PIECEWISE only: 4 graphs, less graph memory, more KV
    few = plan(llama, PlanInputs(**base, cudagraph_capture_sizes=(1, 2, 4, 8),
                                 cudagraph_mode="PIECEWISE"), with_suggestions=False)  # fmt: skip
    assert "4 PIECEWISE (largest 8) graphs, PIECEWISE" in _graph_note(few)
    assert few.memory.cudagraph_bytes < default.memory.cudagraph_bytes
    assert few.available_kv_bytes - default.available_kv_bytes == (
        default.memory.cudagraph_bytes - few.memory.cudagraph_bytes
    )
    # mode NONE: no graphs at all, as --enforce-eager
    none = plan(llama, PlanInputs(**base, cudagraph_mode="none"), with_suggestions=False)
    eager = plan(llama, PlanInputs(**base, enforce_eager=True), with_suggestions=False)
    assert none.memory.cudagraph_bytes == eager.memory.cudagraph_bytes == 0


def test_cli_flags_reach_the_plan(cli):
    result = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--max-model-len", "8k", "--json",
                 "--max-cudagraph-capture-size", "64", "--cudagraph-mode", "full_decode_only")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["inputs"]["max_cudagraph_capture_size"] == 64
    assert data["inputs"]["cudagraph_mode"] == "FULL_DECODE_ONLY"
    # FULL_DECODE_ONLY at 1,024 seqs, sizes to 64: 11 FULL decode graphs
    assert any("11 FULL (largest 64) graphs, FULL_DECODE_ONLY" in n for n in data["notes"])


def test_cli_refuses_what_vllm_refuses(cli):
    result = cli("plan", "llama-4-scout-17b-16e-instruct", "--gpu", "H100", "--max-model-len", "8k",
                 "--cudagraph-mode", "full")  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error[invalid-cudagraph-setting]:")
    assert "hint:" in result.stderr
