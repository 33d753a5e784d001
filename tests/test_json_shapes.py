"""The JSON reference (docs/json.md) and the output schemas (`kvcalc schema plan|check`) describe
what the commands really print: real outputs validate against them, with no key missing or extra,
and the page is what the result classes generate."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kvcalc.render.json_shapes import DOCUMENTS, markdown, schema

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "deployments").glob("*.yaml")
)

PLANS = [
    ("llama-3.1-8b", "--gpu", "H100"),
    ("gemma-2-9b-it", "--gpu", "H100", "--max-model-len", "8K", "-tp", "2", "--kv-cache-dtype", "fp8"),
    ("qwen3-32b", "--gpu", "L40S", "-tp", "2", "--prompt-len", "2000", "--output-len", "500", "--batch", "32"),
    ("qwen3-next-80b-a3b-thinking", "--gpu", "H200", "-tp", "4", "--max-model-len", "32K"),
    ("llama-3.1-70b", "--gpu", "L4"),  # weights-dont-fit, with suggestions
    ("llama-3.1-8b", "--kv-cache-memory", "10GiB", "--max-model-len", "32K"),
    ("llama-3.1-8b", "--gpu", "H100", "--engine", "sglang", "--max-model-len", "32K"),
    ("llama-3.1-8b", "--gpu", "H100", "--engine", "llamacpp", "--max-model-len", "8K"),
    ("llama-3.1-8b", "--gpu", "H100", "--engine", "hf", "--max-model-len", "8K"),
    ("llama-3.1-8b", "--gpu", "H100", "--engine", "trtllm", "--max-model-len", "8K"),
    ("llama-3.1-8b", "--gpu", "H100", "--engine", "lmdeploy", "--max-model-len", "8K"),
]  # fmt: skip


def _validate(name: str, data) -> None:
    jsonschema.Draft202012Validator(schema(name)).validate(data)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_schemas_are_valid_draft_2020_12(name):
    meta = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    assert [e.message for e in meta.iter_errors(schema(name))] == []


@pytest.mark.parametrize("args", PLANS, ids=lambda a: " ".join(a[:1] + a[-2:]))
def test_plan_json_matches_its_schema(cli, args):
    result = cli("plan", *args, "--json")
    assert result.exit_code in (0, 1), result.stderr
    _validate("plan", result.json)


@pytest.mark.parametrize("path", EXAMPLES)
def test_check_json_matches_its_schema(cli, path):
    result = cli("check", path, "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    assert result.json, "no deployments"
    _validate("check", result.json)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("inspect", ("inspect", "llama-3.1-8b", "--json")),
        ("inspect", ("inspect", "qwen3-next-80b-a3b-thinking", "--json")),
        ("inspect", ("inspect", "gemma-2-9b-it", "--json", "--max-model-len", "8K")),
        ("compare", ("compare", "mistral-7b-v0.1", "llama-3.1-70b", "--gpu", "H100", "--json")),
        ("compare", ("compare", "mistral-7b-v0.1", "llama-3.1-8b", "--json")),
        ("compare", ("compare", "qwen3-8b", "--gpu", "H100", "--engine", "vllm", "--engine", "sglang", "--json")),
        ("curve", ("curve", "qwen3-1.7b", "--gpu", "L4", "--engine", "vllm", "--engine", "sglang", "--json")),
        ("throughput", ("throughput", "qwen3-1.7b", "--gpu", "L4", "--prompt-len", "512", "--json")),
        ("throughput", ("throughput", "qwen3-1.7b", "--gpu", "L4", "--engine", "vllm", "--engine", "hf", "--json")),
        ("models", ("models", "--json")),
        ("verify", ("verify", "qwen3-0.6b", "--json")),  # torch on the CPU: the layout check
    ],
)  # fmt: skip
def test_other_commands_match_the_reference(cli, name, args):
    result = cli(*args)
    assert result.exit_code in (0, 1), result.stderr
    _validate(name, result.json)


def test_a_key_the_schema_does_not_know_fails(cli):
    """additionalProperties is false and every key is required: a renamed key cannot slip by."""
    data = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--json").json
    renamed = dict(data)
    renamed["kv_bytes_per_request"] = renamed.pop("engine_kv_bytes_per_request")
    with pytest.raises(jsonschema.ValidationError):
        _validate("plan", renamed)
    nested = json.loads(json.dumps(data))
    nested["memory"]["extra_bytes"] = 1
    with pytest.raises(jsonschema.ValidationError):
        _validate("plan", nested)


def test_kvcalc_schema_publishes_the_output_schemas(cli):
    for name in ("plan", "check"):
        result = cli("schema", name)
        assert result.exit_code == 0, result.stderr
        assert result.json == json.loads(json.dumps(schema(name)))
    assert cli("schema").json["$id"] == "urn:kvcalc:deployment-file"  # the default, as before
    bad = cli("schema", "inspect-table")
    assert bad.exit_code == 2 and "error[usage]" in bad.stderr


def test_reference_page_is_generated_from_the_result_classes():
    page = (ROOT / "docs" / "json.md").read_text(encoding="utf-8")
    assert page == markdown(), "docs/json.md is stale: run python scripts/json_reference.py"


def test_reference_page_names_both_kv_accountings():
    page = markdown()
    for key in ("engine_kv_bytes_per_request", "layer_kv_bytes_per_request", "runnable_concurrency",
                "model_source", "tight_threshold", "weights_bytes_per_step"):  # fmt: skip
        assert f"`{key}`" in page, key
    for old in ("kv_bytes_per_sequence", "hf_id", "tight_fraction", "weight_bytes_per_step",
                "weights_bytes_per_gpu", "model_max_len_tokens"):  # fmt: skip
        assert f"`{old}`" not in page, old
