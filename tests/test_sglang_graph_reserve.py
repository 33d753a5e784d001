"""SGLang 0.5.23's ``mem_fraction_static`` under the settings that move its reserve:
``--chunked-prefill-size`` (``-1`` included), ``--max-prefill-tokens``,
``--cuda-graph-max-bs-decode``/``-prefill``, ``--disable-cuda-graph``,
``--disable-decode-cuda-graph``, ``--disable-prefill-cuda-graph``, beside
``--max-running-requests`` and DP attention (``kvcalc/engines/sglang/graphs.py``).

Every row of ``tests/fixtures/sglang_0_5_23/graph_reserve.json`` is SGLang's own argument
resolution (the SGLang reference tool, emulated GPUs): kvcalc's fraction, chunk, decode graph
``max_bs`` and number of prefill graph sizes must equal it, and where SGLang fails kvcalc refuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.engines.sglang.defaults import memory_defaults
from kvcalc.engines.sglang.graphs import CAPTURE_KEYS, GRAPH_KEYS, check_chunk, reserve_settings
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.units import MIB

HERE = Path(__file__).parent / "fixtures"
FIXTURE = json.loads((HERE / "sglang_0_5_23" / "graph_reserve.json").read_text())
ENTRIES = FIXTURE["entries"]
OK_AND_JSON = [e for e in ENTRIES if e["status"] == "ok"]
OK = [e for e in OK_AND_JSON if "cuda_graph_config" not in e["server_args"]]
#: the rows that give --cuda-graph-config (read from a command: its JSON over the per-phase flags)
JSON_ROWS = [e for e in OK_AND_JSON if "cuda_graph_config" in e["server_args"]]
FAILED = [e for e in ENTRIES if e["status"] != "ok"]
#: SGLang's refusals by their reason: the chunk off the page, the prefill graphs' context size,
#: --disable-cuda-graph-padding beside --enable-torch-compile
CHUNK_FAILED = [e for e in FAILED if "divisible by page_size" in e["error"]]
CONTEXT_FAILED = [e for e in FAILED if "--cuda-graph-prefill-max-context" in e["error"]]
PADDING_FAILED = [e for e in FAILED if "--disable-cuda-graph-padding" in e["error"]]
#: the recorded rows of the settings the reserve does not read (taken, checked, no effect)
CAPTURE_ROWS = [
    e
    for e in ENTRIES
    if {*e["server_args"], *e["server_args"].get("cuda_graph_config", {}).get("prefill", {})}
    & {
        *CAPTURE_KEYS,
        "cuda_graph_prefill_max_context",
        "max_context_size",
        "max_seq_len",
        "disable_cuda_graph_padding",
    }
]
CONFIGS = json.loads((HERE / "vllm_0_33" / "reference_configs.json").read_text())["models"]


def _id(entry: dict) -> str:
    args = ",".join(f"{k}={v}" for k, v in entry["server_args"].items()) or "defaults"
    return f"{entry['config'][:-5]}-tp{entry['tp']}-{entry['gpu_memory_mib']}MiB-{args}"


def _shape(name: str):
    m = CONFIGS[name]
    return parse_config(m["config"], name=name[:-5].replace("--", "/"))


def _extra(entry: dict) -> dict:
    return {k: v for k, v in entry["server_args"].items() if k in (*GRAPH_KEYS, "max_total_tokens")}


def _dp(entry: dict) -> int:
    args = entry["server_args"]
    return args.get("dp_size", 1) if args.get("enable_dp_attention") else 1


def test_the_grid_covers_every_setting():
    given = {k for e in ENTRIES for k in e["server_args"]}
    assert set(GRAPH_KEYS) <= given
    assert len(OK) >= 50 and len(FAILED) == 12
    assert (len(CHUNK_FAILED), len(CONTEXT_FAILED), len(PADDING_FAILED)) == (5, 6, 1)
    assert len(CAPTURE_ROWS) == 20 and PADDING_FAILED[0] in CAPTURE_ROWS


@pytest.mark.parametrize("entry", OK, ids=_id)
def test_reserve_equals_sglang(entry):
    dp = _dp(entry)
    got = memory_defaults(
        "latest",
        entry["gpu_memory_mib"] * MIB,
        entry["tp"],
        1,
        _shape(entry["config"]),
        attn_dp=dp,
        max_running_requests=entry["server_args"].get("max_running_requests"),
        settings=reserve_settings(_extra(entry)),
    )
    assert got.mem_fraction_static == entry["mem_fraction_static"]
    # DP attention divides the chunk after the fraction was resolved (handle_data_parallelism)
    assert got.chunked_prefill_size // dp == entry["chunked_prefill_size"]
    graphs = entry["cuda_graph"]
    assert got.decode_graph_max_bs == graphs["decode"]["max_bs"]
    prefill = graphs["prefill"]
    if dp == 1:  # under DP attention SGLang re-clamps the prefill graphs after the fraction
        captured = 0 if prefill["backend"] == "disabled" else prefill["num_bs"]
        assert got.prefill_graph_sizes == captured


@pytest.mark.parametrize("entry", CHUNK_FAILED, ids=_id)
def test_sglang_refusals_are_refused(entry):
    # SGLang 0.5.23 asserts "chunked_prefill_size must be divisible by page_size"
    assert "divisible by page_size" in entry["error"]
    args = entry["server_args"]
    shape = _shape(entry["config"])
    chunk = memory_defaults(
        "latest",
        entry["gpu_memory_mib"] * MIB,
        entry["tp"],
        1,
        shape,
        attn_dp=_dp(entry),
        settings=reserve_settings(_extra(entry)),
    )
    with pytest.raises(InputError) as caught:
        check_chunk(chunk.chunked_prefill_size // _dp(entry), args["page_size"])
    assert caught.value.code == "invalid-input"


def _row(**server_args) -> dict:
    """The recorded Llama-3.1-8B TP 1 H100 row with exactly these settings."""
    (row,) = [
        e
        for e in OK
        if e["config"] == "meta-llama--Llama-3.1-8B.json"
        and e["tp"] == 1
        and e["gpu_memory_mib"] == 81_559
        and e["server_args"] == server_args
    ]
    return row


@pytest.mark.parametrize(
    ("options", "flags", "server_args"),
    [
        (["-E", "chunked_prefill_size=16384"], "--chunked-prefill-size 16384",
         {"chunked_prefill_size": 16384}),
        (["-E", "chunked_prefill_size=-1", "-E", "max_prefill_tokens=32768"],
         "--chunked-prefill-size -1 --max-prefill-tokens 32768",
         {"chunked_prefill_size": -1, "max_prefill_tokens": 32768}),
        (["-E", "disable_cuda_graph=true", "-E", "chunked_prefill_size=2048"],
         "--disable-cuda-graph --chunked-prefill-size 2048",
         {"chunked_prefill_size": 2048, "disable_cuda_graph": True}),
        # 16 decode sizes: 13,904 − 256·2 + 16·2 = 13,424 MiB, round(68,135 / 81,559, 3) = 0.835
        (["-E", "cuda_graph_bs_decode=1,2,4,8,16"], "--cuda-graph-bs-decode 1 2 4 8 16",
         {"cuda_graph_bs_decode": [1, 2, 4, 8, 16]}),
        (["-E", "cuda_graph_bs_prefill=512,1024,2048"], "--cuda-graph-bs-prefill 512 1024 2048",
         {"cuda_graph_bs_prefill": [512, 1024, 2048]}),
        # the backend wins over the switch (parse_cuda_graph_config): the decode graphs stay, 0.83
        (["-E", "disable_decode_cuda_graph=true", "-E", "cuda_graph_backend_decode=full"],
         "--disable-decode-cuda-graph --cuda-graph-backend-decode full",
         {"disable_decode_cuda_graph": True, "cuda_graph_backend_decode": "full"}),
        (["-E", "cuda_graph_backend_prefill=disabled"], "--cuda-graph-backend-prefill disabled",
         {"cuda_graph_backend_prefill": "disabled"}),
    ],
)  # fmt: skip
def test_the_plan_takes_the_fraction_sglang_resolves(cli, tmp_path, options, flags, server_args):
    """From -E options, a pasted launch_server command and a deployment file alike."""
    expected = _row(**server_args)["mem_fraction_static"]
    # the emulated H100's 81,559 MiB (kvcalc's catalog H100 is the driver's 79.22 GiB)
    gpu = ("--gpu", "H100", "--gpu-memory", "81559MiB", "--max-model-len", "8192", "--json")
    by_option = cli("plan", "llama-3.1-8b", *gpu, "--engine", "sglang", *options)
    command = f"python -m sglang.launch_server --model-path llama-3.1-8b {flags}"
    by_command = cli("plan", *gpu, "--from-command", command)
    spec = tmp_path / "d.yaml"
    spec.write_text(
        "deployments:\n  - model: llama-3.1-8b\n    engine: sglang\n    gpu: H100\n"
        "    gpu_memory: 81559MiB\n    max_model_len: 8192\n"
        # a list of graph sizes is written as its text in a file ("1,2,4,8,16"), as with -E
        f"    engine_options: {json.dumps({k: _text(v) for k, v in server_args.items()})}\n"
    )
    filed = cli("check", str(spec), "--format", "json")
    assert filed.exit_code == 0, filed.stderr
    for result in (by_option, by_command):
        assert result.exit_code == 0, result.stderr
        assert result.json["memory"]["gpu_memory_utilization"] == expected
    assert json.loads(filed.stdout)[0]["memory"]["gpu_memory_utilization"] == expected


def _text(value):
    return ",".join(str(v) for v in value) if isinstance(value, list) else value


def test_a_chunk_off_the_page_is_refused_through_the_cli(cli):
    result = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--engine", "sglang",
                 "-E", "page_size=64", "-E", "chunked_prefill_size=3000")  # fmt: skip
    assert result.exit_code == 2
    assert "error[invalid-input]" in result.stderr and "divisible by the page" in result.stderr


@pytest.mark.parametrize("value", [0, -2, True, "4096"])
def test_a_chunk_that_is_neither_minus_one_nor_positive_is_refused(value):
    with pytest.raises(InputError) as caught:
        reserve_settings({"chunked_prefill_size": value})
    assert caught.value.code == "invalid-input"


def test_older_profiles_refuse_the_settings():
    with pytest.raises(InputError) as caught:
        memory_defaults(
            "0.5.8", 81_559 * MIB, settings=reserve_settings({"disable_cuda_graph": True})
        )
    assert caught.value.code == "unmodelled-option"
    # --max-total-tokens alone is not one of them: the older profiles keep taking it
    kept = memory_defaults(
        "0.5.8", 81_559 * MIB, settings=reserve_settings({"max_total_tokens": 4096})
    )
    assert kept.mem_fraction_static == memory_defaults("0.5.8", 81_559 * MIB).mem_fraction_static


def test_no_graph_memory_is_shown_when_sglang_captures_none(cli):
    """``--disable-cuda-graph`` sets both phases' backend to ``disabled``
    (``parse_cuda_graph_config``): SGLang captures no graph, so the CUDA-graph estimate shown
    beside its reserve is 0; one phase left on keeps it."""
    base = ("plan", "llama-3.1-8b", "--gpu", "H100", "--engine", "sglang", "--json")
    off = cli(*base, "-E", "disable_cuda_graph=true")
    decode_only = cli(*base, "-E", "disable_prefill_cuda_graph=true")
    assert off.json["memory"]["cudagraph_bytes"] == 0
    assert decode_only.json["memory"]["cudagraph_bytes"] > 0


def test_an_explicit_prefill_backend_skips_the_compatibility_cascade():
    # Qwen3-VL-8B is outside SGLang's multimodal allow-list: its default prefill graph is
    # disabled (0.772, recorded); --cuda-graph-backend-prefill breakable locks it on, so its 58
    # sizes cost 58 × 8 = 464 MiB more before the vision factor: 0.7676 (recorded)
    (default,) = [
        e for e in OK if e["config"].startswith("Qwen--Qwen3-VL") and not e["server_args"]
    ]
    (forced,) = [
        e
        for e in OK
        if e["config"].startswith("Qwen--Qwen3-VL")
        and e["server_args"] == {"cuda_graph_backend_prefill": "breakable"}
    ]
    assert default["cuda_graph"]["prefill"]["backend"] == "disabled"
    assert forced["cuda_graph"]["prefill"]["backend"] == "breakable"
    shape = _shape(forced["config"])
    off = memory_defaults("latest", 81_559 * MIB, 1, 1, shape, settings=reserve_settings({}))
    on = memory_defaults("latest", 81_559 * MIB, 1, 1, shape,
                         settings=reserve_settings({"cuda_graph_backend_prefill": "breakable"}))  # fmt: skip
    assert (off.prefill_graph_sizes, on.prefill_graph_sizes) == (0, 58)
    assert on.reserved_mib - off.reserved_mib == 58 * 8
    assert (off.mem_fraction_static, on.mem_fraction_static) == (
        default["mem_fraction_static"], forced["mem_fraction_static"],
    )  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"cuda_graph_bs_decode": "1,x"}, "list of positive integers"),
        ({"cuda_graph_bs_decode": [0, 4]}, "list of positive integers"),
        ({"cuda_graph_bs_prefill": ""}, "list of positive integers"),
        ({"cuda_graph_backend_decode": "piecewise"}, "full, breakable, disabled"),
    ],
)
def test_bad_graph_lists_and_backends_are_refused(extra, message):
    with pytest.raises(InputError) as caught:
        reserve_settings(extra)
    assert caught.value.code == "invalid-input" and message in caught.value.message


def test_the_launch_flags_read_their_lists():
    from kvcalc.planning.servecmd import parse_serve_command

    cmd = parse_serve_command("python -m sglang.launch_server --model-path m "
                              "--cuda-graph-bs-decode 1 2 4 --cuda-graph-backend-prefill full")  # fmt: skip
    assert dict(cmd.values["engine_options"]) == {
        "cuda_graph_bs_decode": (1, 2, 4), "cuda_graph_backend_prefill": "full",
    }  # fmt: skip
    with pytest.raises(InputError) as caught:
        parse_serve_command("python -m sglang.launch_server --model-path m "
                            "--cuda-graph-backend-decode piecewise")  # fmt: skip
    assert caught.value.code == "invalid-serve-command"


def _command(args: dict) -> str:
    """The launch_server command of a row's server_args (a list as its values, the JSON quoted)."""
    import shlex

    parts = ["python -m sglang.launch_server --model-path m"]
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:  # a switch
            parts.append(flag)
        elif isinstance(value, dict):
            parts.append(f"{flag} {shlex.quote(json.dumps(value))}")
        elif isinstance(value, list):
            parts.append(f"{flag} {' '.join(str(v) for v in value)}")
        else:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


