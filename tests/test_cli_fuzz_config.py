"""Mutated config.json files through the real CLI: a result or one `error[...]` line, exit 2, never
a traceback (hypothesis). Mutations reach every command (inspect, plan, curve, compare, throughput,
verify); hostile files (deep nesting, huge numbers, NaN, non-UTF-8, multi-MB) get their own cases."""

from __future__ import annotations

import copy
import json
import time

import pytest
from helpers import assert_clean, bundled_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcalc.sources.bundled import bundled_models

ALIASES = [m.alias for m in bundled_models()]
junk = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.lists(st.integers(-2, 2), max_size=4), st.just({"a": {"b": [1]}}),
)  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(alias=st.sampled_from(ALIASES), data=st.data(), command=st.sampled_from(["inspect", "plan"]))
def test_mutated_config_through_cli(cli, tmp_path_factory, alias, data, command):
    raw = copy.deepcopy(bundled_config(alias))
    target = raw.get("text_config", raw)
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(sorted(target)))
        if data.draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = data.draw(junk)
    folder = tmp_path_factory.mktemp("cfg")
    (folder / "config.json").write_text(json.dumps(raw, allow_nan=True))
    args = [command, str(folder)] + (
        ["--kv-cache-memory", "10GiB", "--max-model-len", "4096"] if command == "plan" else []
    )
    result = cli(*args)
    assert "Traceback" not in result.stderr + result.stdout
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert lines[0].startswith("error[") and "error[internal]" not in lines[0], result.stderr
        assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: "))
    else:
        assert result.exit_code in (0, 1) and result.stdout


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blob=st.binary(max_size=300))
def test_random_bytes_as_config(cli, tmp_path_factory, blob):
    folder = tmp_path_factory.mktemp("bytes")
    (folder / "config.json").write_bytes(blob)
    result = cli("inspect", str(folder))
    assert result.exit_code == 2
    assert result.stderr.startswith("error[") and "error[internal]" not in result.stderr


# -- every entry point, any JSON (hypothesis) --------------------------------------------------------
COMMANDS = {
    "inspect": ["inspect", "{m}", "--json"],
    "inspect --explain": ["inspect", "{m}", "--explain"],
    "plan": ["plan", "{m}", "--gpu", "H100-80GB", "--json"],
    "plan llamacpp": ["plan", "{m}", "--gpu", "L4", "--engine", "llamacpp", "--json"],
    "plan sglang tp2": ["plan", "{m}", "--gpu", "L4", "--engine", "sglang", "-tp", "2", "--json"],
    "curve": ["curve", "{m}", "--gpu", "L4", "--engine", "vllm", "--engine", "hf", "--lengths", "1k,1M", "--json"],
    "compare": ["compare", "{m}", "llama-3.2-1b-instruct", "--gpu", "L4", "--json"],
    "compare --attention-variants": ["compare", "{m}", "--attention-variants", "--json"],
    "throughput": ["throughput", "{m}", "--gpu", "L4", "--batch", "1", "--batch", "64", "--json"],
    "verify": ["verify", "{m}", "--device", "cpu", "--num-blocks", "1", "--tokens", "8", "--json"],
}  # fmt: skip
#: leaves: wrong types, zero, negative, huge (10^300: JSON allows it), NaN and infinities
leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(-(10**300), 10**300),
    st.sampled_from([0, -1, 2**31, 2**63, 2**64 + 1, 10**18, 0.5, 1e-300, 1e308]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.sampled_from(["bfloat16", "float32", "sliding_attention", "full_attention", "linear", "yarn", "mamba"]),
)  # fmt: skip
nested_junk = st.recursive(leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=5), inner, max_size=4)),
                           max_leaves=12)  # fmt: skip
#: the keys kvcalc reads, so that mutations reach the arithmetic instead of being ignored
KEYS = ["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
        "intermediate_size", "vocab_size", "max_position_embeddings", "torch_dtype", "sliding_window",
        "layer_types", "rope_scaling", "kv_lora_rank", "qk_rope_head_dim", "quantization_config",
        "text_config", "num_experts", "moe_intermediate_size", "attention_chunk_size", "tie_word_embeddings"]  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(alias=st.sampled_from(ALIASES), data=st.data())
def test_any_config_through_every_command(cli, tmp_path_factory, command, alias, data):
    raw = copy.deepcopy(bundled_config(alias))
    target = raw.get("text_config", raw)
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.one_of(st.sampled_from(KEYS), st.sampled_from(sorted(target))))
        if data.draw(st.integers(0, 3)) == 0:
            target.pop(key, None)
        else:
            target[key] = data.draw(nested_junk)
    folder = tmp_path_factory.mktemp("any")
    (folder / "config.json").write_text(json.dumps(raw, allow_nan=True))
    args = [a.replace("{m}", str(folder)) for a in COMMANDS[command]]
    assert_clean(cli(*args), json_output="--json" in args)


