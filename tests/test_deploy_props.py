"""Property tests: bad input of every kind gives one clear message per problem with its line, exit 2,
and no traceback; and whatever the validator accepts, the published JSON Schema accepts too."""

from __future__ import annotations

import os
import re
import time

import pytest
import yaml
from conftest import FIXTURES
from helpers import assert_clean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcalc.deploy import read_file
from kvcalc.deploy.keys import DEPLOYMENT_KEYS, SECTIONS
from kvcalc.deploy.schema import build_schema

SEEDS = [
    p.read_text(encoding="utf-8")
    for p in sorted((FIXTURES / "deployments" / "good").glob("*.yaml"))
]
TOKENS = [
    ":", "-", " ", "  ", "\n", "[", "]", "{", "}", ",", "&a ", "*a", "<<: *a", "'", '"', "#", "\t",
    "|", ">", "%", "@", "`", "---", "...", "? ", "!!python/object:os.system ", "!x ", "!!set ",
    "1e999", "-1", "0", "0.0", "1.5", "yes", "null", "~", "32k", "1.5K", "H1000", "fp9", "\x00",
    "\u2028", "é", "deployments:", "model:", "gpu: L4", "requirements:", "- ", "org/name",
    "max_model_len: ", "command: vllm serve x -tp ", "'unclosed", "&b [*b]", "min_headroom: 150%",
]  # fmt: skip


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        lines = text.split("\n")
        op = draw(st.sampled_from(["insert", "delete", "dup", "swap", "indent", "replace"]))
        at = draw(st.integers(0, len(text)))
        if op == "insert":
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 12)) :]
        elif op == "replace":
            text = text[:at] + draw(st.text(max_size=8)) + text[at + draw(st.integers(0, 8)) :]
        else:
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if op == "dup":
                lines.insert(i, lines[j])
            elif op == "swap":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines[i] = draw(st.sampled_from(["", " ", "  ", "\t"])) + lines[i].lstrip()
            text = "\n".join(lines)
    return text


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=mutated())
def test_mutated_files_never_crash_and_every_problem_has_a_line(cli, tmp_path, text):
    path = tmp_path / "d.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = cli("check", str(path), "--offline")
    assert result.exit_code in (0, 1, 2)
    assert "Traceback" not in result.stderr and "error[internal]" not in result.stderr, (
        result.stderr
    )
    if result.exit_code != 2:
        assert re.search(r"(pass|passes|fails)\n$", result.stdout), result.stdout
        return
    lines = result.stderr.splitlines()
    assert lines[-2].startswith("error[invalid-deployment]: ") and lines[-1].startswith("hint: ")
    problems = lines[:-2]
    assert problems, result.stderr
    # YAML counts \r, NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR as line breaks too (YAML 1.1
    # b-break), and the problems are located by its parser
    n_lines = len(re.findall("\r\n|[\n\r\x85\u2028\u2029]", text)) + 1
    for line in problems:
        match = re.match(rf"^{re.escape(str(path))}:(\d+):(\d+): \S.*$", line)
        assert match, line
        assert 1 <= int(match.group(1)) <= n_lines + 1, line
    assert len(problems) == len(set(problems)), "one message per problem"