@pytest.mark.parametrize("entry", JSON_ROWS, ids=_id)
def test_the_json_graph_config_equals_sglang(entry):
    # --cuda-graph-config's backend, max_bs and bs fill the per-phase options, over the flags
    # (the JSON has the highest precedence in parse_cuda_graph_config): SGLang's own resolution
    from kvcalc.planning.servecmd import parse_serve_command

    cmd = parse_serve_command(_command(entry["server_args"]))
    got = memory_defaults("latest", entry["gpu_memory_mib"] * MIB, entry["tp"], 1,
                          _shape(entry["config"]),
                          settings=reserve_settings(dict(cmd.values["engine_options"])))  # fmt: skip
    assert got.mem_fraction_static == entry["mem_fraction_static"]
    graphs = entry["cuda_graph"]
    assert got.decode_graph_max_bs == graphs["decode"]["max_bs"]
    prefill = graphs["prefill"]
    assert got.prefill_graph_sizes == (0 if prefill["backend"] == "disabled" else prefill["num_bs"])


def test_the_json_graph_config_reads_every_key():
    from kvcalc.planning.servecmd import parse_serve_command

    text = json.dumps({"prefill": {"max_seq_len": 4096, "bs": [256], "max_context_size": 2048,
                                   "full_prefill_max_req": 4}})  # fmt: skip
    cmd = parse_serve_command(
        f"python -m sglang.launch_server --model-path m --cuda-graph-config '{text}'"
    )
    assert dict(cmd.values["engine_options"]) == {
        "cuda_graph_max_seq_len_prefill": 4096, "cuda_graph_bs_prefill": (256,),
        "cuda_graph_prefill_max_context": 2048,
    }  # fmt: skip
    for bad in ('{"verify": {}}', '{"decode": {"sizes": [1]}}', "[1]", "{x"):
        with pytest.raises(InputError) as caught:
            parse_serve_command(
                f"python -m sglang.launch_server --model-path m --cuda-graph-config '{bad}'"
            )
        assert caught.value.code == "invalid-serve-command"