# -- files that are not configs at all ---------------------------------------------------------------
TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 16, "vocab_size": 64, "max_position_embeddings": 128,
        "torch_dtype": "bfloat16"}  # fmt: skip
_TINY_TEXT = json.dumps(TINY)


def _with(key: str, raw_json: str) -> bytes:
    return (_TINY_TEXT[:-1] + f', "{key}": {raw_json}}}').encode()


#: name -> (file bytes, expected error code or None for a result; or one per command)
HOSTILE_FILES = {
    "100,000 nested lists": (b"[" * 100_000 + b"]" * 100_000, "config-malformed-json"),
    "100,000 nested objects": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "config-malformed-json"),
    "100,000 unclosed lists": (b"[" * 100_000, "config-malformed-json"),
    "deep list under a key read": (_with("rope_scaling", "[" * 900 + "]" * 900), "config-malformed-json"),
    "deep list under an unused key": (_with("notes", "[" * 500 + "]" * 500), "config-malformed-json"),
    "10^5000 as a number": (_with("hidden_size", "1" * 5000), "config-malformed-json"),
    "NaN token": (_with("num_hidden_layers", "NaN"), "config-invalid"),
    "Infinity token": (_with("hidden_size", "Infinity"), "config-invalid"),
    "1e400 (a float that overflows)": (_with("max_position_embeddings", "1e400"), "config-invalid"),
    "-0": (_with("num_attention_heads", "-0"), "config-invalid"),
    "2^64 + 1 heads": (_with("num_attention_heads", str(2**64 + 1)), "config-invalid"),
    "Latin-1 bytes": (_with("model_type", '"caf\xe9"').replace(b"\xc3\xa9", b"\xe9"), "config-not-utf8"),
    "UTF-16": ('{"a": 1}'.encode("utf-16"), "config-not-utf8"),
    "NUL bytes": (b"\0" * 64, "config-malformed-json"),
    "empty file": (b"", "config-malformed-json"),
    "top-level list": (b"[1, 2, 3]", "config-invalid"),
    "top-level string": (b'"config"', "config-invalid"),
    "an HTML page": (b"<!doctype html><html><body>Sign in</body></html>", "config-malformed-json"),
    "17 MiB": (b" " * (17 << 20) + _TINY_TEXT.encode(), "config-too-large"),
    "8 MiB, valid": (_with("notes", json.dumps(["x" * 60] * 120_000)), None),
    "UTF-8 BOM, valid": (b"\xef\xbb\xbf" + _TINY_TEXT.encode(), None),
    "duplicate keys (the last wins), valid": (_with("num_hidden_layers", "4"), None),
    # the KV cache can be sized, the weights cannot (inspect shows no weights; plan needs them)
    "mlp_only_layers holding lists": (json.dumps({**TINY, "num_experts": 4, "mlp_only_layers": [[1]]}).encode(),
                                      {"inspect": None, "plan": "weights-unknown"}),
    "layer_types holding lists": (json.dumps({**TINY, "layer_types": [[], {}]}).encode(), "config-unverified"),
    "YaRN factor NaN": (_with("rope_scaling", '{"rope_type": "yarn", "factor": NaN}'), None),
    "YaRN factor 1e308": (_with("rope_scaling", '{"rope_type": "yarn", "factor": 1e308, '
                                '"original_max_position_embeddings": ' + "9" * 300 + "}"), None),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
@pytest.mark.parametrize("command", ["inspect", "plan"])
def test_hostile_config_files(cli, tmp_path, name, command):
    body, code = HOSTILE_FILES[name]
    code = code[command] if isinstance(code, dict) else code
    (tmp_path / "config.json").write_bytes(body)
    args = [command, str(tmp_path), "--json"] + (["--gpu", "L4"] if command == "plan" else [])
    # CPU time of this process, not wall time: a loaded machine slows the run, not its work (the
    # 8 MiB file takes about 1 s; a reader gone quadratic on it would take minutes)
    started = time.process_time()
    result = cli(*args)
    assert time.process_time() - started < 10, name
    assert_clean(result, json_output=True)
    if code is None:
        assert result.exit_code in (0, 1), result.stderr
    else:
        assert result.stderr.startswith(f"error[{code}]: "), result.stderr