# -- generated deployments: what the validator accepts, the schema accepts --------------------------
_VALUES = {
    "text": st.sampled_from(["llama-3.1-8b", "x", "", 3, None, True]),
    "gpu": st.sampled_from(["H100-80GB", "L4", "H1000", 7]),
    "count": st.one_of(st.integers(-2, 70_000), st.sampled_from([1.0, 2.5, "4", True])),
    "number": st.one_of(st.integers(-1, 100), st.floats(allow_nan=True), st.just("8")),
    "tokens": st.one_of(
        st.integers(-1, 200_000), st.sampled_from(["32k", "32K", "1.5K", "abc", 4096.0])
    ),
    "fraction": st.one_of(st.floats(-1, 2), st.sampled_from([0, 1, "0.9"])),
    "threshold": st.one_of(st.floats(-1, 2), st.sampled_from(["10%", "100%", "x%"])),
    "bool": st.sampled_from([True, False, "yes", 1]),
    "size": st.sampled_from([80, 0, -1, 1.5, "80GB", "79.2 GiB", "20gib", "80 GX", "", True]),
    "headroom": st.sampled_from([2, "2GiB", "10%", "150%", "x", -1]),
    "verdicts": st.sampled_from(
        [["ok"], ["ok", "tight", "below-target"], "ok", [], ["wont-start"], ["nope"]]
    ),
    "choice": st.sampled_from(["vllm", "sglang", "llama.cpp", "bfloat16", "half", "nope", 3]),
    "cache_dtype": st.sampled_from(["auto", "fp8", "fp8_e4m3", "q8_0", "fp9", 8]),
    "options": st.sampled_from([{}, {"n_seq_max": 4}, {"x": [1]}, "a"]),
    "counts": st.sampled_from([[1, 2, 4], "1,2,4", [], [0], "x", [1.5], "1,,2", [True], 8]),
    "json": st.sampled_from([{"method": "mtp"}, '{"method": "ngram"}', "{", "[1]", 3, [], {}]),
}


def _section(keys):
    return st.fixed_dictionaries({}, optional={k.name: _VALUES[k.kind] for k in keys})


_DEPLOYMENT = st.fixed_dictionaries(
    {"model": st.just("llama-3.1-8b")},
    optional={
        **{
            k.name: _VALUES[k.kind]
            for k in DEPLOYMENT_KEYS
            if k.kind != "section" and k.name not in ("command", "model")
        },
        "workload": _section(SECTIONS["workload"]),
        "requirements": _section(SECTIONS["requirements"]),
        "typo_key": st.just(1),
    },
)


_VALID = {
    "text": st.sampled_from(["x", "fp8", "0.33", "none"]),
    "gpu": st.sampled_from(["H100-80GB", "L4", "a100-80gb", "H200"]),
    "number": st.one_of(st.integers(0, 100), st.floats(0, 100)),
    "tokens": st.one_of(st.integers(1, 200_000), st.sampled_from(["32k", "32K", "1M", "8192"])),
    "fraction": st.one_of(st.floats(0.01, 1), st.just(1)),
    "threshold": st.one_of(st.floats(0, 0.99), st.sampled_from(["10%", "0%", "99.5%"])),
    "bool": st.booleans(),
    "size": st.sampled_from([80, 0.5, "80GB", "79.2 GiB", "20gib", "512MiB", "1000000000B"]),
    "headroom": st.sampled_from([2, 0, "2GiB", "10%", "0.5 GiB", "99%"]),
    "verdicts": st.sampled_from(
        [["ok"], ["ok", "tight", "below-target"], "tight", ["tight", "tight"]]
    ),
    "cache_dtype": st.sampled_from(["auto", "fp8", "fp8_e4m3", "bf16", "int8"]),
    "options": st.just({}),
    "counts": st.sampled_from([[1, 2, 4, 8], "1,2,4", "[8, 16]", "1 2", [16]]),
    "json": st.sampled_from(
        [{"method": "ngram", "num_speculative_tokens": 2}, '{"method": "mtp"}']
    ),
}


def _valid(key):
    if key.kind == "count":
        return st.integers(int(key.minimum or 0), 64)
    if key.kind == "choice":
        return st.sampled_from(key.choices)
    return _VALID[key.kind]