GPU_81559 = ("--gpu", "H100", "--gpu-memory", "81559MiB", "--json")


def _llama_command(args: dict) -> str:
    return _command(args).replace("--model-path m", "--model-path llama-3.1-8b")


@pytest.mark.parametrize("entry", CAPTURE_ROWS, ids=_id)
def test_the_settings_the_reserve_does_not_read_leave_sglang_s_fraction(cli, entry):
    """--cuda-graph-prefill-max-context (and the JSON's max_context_size, max_seq_len,
    full_prefill_*), --cuda-graph-max-seq-len-prefill and torch.compile's flags: SGLang resolved
    the same fraction with them as without (0.83, recorded), and refuses the contexts that are not
    positive or, rounded up to the page, longer than the context length."""
    result = cli("plan", *GPU_81559, "--from-command", _llama_command(entry["server_args"]))
    if "disable_cuda_graph_padding" in entry["server_args"]:
        # not modelled (every decode size captured: 256 graphs, recorded), refused alone and
        # beside --enable-torch-compile, which SGLang refuses
        assert entry["status"] == "error" or entry["cuda_graph"]["decode"]["num_bs"] == 256
        assert result.exit_code == 2
        assert "error[flag-not-modelled]" in result.stderr
        assert "--disable-cuda-graph-padding" in result.stderr
    elif entry["status"] == "ok":
        assert result.exit_code == 0, result.stderr
        assert result.json["memory"]["gpu_memory_utilization"] == entry["mem_fraction_static"]
        assert result.json["fully_modelled"] is True
    else:
        assert entry in CONTEXT_FAILED
        assert result.exit_code == 2
        assert "error[invalid-input]" in result.stderr
        assert "SGLang refuses --cuda-graph-prefill-max-context" in result.stderr


