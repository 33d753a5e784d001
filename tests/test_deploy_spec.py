"""Deployment files → validated deployments: every problem, with its line; the key table and schema."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml
from conftest import FIXTURES, ROOT

from kvcalc.deploy import read_file
from kvcalc.deploy.keys import DEPLOYMENT_KEYS, SECTIONS
from kvcalc.deploy.schema import build_schema
from kvcalc.deploy.spec import parse_document
from kvcalc.deploy.yamlread import read_yaml
from kvcalc.units import GIB

DEPLOY = FIXTURES / "deployments"
BAD = DEPLOY / "bad"
GOOD = DEPLOY / "good"


def _parse(text: str, file: str = "d.yaml", base_dir: str = "."):
    root, problems = read_yaml(text)
    assert problems == []
    return parse_document(root, file=file, base_dir=base_dir)


def _messages(path) -> list[str]:
    _, problems = read_file(str(path))
    return [f"{p.line}:{p.column}: {p.message}" for p in problems]


def test_every_problem_is_reported_at_once_with_its_line():
    assert _messages(BAD / "every_problem.yaml") == [
        "6:5: unknown key 'max_model_length'; did you mean 'max_model_len'?",
        "8:7: unknown key 'min_concurency' in requirements; did you mean 'min_concurrency'?",
        "12:27: tensor_parallel_size: expected a whole number, got 'two'",
        "13:20: enforce_eager: expected true or false, got 'yes'",
        "14:19: max_num_seqs: expected a whole number, got 1.5",
        "15:15: workload: expected a mapping of prompt_len, output_len, shared_prefix, got 4096",
        "19:29: gpu_memory_utilization: must be in (0, 1], got 1.5 (a fraction: 0.9 is 90%)",
        "20:15: num_gpus: must be at least 1, got 0",
        "22:21: requirements.min_headroom: a share of the KV pool must be under 100%, got '150%'",
        (
            "23:23: requirements.allow_verdicts: 'wont-start' cannot be allowed: a deployment that would "
            "not start always fails (use --exit-zero for a report-only run)"
        ),
        "26:10: gpu: unknown GPU 'H1000'; did you mean H100-SXM or V100-16GB? (see `kvcalc gpus`)",
        "27:21: kv_cache_dtype: unknown kv_cache_dtype 'fp9'; did you mean 'fp8'?",
        (
            "28:13: engine: unknown engine 'vllmm'; did you mean 'vllm'? (choose from: vllm, sglang, "
            "llamacpp, hf, trtllm, lmdeploy, llama.cpp, transformers, tensorrt-llm, turbomind)"
        ),
        (
            "29:12: dtype: unknown dtype 'float8'; did you mean 'float'? (choose from: auto, bfloat16, "
            "float16, half, float32, float, bf16, fp16, fp32)"
        ),
        "30:5: no model: add `model:` (a bundled name, a path or a Hub id) or a `command:`",
        "30:5: no GPU: add `gpu:` (see `kvcalc gpus`), `gpu_memory:` or `kv_cache_memory:`",
        "36:15: num_gpus: 2 is fewer than tensor_parallel_size × pipeline_parallel_size = 4",
        "40:27: tensor_parallel_size: 4 disagrees with -tp 2 in `command` (line 39)",
        "43:14: command: conflicting flags: --max-num-seqs 8 and --max-num-seqs 16 (give each setting once)",
        "46:14: command: no vllm/vllm-openai or lmsysorg/sglang image in this docker command",
        (
            "49:17: gpu_memory: cannot read '80 GB of HBM' as a size: write 80GB (10^9 bytes), 79.2GiB "
            "(2^30 bytes) or a bare number of GiB"
        ),
        "50:22: kv_cache_memory: must not be negative, got -4",
        "51:11: duplicate deployment name 'typos' (first at line 3)",
        "54:5: deployments[11]: expected a deployment (a mapping), got 'just a string'",
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("duplicate_key", ["5:1: duplicate key 'max_model_len' (first at line 4)"]),
        ("too_deep", ["5:39: nested more than 32 levels deep"]),
        ("tags", [("1:7: tag !!python/object/apply:os.system is not allowed: deployment files hold plain "
                  "mappings and lists only"),
                  "2:8: tag !custom is not allowed: deployment files hold plain values only",
                  "4:15: tag !!set is not allowed: deployment files hold plain mappings and lists only"]),
        ("alias_bomb", [("7:8: the document expands to more than 100,000 values (through aliases?); "
                        "refusing it")]),
        ("empty", [("1:1: the file is empty: expected a deployment (model:, gpu:, ...) or a "
                   "`deployments:` list")]),
        ("top_level_list", [("1:1: expected a deployment (a mapping with model:, gpu:, ...) or a "
                            "`deployments:` list, got a list")]),
        ("two_documents", [("3:1: a second YAML document (---): put several deployments in one "
                           "`deployments:` list instead")]),
        ("yes_key", [("3:1: keys must be strings, not True (YAML reads yes/no/on/off as booleans: "
                     "quote the key)")]),
    ],
)  # fmt: skip
def test_file_level_problems(name, expected):
    assert _messages(BAD / f"{name}.yaml") == expected


def test_syntax_error_gives_the_line_and_column():
    """PyYAML's account of the error follows kvcalc's prefix; the line and column are asserted."""
    (message,) = _messages(BAD / "syntax.yaml")
    assert message.startswith("4:14: YAML syntax error: ")


def test_unknown_model_is_valid_in_shape():
    deployments, problems = read_file(str(BAD / "unknown_model.yaml"))
    assert problems == [] and deployments[0].model == "no-such-model-7b"


def test_single_deployment_becomes_plan_inputs():
    (dep,), problems = read_file(str(GOOD / "single.yaml"))
    assert problems == []
    assert (dep.name, dep.model, dep.line, dep.column) == ("chat-8b", "llama-3.1-8b", 2, 1)
    assert (dep.inputs.gpu, dep.inputs.max_model_len, dep.inputs.max_num_seqs) == (
        "H100-80GB",
        8192,
        32,
    )
    assert dep.requirements.min_concurrency == 32
    assert dep.requirements.min_headroom == ("fraction", 0.10)
    assert dep.requirements.allow_verdicts == ("ok", "tight")
    assert dep.line_of("requirements.min_concurrency") == 8
    assert dep.line_of("not-written") == 2


def test_values_as_vllm_and_kvcalc_plan_read_them():
    (dep,), _ = _parse(
        "model: m\ngpu_memory: 80GB\nkv_cache_memory: 20\nweights_memory: 1.5GiB\nmax_model_len: 32K\n"
        "dtype: half\ntight_threshold: 5%\nengine: llama.cpp\n"
        "engine_options: {n_seq_max: 4}\nworkload: {prompt_len: 100, output_len: 0, shared_prefix: 50}\n"
        "requirements: {min_headroom: 2, allow_verdicts: below-target}\n"
    )
    i = dep.inputs
    assert (i.gpu_memory_bytes, i.kv_cache_memory_bytes, i.weights_memory_bytes) == (
        80 * 10**9,
        20 * GIB,
        int(1.5 * GIB),
    )
    assert (i.max_model_len, i.dtype, i.tight_fraction) == (32768, "float16", 0.05)
    assert (i.engine, i.engine_options) == ("llamacpp", (("n_seq_max", 4),))  # one canonical name
    assert (i.prompt_len, i.output_len, i.shared_prefix) == (100, 0, 50)
    assert dep.has_workload
    assert dep.requirements.min_headroom == ("bytes", 2 * GIB)
    assert dep.requirements.allow_verdicts == ("below-target",)
    # vLLM's token counts read as vLLM reads them (8k = 8,000); llama.cpp does not read this one
    (dep,), _ = _parse("model: m\ngpu: L4\nmax_num_batched_tokens: 8k\n")
    assert dep.inputs.max_num_batched_tokens == 8000


def test_default_names():
    deps, _ = _parse(
        "deployments:\n  - {model: m, gpu: L4}\n  - {model: m, gpu: L4}\n", file="dir/prod.yaml"
    )
    assert [d.name for d in deps] == ["prod#1", "prod#2"]
    (single,), _ = _parse("model: m\ngpu: L4\n", file="dir/prod.yaml")
    assert single.name == "prod"


def test_command_fills_unwritten_keys_and_agrees_with_written_ones():
    (dep,), problems = read_file(str(GOOD / "command.yaml"))
    assert problems == []
    assert dep.model == "meta-llama/Llama-3.1-8B"
    i = dep.inputs
    assert (i.max_model_len, i.max_num_seqs, i.gpu_memory_utilization, i.gpu) == (
        32768,
        12,
        0.92,
        "H100-80GB",
    )
    assert dep.notes == ("command: --port, --enable-log-requests: no effect on memory",)


def test_a_command_flag_kvcalc_does_not_model_is_refused_unless_ignored():
    text = "model: m\ngpu: L4\ncommand: vllm serve m --offload-group-size 4 --port 1\n"
    deps, problems = _parse(text)
    assert deps == []
    assert len(problems) == 1 and "command: kvcalc does not model --offload-group-size" in str(
        problems[0]
    )
    assert "ignore_unmodelled: true" in str(problems[0])
    (dep,), problems = _parse(text + "ignore_unmodelled: true\n")
    assert problems == []
    assert dep.inputs.unmodelled_flags == ("--offload-group-size",)
    assert dep.notes[0] == (
        "command: warning: not fully modelled: kvcalc does not model --offload-group-size and leaves "
        "it out (ignore_unmodelled)"
    )
    (same,), problems = _parse(
        "gpu: L4\nkv_cache_dtype: fp8_e4m3\ndtype: bf16\n"
        "command: vllm serve m --kv-cache-dtype fp8 --dtype bfloat16\n"
    )
    assert problems == [] and same.inputs.kv_cache_dtype == "fp8_e4m3"


def test_command_model_conflicts_and_missing_model():
    _, problems = _parse("model: a\ngpu: L4\ncommand: vllm serve b\n")
    assert [str(p) for p in problems] == [
        "d.yaml:1:8: model: 'a' disagrees with the command's model 'b' (line 3)"
    ]
    _, problems = _parse("gpu: L4\ncommand: --max-model-len 4096\n")
    assert [p.message for p in problems] == ["command: it names no model; add `model:`"]


def test_relative_model_paths_are_relative_to_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "repo" / "models" / "tiny"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "model_configs" / "Qwen--Qwen3-0.6B.json", folder / "config.json")
    deploy = tmp_path / "repo" / "deploy"
    deploy.mkdir()
    (deploy / "d.yaml").write_text("model: ../models/tiny\ngpu: L4\n")
    monkeypatch.chdir(tmp_path)
    (dep,), _ = read_file(os.path.join("repo", "deploy", "d.yaml"))
    assert dep.model == os.path.join("repo", "models", "tiny")
    from kvcalc.deploy import check_paths

    report = check_paths([os.path.join("repo", "deploy", "d.yaml")])
    assert report.problems == () and report.results[0].plan.model == "tiny"


def test_plan_inputs_errors_point_at_their_key():
    _, problems = _parse("model: m\ngpu: L4\nworkload:\n  prompt_len: 0\n")
    assert [str(p) for p in problems] == [
        "d.yaml:4:15: workload.prompt_len: must be at least 1, got 0"
    ]


# -- the key table, the schema and the docs agree --------------------------------------------------
def test_published_schema_is_the_built_one():
    published = json.loads(
        (ROOT / "kvcalc" / "data" / "deployment.schema.json").read_text(encoding="utf-8")
    )
    if os.environ.get("KVCALC_UPDATE_GOLDEN") == "1":
        text = json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"
        (ROOT / "kvcalc" / "data" / "deployment.schema.json").write_text(text, encoding="utf-8")
        published = build_schema()
    assert published == build_schema(), "regenerate with KVCALC_UPDATE_GOLDEN=1"


def test_schema_lists_exactly_the_validated_keys():
    schema = build_schema()
    assert list(schema["$defs"]["deployment"]["properties"]) == [k.name for k in DEPLOYMENT_KEYS]
    for section, keys in SECTIONS.items():
        assert list(schema["$defs"][section]["properties"]) == [k.name for k in keys]


def test_schema_agrees_with_the_validator_on_the_fixtures():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(build_schema())
    jsonschema.Draft202012Validator.check_schema(build_schema())
    files = sorted(GOOD.glob("*.yaml")) + sorted((ROOT / "examples" / "deployments").glob("*.yaml"))
    for path in files:
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path.name
    for name in ("every_problem", "empty", "top_level_list", "yes_key"):
        # as an editor validates it: JSON, where the key `yes` (True in YAML) is the string "true"
        data = json.loads(json.dumps(yaml.safe_load((BAD / f"{name}.yaml").read_text())))
        assert list(validator.iter_errors(data)), name
    for text in (
        "model: m\ngpu: L4\nmax_model_len: 32k\nrequirements: {min_headroom: 10%}\n",
        "model: m\ngpu_memory: 79.2 GiB\ntight_threshold: 0.05\n",
    ):
        assert list(validator.iter_errors(yaml.safe_load(text))) == [], text
    for text in (
        "model: m\nmax_model_len: 32kb\n",
        "gpu: L4\n",
        "model: m\nmin_concurrency: 4\n",
        "model: m\ngpu_memory_utilization: 0\n",
    ):
        assert list(validator.iter_errors(yaml.safe_load(text))), text


def test_docs_describe_every_key():
    doc = (ROOT / "docs" / "check.md").read_text(encoding="utf-8")
    for keys in (DEPLOYMENT_KEYS, *SECTIONS.values()):
        for key in keys:
            assert f"`{key.name}`" in doc, key.name