_VALID_DEPLOYMENT = st.fixed_dictionaries(
    {"model": st.just("llama-3.1-8b"), "gpu": _VALID["gpu"]},
    optional={
        **{
            k.name: _valid(k)
            for k in DEPLOYMENT_KEYS
            if k.kind != "section" and k.name not in ("command", "model", "gpu", "num_gpus")
        },
        "workload": st.fixed_dictionaries(
            {}, optional={k.name: _valid(k) for k in SECTIONS["workload"]}
        ),
        "requirements": st.fixed_dictionaries(
            {}, optional={k.name: _valid(k) for k in SECTIONS["requirements"]}
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(_DEPLOYMENT, _VALID_DEPLOYMENT))
def test_whatever_the_validator_accepts_the_schema_accepts(tmp_path_factory, data):
    jsonschema = pytest.importorskip("jsonschema")
    path = tmp_path_factory.mktemp("gen") / "d.yaml"
    text = yaml.safe_dump(data)
    path.write_text(text, encoding="utf-8")
    _, problems = read_file(str(path))
    errors = list(jsonschema.Draft202012Validator(build_schema()).iter_errors(yaml.safe_load(text)))
    if not problems:
        assert errors == [], (data, [e.message for e in errors])


# -- hostile deployment files through `kvcalc check` ------------------------------------------------
_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=False)
)
_BASE = "model: llama-3.1-8b\ngpu: H100-80GB\n"
#: name -> (file bytes, passes?) — None: exit 2 with file:line:column problems
HOSTILE_YAML = {
    "billion laughs": (_LAUGHS + _BASE, None),
    "quadratic blow-up": ("s: &s " + "x" * 100_000 + "\nl: [" + ", ".join(["*s"] * 2000) + "]\n" + _BASE, None),
    "merge-key bomb": ("x: &x {a: 1}\n" + "".join(f"m{i}: &m{i} {{<<: [*x{''.join(f', *m{j}' for j in range(i))}]}}\n"
                                                   for i in range(40)) + _BASE, None),
    "recursive anchor": ("a: &a [*a]\n" + _BASE, None),
    "10,000 nested lists": ("x: " + "[" * 10_000 + "]" * 10_000 + "\n" + _BASE, None),
    "10,000 nested maps": ("x: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n" + _BASE, None),
    "python/object/apply os.system": ("x: !!python/object/apply:os.system ['echo pwned > /tmp/kvcalc-pwned']\n" + _BASE, None),
    "python/name": ("x: !!python/name:os.system\n" + _BASE, None),
    "python/object/new": ("x: !!python/object/new:subprocess.Popen [['true']]\n" + _BASE, None),
    "custom tag": ("model: !include other.yaml\ngpu: H100-80GB\n", None),
    "!!binary of 1 MB": ("x: !!binary " + "QUJD" * 250_000 + "\n" + _BASE, None),
    "!!set": ("x: !!set {a, b}\n" + _BASE, None),
    "duplicate keys": (_BASE + "gpu: L4\n", None),
    "duplicate keys through a merge": ("b: &b {gpu: L4}\n<<: *b\n" + _BASE, None),
    "max_model_len 10^400": (_BASE + "max_model_len: 1" + "0" * 400 + "\n", None),
    "max_model_len 2^40 + 1": (_BASE + f"max_model_len: {2**40 + 1}\n", None),
    "max_model_len 1e400": (_BASE + "max_model_len: 1e400\n", None),
    "max_model_len 0x7fffffffffffffff": (_BASE + "max_model_len: 0x7fffffffffffffff\n", None),
    "gpu_memory_utilization .nan": (_BASE + "gpu_memory_utilization: .nan\n", None),
    "gpu_memory_utilization -.inf": (_BASE + "gpu_memory_utilization: -.inf\n", None),
    "min_concurrency .inf": (_BASE + "requirements:\n  min_concurrency: .inf\n", None),
    "min_concurrency 10^400": (_BASE + "requirements:\n  min_concurrency: 1" + "0" * 400 + "\n", None),
    "a name of 4 MiB in a bad value": (_BASE + "max_model_len: '" + "x" * (4 << 20) + "'\n", None),
    "gpu_memory 1e30": ("model: llama-3.1-8b\ngpu_memory: 1e30\n", None),
    "negative counts": (_BASE + "tensor_parallel_size: -2\nmax_num_seqs: 0\n", None),
    "NUL byte": (_BASE + "name: a\x00b\n", None),
    "not UTF-8": (_BASE.encode() + b"name: caf\xe9\n", None),
    "8 MiB + 1": (_BASE + "#" * (8 << 20) + "\n", None),
    "a scalar of 4 MiB": (_BASE + "name: " + "x" * (4 << 20) + "\n", True),
    "CRLF line ends": (_BASE.replace("\n", "\r\n"), True),
    "anchors and aliases, valid": ("model: &m llama-3.1-8b\ngpu: &g H100-80GB\nname: *m\n", True),
    "two documents": (_BASE + "---\n" + _BASE, None),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML))