@pytest.mark.parametrize(
    ("size", "page", "length", "refused"),
    [
        (4000, 1, 131_072, False), (131_072, 1, 131_072, False), (131_073, 1, 131_072, True),
        # 8,150 rounds up to 128 pages of 64 = 8,192 ≤ 8,192; 8,100 to 8,128 > 8,100 (recorded)
        (8150, 64, 8192, False), (8100, 64, 8100, True), (0, 1, 8192, True), (-8, 1, 8192, True),
        # the page's multiple exactly: 8,192 stays 8,192; one more is 8,256 > 8,200
        (8192, 64, 8200, False), (8193, 64, 8200, True),
    ],
)  # fmt: skip
def test_the_prefill_context_check_rounds_to_the_page(size, page, length, refused):
    from kvcalc.engines.sglang.graphs import check_prefill_context

    settings = reserve_settings({"cuda_graph_prefill_max_context": size})
    if refused:
        with pytest.raises(InputError) as caught:
            check_prefill_context(settings, page, length)
        assert caught.value.code == "invalid-input"
    else:
        check_prefill_context(settings, page, length)


def test_the_prefill_context_is_checked_from_engine_options_too(cli):
    base = ("plan", "llama-3.1-8b", "--engine", "sglang", *GPU_81559)
    ok = cli(*base, "-E", "cuda_graph_prefill_max_context=4096", "--max-model-len", "8192")
    over = cli(*base, "-E", "cuda_graph_prefill_max_context=8193", "--max-model-len", "8192")
    assert ok.exit_code == 0, ok.stderr
    assert over.exit_code == 2 and "more than the context length 8,192" in over.stderr
    bad = cli(*base, "-E", "torch_compile_max_bs=many")
    assert bad.exit_code == 2 and "error[" in bad.stderr


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        ("--debug-cuda-graph", True),
        ("--debug-cuda-graph --cuda-graph-backend-decode full", True),
        ("--debug-cuda-graph --cuda-graph-backend-decode breakable", False),
        ("--debug-cuda-graph --disable-decode-cuda-graph", False),
        ("--debug-cuda-graph --cuda-graph-backend-decode disabled", False),
    ],
)
def test_debug_cuda_graph_needs_a_breakable_decode_backend(cli, flags, refused):
    """decode_cuda_graph_runner.py asserts ``isinstance(self.backend, BreakableCudaGraphBackend)``
    for every size it captures under --debug-cuda-graph (read from SGLang 0.5.23's code; the
    reference tool sizes the pool without capturing): the default full decode backend fails at
    start-up. With the decode graphs breakable or off, the reserve and the pool are as without
    the flag (serving_hook.py only sets an environment variable nothing reads)."""
    command = f"python -m sglang.launch_server --model-path llama-3.1-8b {flags}"
    result = cli("plan", *GPU_81559, "--from-command", command)
    if refused:
        assert result.exit_code == 2
        assert "error[invalid-input]" in result.stderr
        assert "--cuda-graph-backend-decode breakable" in result.stderr
        return
    assert result.exit_code == 0, result.stderr
    bare = command.replace("--debug-cuda-graph", "")
    without = cli("plan", *GPU_81559, "--from-command", bare)
    for key in ("num_blocks", "kv_cache_tokens", "max_concurrency", "memory", "log_lines"):
        assert result.json[key] == without.json[key], key
    assert result.json["fully_modelled"] is True


@pytest.mark.parametrize("flag", ["--enable-profile-cuda-graph", "--enable-cudagraph-gc"])
def test_the_capture_s_profiler_and_gc_do_not_move_memory(cli, flag):
    # read by the graph runners after the pool is sized: the plan is the one without them
    command = "python -m sglang.launch_server --model-path llama-3.1-8b"
    with_flag = cli("plan", *GPU_81559, "--from-command", f"{command} {flag}")
    without = cli("plan", *GPU_81559, "--from-command", command)
    assert with_flag.exit_code == 0, with_flag.stderr
    for key in ("num_blocks", "kv_cache_tokens", "max_concurrency", "memory", "log_lines"):
        assert with_flag.json[key] == without.json[key], key
    assert with_flag.json["fully_modelled"] is True
