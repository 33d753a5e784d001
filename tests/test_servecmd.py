"""``kvcalc.planning.servecmd``: vLLM serving commands read as plan inputs."""

from __future__ import annotations

import pytest

from kvcalc.errors import InputError
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import FLAGS, parse_human_int, parse_serve_command


@pytest.mark.parametrize(
    ("text", "value"),
    [("4096", 4096), ("32k", 32_000), ("32K", 32_768), ("25.6k", 25_600), ("1M", 1 << 20),
     ("1m", 1_000_000), ("2G", 2 << 30), ("1g", 10**9), (" 8k ", 8000), ("-1", -1)],
)  # fmt: skip
def test_human_int_as_vllm_reads_it(text, value):
    assert parse_human_int(text) == value


@pytest.mark.parametrize("text", ["1.5K", "abc", "32kb", "", "1e4", "k"])
def test_human_int_refuses(text):
    with pytest.raises(InputError):
        parse_human_int(text)


def test_vllm_serve_positional_model_and_flags():
    cmd = parse_serve_command(
        "vllm serve meta-llama/Llama-3.1-8B --max-model-len 32k -tp 2 -pp 2 --kv-cache-dtype fp8 "
        "--gpu-memory-utilization 0.95 --max-num-seqs 64 --max-num-batched-tokens 8k "
        "--block-size 32 --dtype bfloat16 -q awq --enforce-eager --kv-cache-memory-bytes 20G"
    )
    assert cmd.model == "meta-llama/Llama-3.1-8B"
    assert cmd.values == {
        "max_model_len": 32_000, "tensor_parallel_size": 2, "pipeline_parallel_size": 2,
        "kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.95, "max_num_seqs": 64,
        "max_num_batched_tokens": 8000, "block_size": 32, "dtype": "bfloat16",
        "quantization": "awq", "enforce_eager": True, "kv_cache_memory_bytes": 20 << 30,
    }  # fmt: skip
    assert cmd.notes == ()
    assert cmd.flags["tensor_parallel_size"] == "-tp"
    # the values are PlanInputs fields, ready to use
    PlanInputs(gpu="H100-80GB", num_gpus=4, **cmd.values)


def test_every_flag_maps_to_a_plan_input_field():
    fields = set(PlanInputs.__dataclass_fields__)
    assert set(FLAGS) - {"model", "revision"} <= fields


def test_python_api_server_equals_form_and_underscores():
    cmd = parse_serve_command(
        "python3 -m vllm.entrypoints.openai.api_server --model=Qwen/Qwen3-8B "
        "--max_model_len=16384 --tensor-parallel-size=4 --revision=main"
    )
    assert cmd.model == "Qwen/Qwen3-8B"
    assert cmd.values == {"max_model_len": 16384, "tensor_parallel_size": 4}
    assert cmd.revision == "main"


def test_env_assignments_continuations_and_folded_yaml():
    text = "CUDA_VISIBLE_DEVICES=0,1 HF_HOME=/x vllm serve qwen3-8b \\\n  --max-model-len 8192 \\\n  -tp 2"
    cmd = parse_serve_command(text)
    assert (cmd.model, cmd.values) == (
        "qwen3-8b",
        {"max_model_len": 8192, "tensor_parallel_size": 2},
    )
    folded = parse_serve_command("vllm serve qwen3-8b\n--max-model-len 8192\n-tp 2\n")
    assert folded.values == cmd.values


def test_docker_image_form():
    cmd = parse_serve_command(
        "docker run --gpus all -p 8000:8000 -v hf-cache:/data/hf-cache "
        "vllm/vllm-openai:v0.10.0 --model mistralai/Mistral-7B-v0.1 -q fp8"
    )
    assert cmd.model == "mistralai/Mistral-7B-v0.1"
    assert cmd.values == {"quantization": "fp8"}


def test_bare_flags():
    cmd = parse_serve_command("--model llama-3.1-8b --max-model-len 4096")
    assert (cmd.model, cmd.values) == ("llama-3.1-8b", {"max_model_len": 4096})


def test_flags_without_effect_are_noted_and_unmodelled_ones_refused_by_name_never_by_value():
    text = (
        "vllm serve m --port 8000 --hf-token hf_SECRETSECRET --offload-group-size 4 --enable-prefix-caching "
        "--trust-remote-code --enable-sleep-mode --max-model-len 4096"
    )
    with pytest.raises(InputError) as err:
        parse_serve_command(text)
    assert err.value.code == "flag-not-modelled"
    assert err.value.message == (
        "kvcalc does not model --offload-group-size (host offload of weights or KV); --enable-sleep-mode "
        "(the memory allocator) of the serving command: the engine reads them and a plan without "
        "them could be wrong"
    )
    assert "--ignore-unmodelled" in err.value.hint
    cmd = parse_serve_command(text, ignore_unmodelled=True)
    assert cmd.values == {"max_model_len": 4096, "enable_prefix_caching": True}
    assert cmd.unmodelled == ("--offload-group-size", "--enable-sleep-mode")
    assert cmd.notes == (
        "warning: not fully modelled: kvcalc does not model --offload-group-size, "
        "--enable-sleep-mode and leaves them out (ignore_unmodelled)",
        "--port, --hf-token, --trust-remote-code: no effect on memory",
    )
    assert "SECRET" not in " ".join(cmd.notes) + err.value.message