def test_hostile_deployment_files(cli, tmp_path, monkeypatch, name):
    body, passes = HOSTILE_YAML[name]
    path = tmp_path / "d.yaml"
    path.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))

    def never(*args, **kwargs):
        raise AssertionError("a YAML tag ran code")

    monkeypatch.setattr(os, "system", never)
    started = time.monotonic()
    result = cli("check", str(path), "--offline", "--format", "json")
    assert time.monotonic() - started < 10, name
    assert_clean(result, json_output=True)
    if passes:
        assert result.exit_code in (0, 1), result.stderr
    else:
        assert result.exit_code == 2 and "error[invalid-deployment]" in result.stderr, result.stdout
        assert (
            re.search(rf"^{re.escape(str(path))}:\d+:\d+: ", result.stderr, re.MULTILINE)
            or "MiB" in result.stderr
        )
    assert not os.path.exists("/tmp/kvcalc-pwned")


_SCALARS = st.sampled_from([
    "0", "-1", "1", "8192", "32k", "1.5K", "1" + "0" * 400, str(2**40 + 1), "1e400", ".nan", ".inf", "-.inf", "0x10",
    "0o17", "1_000", "yes", "~", "null", "''", "H100-80GB", "L4", "llama-3.1-8b", "fp8", "80GB", "1e30 GiB", "10%",
    "150%", "2024-01-02", "!!python/object/apply:os.system ['true']", "!!binary aGk=", "!custom x", "!!float nan",
    "!!int '99'", "*a", "*b", "*nowhere",
])  # fmt: skip
_KEYS = st.sampled_from([k.name for k in DEPLOYMENT_KEYS if k.kind != "section"] + ["typo", "<<"])
_SECTION_KEYS = {
    name: st.sampled_from([k.name for k in keys] + ["typo"]) for name, keys in SECTIONS.items()
}


@st.composite
def hostile_document(draw) -> str:
    """A deployment assembled from adversarial pieces: every value kind, tags, anchors (&a, &b) and
    the aliases that refer to them (or to nothing), duplicate keys, merges, nested flow values."""
    lines = [
        draw(st.sampled_from(["model: llama-3.1-8b", "model: &a llama-3.1-8b", "model: *a"])),
        draw(
            st.sampled_from(
                ["gpu: H100-80GB", "gpu: &b L4", "gpu_memory: 24", "kv_cache_memory: 10GiB"]
            )
        ),
    ]
    for _ in range(draw(st.integers(0, 6))):
        key = draw(_KEYS)
        value = draw(
            st.one_of(
                _SCALARS,
                st.integers(1, 40).map(lambda d: "[" * d + "1" + "]" * d),
                st.just("{<<: *b}"),
                st.just("[*a, *a, *b]"),
            )
        )
        lines.append(f"{key}: {value}")
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(lines)))  # a duplicate key
    lines = list(draw(st.permutations(lines)))  # an alias may come before its anchor
    for section, keys in _SECTION_KEYS.items():
        if draw(st.booleans()):
            lines.append(f"{section}:")
            lines += [f"  {draw(keys)}: {draw(_SCALARS)}" for _ in range(draw(st.integers(1, 3)))]
    return "\n".join(lines) + "\n"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=hostile_document())
def test_hostile_generated_documents(cli, tmp_path, text):
    path = tmp_path / "d.yaml"
    path.write_text(text, encoding="utf-8")
    assert_clean(cli("check", str(path), "--offline", "--format", "json"), json_output=True)