def test_what_vllm_refuses_is_refused():
    for text, message in [
        ("vllm serve m --swap-space 4", "vllm serve: unrecognized argument --swap-space"),
        ("vllm serve m extra", "vllm serve: unrecognized arguments: 1 argument(s)"),
        ("vllm serve m --max-num 4", "vllm serve: ambiguous option --max-num could match"),
    ]:
        with pytest.raises(InputError) as err:
            parse_serve_command(text)
        assert err.value.code == "invalid-serve-command"
        assert err.value.message.startswith(message), err.value.message


def test_an_older_release_is_not_held_to_0_33s_flags():
    # kvcalc has 0.33's parser only: a flag 0.33 dropped is not modelled, not refused
    cmd = parse_serve_command("vllm serve m --swap-space 4 -tp 2", engine_version="0.10",
                              ignore_unmodelled=True)  # fmt: skip
    assert (cmd.values, cmd.unmodelled) == ({"tensor_parallel_size": 2}, ("--swap-space",))


def test_argparse_prefixes_and_every_spelling_of_a_modelled_flag():
    cmd = parse_serve_command(
        "vllm serve m --max-num-seq 8 --device-memory-utilization 0.8 --max_model_len=8k"
    )
    assert cmd.values == {"max_num_seqs": 8, "gpu_memory_utilization": 0.8, "max_model_len": 8000}


def test_speculative_flags_are_read_as_vllm_spells_them():
    # vllm/engine/arg_utils.py: --speculative-config / -sc (JSON), --spec-method, --spec-model, --spec-tokens
    cmd = parse_serve_command(
        'vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -sc \'{"method": "mtp", "num_speculative_tokens": 1}\''
    )
    assert cmd.values["speculative_config"] == '{"method": "mtp", "num_speculative_tokens": 1}'
    assert cmd.notes == ()
    cmd = parse_serve_command("vllm serve m --spec-method ngram --spec-tokens 4 --spec_model ngram")
    assert (cmd.values["spec_method"], cmd.values["spec_tokens"], cmd.values["spec_model"]) == (
        "ngram",
        4,
        "ngram",
    )


def test_max_model_len_auto_is_left_to_the_model():
    cmd = parse_serve_command("vllm serve m --max-model-len auto")
    assert "max_model_len" not in cmd.values
    assert "fits the length to memory" in cmd.notes[0]


def test_enforce_eager_switch_and_its_negation():
    assert parse_serve_command("vllm serve m --no-enforce-eager").values == {"enforce_eager": False}


def test_same_value_twice_is_fine():
    assert parse_serve_command("vllm serve m -tp 2 --tensor-parallel-size 2").values == {
        "tensor_parallel_size": 2
    }


def test_stops_at_shell_operators():
    cmd = parse_serve_command("vllm serve m -tp 2 && echo done --max-model-len 5")
    assert cmd.values == {"tensor_parallel_size": 2}
    assert "up to '&&'" in cmd.notes[0]


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("vllm serve m -tp 2 -tp 4", "conflicting-flags", "conflicting flags: -tp 2 and -tp 4"),
        ("vllm serve m -tp 2 --tensor-parallel-size 4", "conflicting-flags",
         "conflicting flags: -tp 2 and --tensor-parallel-size 4"),
        ("vllm serve a --model b", "conflicting-flags", "conflicting flags: the model argument a and --model b"),
        ("vllm serve m --enforce-eager --no-enforce-eager", "conflicting-flags",
         "conflicting flags: --enforce-eager and --no-enforce-eager"),
        ("vllm serve m --max-num-seqs lots", "invalid-serve-command", "--max-num-seqs: expected an integer, got 'lots'"),
        ("vllm serve m --gpu-memory-utilization high", "invalid-serve-command",
         "--gpu-memory-utilization: expected a number, got 'high'"),
        ("vllm serve m --block-size", "invalid-serve-command", "--block-size needs a value"),
        ("vllm serve m --enforce-eager=true", "invalid-serve-command", "--enforce-eager takes no value"),
        ("vllm serve m --max-model-len 1.5K", "invalid-serve-command", "decimals are not allowed"),
        ("vllm serve 'm", "invalid-serve-command", "cannot split the command: "),
        ("vllm bench m", "invalid-serve-command", "only `vllm serve` starts a server"),
        ("python -m http.server", "invalid-serve-command", "a python command must run"),
        ("sglang.launch_server --model m", "invalid-serve-command", "not a vLLM or SGLang serving command"),
        ("", "invalid-serve-command", "the command is empty"),
        ("docker compose up", "invalid-serve-command", "no vllm/vllm-openai or lmsysorg/sglang image"),
    ],
)  # fmt: skip
def test_errors(text, code, message):
    with pytest.raises(InputError) as info:
        parse_serve_command(text)
    assert info.value.code == code
    assert message in info.value.message


def test_describe_for_conflict_messages():
    cmd = parse_serve_command("vllm serve m -tp 2 --enforce-eager")
    assert cmd.describe("tensor_parallel_size") == "-tp 2"
    assert cmd.describe("enforce_eager") == "--enforce-eager"
