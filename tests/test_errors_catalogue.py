"""docs/errors.md against the source: every code kvcalc can print is documented, every documented
code exists, and each one is produced here — through the CLI where the CLI can reach it, else
through a fault (the loopback Hub, a module that will not import, a file that cannot be read)."""

from __future__ import annotations

import ast
import json
import re
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT
from hubserver import checkpoint_files, serve_fake_hub

SOURCE = ROOT / "kvcalc"
DOC = ROOT / "docs" / "errors.md"
#: ``code="x"`` keywords, class-level ``code = "x"`` and module constants such as ``CODE = "x"``
_CODE_RE = re.compile(r"\bcode\s*=\s*\"([a-z0-9-]+)\"", re.IGNORECASE)
#: the base class's fallback: never printed (see test_every_raise_names_its_code)
_FALLBACK = "error"
TINY = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 64, "intermediate_size": 16, "vocab_size": 64, "max_position_embeddings": 128,
        "torch_dtype": "bfloat16"}  # fmt: skip


def source_codes() -> set[str]:
    found = {"usage", "internal"}  # the CLI boundary's own (they are in the source too)
    for path in SOURCE.rglob("*.py"):
        found |= set(_CODE_RE.findall(path.read_text(encoding="utf-8")))
    return found - {_FALLBACK}


def documented_codes() -> list[str]:
    return re.findall(r"^### `([a-z0-9-]+)`$", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)


def test_every_code_in_the_source_is_documented_and_every_documented_code_exists():
    documented = documented_codes()
    assert len(documented) == len(set(documented)), "a code is documented twice"
    assert sorted(source_codes() - set(documented)) == [], "undocumented codes"
    assert sorted(set(documented) - source_codes()) == [], "documented codes no source raises"


def test_every_raise_names_its_code_and_a_hint():
    """A ``KvcalcError`` or ``HubError`` raised without ``code=`` would print the fallback
    ``error[error]``; every ``code=`` is a literal or a module constant, so the scan above sees it;
    a bare ``KvcalcError`` has no default hint, so it must be given one."""
    bare = {"KvcalcError", "HubError"}
    problems = []
    for path in SOURCE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            t.id
            for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for t in node.targets if isinstance(t, ast.Name)
        }  # fmt: skip
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            code = next((k.value for k in node.keywords if k.arg == "code"), None)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if name in bare and code is None:
                problems.append(f"{where}: {name}(...) without code=")
            if name == "KvcalcError" and not any(k.arg == "hint" for k in node.keywords):
                problems.append(
                    f"{where}: KvcalcError(...) without hint="
                )  # subclasses have defaults
            if code is not None and not (
                isinstance(code, ast.Constant)
                or (isinstance(code, ast.Name) and code.id in constants)
            ):
                problems.append(f"{where}: code= is computed, the catalogue cannot see it")
    assert problems == []


# -- every documented code, produced ---------------------------------------------------------------
class Ctx:
    """What a reproduction may use: the CLI, a scratch folder, monkeypatch, a fake Hub."""

    def __init__(self, cli, tmp_path: Path, monkeypatch) -> None:
        self.cli, self.tmp, self.mp = cli, tmp_path, monkeypatch
        self._hub_gen = None
        self._hub = None

    def hub(self):
        if self._hub is None:
            self._hub_gen = serve_fake_hub(self.tmp, self.mp)
            self._hub = next(self._hub_gen)
            self.mp.setenv("HF_HUB_ETAG_TIMEOUT", "1")
        return self._hub

    def close(self) -> None:
        if self._hub_gen is not None:
            self._hub_gen.close()

    def folder(self, config: dict | bytes, name: str = "m", **files: bytes) -> str:
        folder = self.tmp / name
        folder.mkdir(exist_ok=True)
        body = config if isinstance(config, bytes) else json.dumps(config).encode()
        (folder / "config.json").write_bytes(body)
        for file_name, data in files.items():
            (folder / file_name.replace("__", ".")).write_bytes(data)
        return str(folder)

    def unreadable(self, name: str) -> None:
        """Opening a file called ``name`` fails as for one without read permission (tests may run
        as root, for whom chmod 000 changes nothing)."""
        real_open = Path.open

        def refusing_open(path, *args, **kwargs):
            if path.name == name:
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        self.mp.setattr(Path, "open", refusing_open)

    def subprocess(self, *args: str, **env: str):
        """``python -m kvcalc ARGS`` in a fresh interpreter (for faults at import time)."""
        import os
        import subprocess

        from conftest import CliResult

        done = subprocess.run([sys.executable, "-m", "kvcalc", *args], cwd=ROOT, capture_output=True, check=False,
                              text=True, timeout=60, env={**os.environ, **env})  # fmt: skip
        return CliResult(done.returncode, done.stdout, done.stderr)

    def without_module(self, name: str) -> None:
        """``import name`` fails, as where the package is not installed."""
        self.mp.setitem(sys.modules, name, None)


def _gguf(c: Ctx, damage: str):
    from gguf import GGMLQuantizationType as Q
    from gguf_helpers import llama_keys, write_gguf

    path = c.tmp / "m.gguf"
    if damage == "magic":
        path.write_bytes(b"GGML" + bytes(64))
    elif damage == "type":  # one key of value type 99
        path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
                         + struct.pack("<I", 99) + bytes(16))  # fmt: skip
    elif damage == "truncated":
        write_gguf(path, "llama", llama_keys(), [("t", (32, 32), Q.F16)])
        path.write_bytes(path.read_bytes()[:100])
    else:  # a split model without its second shard
        write_gguf(path, "llama", llama_keys(), [(f"t{i}", (32, 32), Q.F16) for i in range(2)],
                   split_max_tensors=1)  # fmt: skip
        (c.tmp / "m-00002-of-00002.gguf").unlink()
        path = c.tmp / "m-00001-of-00002.gguf"
    return c.cli("inspect", str(path))


def _gguf_repo(c: Ctx, reference: str):
    from gguf import GGMLQuantizationType as Q
    from gguf_helpers import llama_keys, write_gguf

    body = write_gguf(
        c.tmp / "w.gguf", "llama", llama_keys(), [("t", (32, 32), Q.Q8_0)]
    ).read_bytes()
    c.hub().add("acme/x", {"a-Q4_0.gguf": body, "b-Q4_0.gguf": body, "c-Q8_0.gguf": body})
    return c.cli("inspect", reference)


def _llamacpp_missing(c: Ctx):
    c.without_module("llama_cpp")
    return c.cli(
        "verify", "llama-3.2-1b-instruct", "--engine", "llamacpp", "--run", "--layers", "1"
    )


def _hub_case(setup: Callable[[object], None], *args: str):
    def run(c: Ctx):
        setup(c.hub())
        return c.cli("inspect", "acme/x", *args)

    return run


def _deployment(c: Ctx):
    path = c.tmp / "d.yaml"
    path.write_text("model: llama-3.1-8b\ngpu: H100-80GB\nmax_model_len: -3\n", encoding="utf-8")
    return c.cli("check", str(path))


def _internal(c: Ctx):
    from kvcalc.planning import api as planning

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    c.mp.setattr(planning, "plan_reference", broken)
    return c.cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB")


def _calibration(text: str):
    def run(c: Ctx):
        path = c.tmp / "cal.jsonl"
        path.write_text(text, encoding="utf-8")
        return c.cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--calibration", str(path))

    return run


def _unreadable(c: Ctx, name: str, folder: str):
    c.unreadable(name)
    return c.cli("inspect", folder)


def _safetensors(c: Ctx, **files: bytes):
    return c.cli("inspect", c.folder(TINY, **files))


def _sharded_missing_on_hub(hub) -> None:
    files = checkpoint_files(sharded=True)
    files.pop(max(n for n in files if n.endswith(".safetensors")))
    hub.add("acme/x", {"config.json": TINY, **files})


def _nemotron_without_attention(c: Ctx):
    cfg = {**TINY, "model_type": "nemotron_h", "hybrid_override_pattern": "--"}
    return c.cli("verify", c.folder(cfg), "--device", "cpu")


def _torch_missing(c: Ctx):
    c.without_module("torch")
    return c.cli("verify", "llama-3.2-1b-instruct", "--device", "cpu")


def _backend_missing(c: Ctx):
    pytest.importorskip("torch")
    c.without_module("optimum.quanto")
    return c.cli("verify", "llama-3.2-1b-instruct", "--engine", "hf", "--run", "--layers", "1",
                 "--kv-cache-dtype", "int4", "--device", "cpu")  # fmt: skip


def _backend_unsupported(c: Ctx):
    # a transformers release without the fp8 QuantizedCache backend (5.18-5.20)
    pytest.importorskip("torch")
    cache_utils = pytest.importorskip("transformers.cache_utils")
    c.mp.delattr(cache_utils, "Fp8QuantizedLayer")
    return c.cli("verify", "llama-3.2-1b-instruct", "--engine", "hf", "--run", "--layers", "1",
                 "--kv-cache-dtype", "fp8", "--device", "cpu")  # fmt: skip


def _transformers_missing(c: Ctx):
    pytest.importorskip("torch")
    c.without_module("transformers")
    return c.cli(
        "verify",
        "llama-3.2-1b-instruct",
        "--engine",
        "hf",
        "--run",
        "--layers",
        "1",
        "--device",
        "cpu",
    )


def _run_unsupported(c: Ctx):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # a registered family (Kimi-K2.5's MLA) whose config class transformers cannot build as a causal LM
    cfg = {**TINY, "model_type": "kimi_k25", "kv_lora_rank": 16, "qk_rope_head_dim": 8,
           "qk_nope_head_dim": 8, "v_head_dim": 8}  # fmt: skip
    return c.cli("verify", c.folder(cfg), "--engine", "hf", "--run", "--device", "cpu")


def _record_unwritable(c: Ctx):
    pytest.importorskip("torch")
    (c.tmp / "file").write_text("")
    return c.cli(
        "verify",
        "llama-3.2-1b-instruct",
        "--device",
        "cpu",
        "--record",
        str(c.tmp / "file" / "r.jsonl"),
    )


def _plot(c: Ctx, *, missing: bool = False):
    if missing:
        c.without_module("matplotlib")
    else:
        pytest.importorskip("matplotlib")
    target = c.tmp / ("chart.png" if missing else "no-such-folder/chart.png")
    return c.cli(
        "curve", "llama-3.2-1b-instruct", "--gpu", "L4", "--lengths", "4k", "--plot", str(target)
    )


ST_HEADER_LIE = (10**6).to_bytes(8, "little") + b"{}"  # declares 1 MB, holds 2 bytes
HUGE = "1" + "0" * 400  # 10^400, as an int on the command line

#: code -> a reproduction returning a CliResult. Through the CLI unless the code needs a fault.
REPRODUCE: dict[str, Callable[[Ctx], object]] = {
    # command line
    "usage": lambda c: c.cli("plan", "--no-such-flag"),
    "invalid-input": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--max-model-len", HUGE),
    "invalid-size": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu-memory", "1e30"),
    "invalid-length": lambda c: c.cli("inspect", c.folder({**TINY, "max_position_embeddings": 1,
                                                           "rope_scaling": {"rope_type": "linear", "factor": 0.5}})),
    "missing-model": lambda c: c.cli("plan", "--gpu", "H100-80GB"),
    "missing-gpu": lambda c: c.cli("plan", "llama-3.1-8b"),
    "conflicting-options": lambda c: c.cli("plan", "qwen3-8b", "--gpu", "L4", "--from-command", "vllm serve llama-3.1-8b"),
    "conflicting-flags": lambda c: c.cli("plan", "--gpu", "L4", "--from-command",
                                         "vllm serve llama-3.1-8b --max-model-len 100 --max-model-len 200"),
    "invalid-serve-command": lambda c: c.cli("plan", "--gpu", "L4", "--from-command", "vllm serve 'unclosed"),
    "flag-not-modelled": lambda c: c.cli("plan", "--gpu", "L4", "--from-command",
                                         "vllm serve llama-3.1-8b --enable-sleep-mode"),
    # models and config.json
    "model-not-found": lambda c: c.cli("inspect", "no-such-model"),
    "path-not-found": lambda c: c.cli("inspect", str(c.tmp / "nowhere" / "config.json")),
    "config-missing": lambda c: (c.tmp.joinpath("empty").mkdir(), c.cli("inspect", str(c.tmp / "empty")))[1],
    "config-unreadable": lambda c: _unreadable(c, "config.json", c.folder(TINY)),
    "config-too-large": lambda c: c.cli("inspect", c.folder(b" " * (16 * 1024 * 1024 + 1) + b"{}")),
    "config-not-utf8": lambda c: c.cli("inspect", c.folder(b'{"model_type": "\xff"}')),
    "config-malformed-json": lambda c: c.cli("inspect", c.folder(b"[" * 100_000)),
    "config-missing-key": lambda c: c.cli("inspect", c.folder({"model_type": "llama"})),
    "config-invalid": lambda c: c.cli("inspect", c.folder({**TINY, "num_hidden_layers": -1})),
    "config-unverified": lambda c: c.cli("inspect", c.folder({**TINY, "rwkv_version": 4})),
    "config-unsupported": lambda c: c.cli("inspect", c.folder({**TINY, "model_type": "falcon_h1", "attn_layer_indices": [1]})),
    # weights and safetensors
    "weights-unknown": lambda c: c.cli("plan", c.folder({k: v for k, v in TINY.items() if k != "vocab_size"}), "--gpu", "L4"),
    "unknown-quantization": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "-q", "nope"),
    "unsupported-quantization": lambda c: c.cli("plan", c.folder({**TINY, "quantization_config": {"quant_method": "nope"}}), "--gpu", "L4"),
    "safetensors-invalid": lambda c: _safetensors(c, model__safetensors=ST_HEADER_LIE),
    "safetensors-unreadable": lambda c: _unreadable(c, "model.safetensors", c.folder(TINY, model__safetensors=ST_HEADER_LIE)),
    "safetensors-missing-shard": lambda c: _safetensors(c, model__safetensors__index__json=b'{"weight_map": {"w": "gone.safetensors"}}'),
    # engines and planning
    "unknown-engine": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "--engine", "nope"),
    "unknown-engine-version": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "--engine-version", "99"),
    "unknown-engine-option": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "-E", "nope=1"),
    "invalid-cudagraph-setting": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4",
                                                 "--cudagraph-capture-sizes", "1,8,64",
                                                 "--max-cudagraph-capture-size", "32"),
    "unmodelled-option": lambda c: c.cli("plan", "llama-3.1-8b", "--engine", "llamacpp", "--gpu", "L4", "-E", "fit=on"),
    "unknown-gpu": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "H1000"),
    "unknown-dtype": lambda c: c.cli("inspect", "llama-3.1-8b", "--kv-cache-dtype", "fp9"),
    "unsupported-dtype": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "--kv-cache-dtype", "fp9"),
    "unsupported-model": lambda c: c.cli("compare", "deepseek-v3", "--attention-variants"),
    # vLLM's SpeculativeConfig forbids unknown keys
    "invalid-speculative-config": lambda c: c.cli("plan", "deepseek-v3", "--gpu", "H200", "-tp", "8",
                                                  "-sc", '{"method": "mtp", "num_spec_tokens": 1}'),
    "speculative-not-modelled": lambda c: c.cli("plan", "deepseek-v3", "--gpu", "H200", "-tp", "8",
                                                "-sc", '{"method": "dflash", "model": "x/y"}'),
    "invalid-parallelism": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "-tp", "3"),
    "max-model-len-exceeded": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "-tp", "3",
                                              "--max-model-len", "200000"),
    "unsupported-parallelism": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "--engine", "llamacpp", "-dcp", "2"),
    "bandwidth-unknown": lambda c: c.cli("throughput", "llama-3.1-8b", "--gpu-memory", "80GiB"),
    "invalid-prices": lambda c: c.cli("recommend", "llama-3.1-8b", "--concurrency", "1",
                                      "--prices", c.folder({}, "p") + "/config.json"),
    "lora-refused": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "--enable-lora", "--max-lora-rank", "24"),
    "lora-not-modelled": lambda c: c.cli("plan", "deepseek-v3", "--gpu", "H200", "-tp", "8", "--enable-lora"),
    "offload-not-modelled": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "--kv-transfer-config",
                                            '{"kv_connector":"MooncakeConnector"}'),
    # deployment files and calibration
    "invalid-deployment": _deployment,
    "calibration-not-found": lambda c: c.cli("plan", "llama-3.1-8b", "--gpu", "L4", "--calibration", str(c.tmp / "none.jsonl")),
    "calibration-invalid": _calibration("{not json\n"),
    "record-unwritable": _record_unwritable,
    # the Hub (a loopback server)
    "hub-repo-not-found": _hub_case(lambda hub: None),
    "hub-gated": _hub_case(lambda hub: hub.add("acme/x", {"config.json": TINY}, gated=True, gated_token="hf_other")),
    "hub-revision-not-found": lambda c: (c.hub().add("acme/x", {"config.json": TINY}), c.cli("inspect", "acme/x@nope"))[1],
    "hub-no-config": _hub_case(lambda hub: hub.add("acme/x", {"model.gguf": b"GGUF"})),
    "hub-file-not-found": _hub_case(_sharded_missing_on_hub),
    "hub-not-cached": lambda c: (c.hub(), c.cli("inspect", "acme/x", "--offline"))[1],
    "hub-invalid-repo-id": lambda c: (c.hub(), c.cli("inspect", "acme/na..me"))[1],
    "hub-unauthorized": _hub_case(lambda hub: hub.add("acme/x", {"config.json": TINY}, fail_status=401)),
    "hub-forbidden": _hub_case(lambda hub: hub.add("acme/x", {"config.json": TINY}, fail_status=403)),
    "hub-rate-limited": _hub_case(lambda hub: hub.add("acme/x", {"config.json": TINY}, fail_status=429)),
    "hub-http-error": _hub_case(lambda hub: hub.add("acme/x", {"config.json": TINY}, fail_status=503)),
    "hub-timeout": _hub_case(lambda hub: hub.add("acme/x", {"config.json": TINY}, slow_s=3.0)),
    "hub-unreachable": _hub_case(lambda hub: hub.stop()),
    "hub-bad-response": _hub_case(lambda hub: hub.add("acme/x", {"config.json": TINY}, fault="redirect-loop")),
    "hub-bad-endpoint": lambda c: (c.mp.setenv("HF_ENDPOINT", "ftp://hub.example"), c.cli("inspect", "acme/x"))[1],
    "hub-bad-environment": lambda c: c.subprocess("inspect", "acme/x", "--offline", HF_HUB_DOWNLOAD_TIMEOUT="abc"),
    # verify
    "torch-missing": _torch_missing,
    "transformers-missing": _transformers_missing,
    "backend-missing": _backend_missing,
    "backend-unsupported": _backend_unsupported,
    "ambiguous-dtype": lambda c: c.cli("plan", "llama-3.2-1b-instruct", "--engine", "llamacpp", "--gpu", "L4",
                                       "--kv-cache-dtype", "int4"),
    "needs-cuda": lambda c: (pytest.importorskip("torch"), c.cli("verify", "llama-3.2-1b-instruct", "--fill", "--device", "cpu"))[1],
    "too-large": lambda c: (pytest.importorskip("torch"), c.cli("verify", "llama-3.2-1b-instruct", "--device", "cpu", "--num-blocks", str(10**12)))[1],
    "unsupported-engine": lambda c: c.cli("verify", "llama-3.2-1b-instruct", "--engine", "trtllm", "--device", "cpu"),
    "run-needs-hf": lambda c: c.cli("verify", "llama-3.2-1b-instruct", "--run"),
    "run-unsupported-model": _run_unsupported,
    "nothing-to-verify": _nemotron_without_attention,
    "llamacpp-missing": _llamacpp_missing,
    # GGUF
    "gguf-not-gguf": lambda c: _gguf(c, "magic"),
    "gguf-truncated": lambda c: _gguf(c, "truncated"),
    "gguf-invalid": lambda c: _gguf(c, "type"),
    "gguf-missing-shard": lambda c: _gguf(c, "shard"),
    "gguf-file-not-found": lambda c: _gguf_repo(c, "acme/x:Q2_K"),
    "gguf-ambiguous": lambda c: _gguf_repo(c, "acme/x:Q4_0"),
    # curve --plot
    "matplotlib-missing": lambda c: _plot(c, missing=True),
    "plot-write-failed": lambda c: _plot(c),
    "internal": _internal,
}  # fmt: skip


def test_every_documented_code_has_a_reproduction():
    assert sorted(set(documented_codes()) ^ set(REPRODUCE)) == []


@pytest.mark.parametrize("code", sorted(REPRODUCE))
def test_each_code_is_produced(cli, tmp_path, monkeypatch, code):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    c = Ctx(cli, tmp_path, monkeypatch)
    try:
        result = REPRODUCE[code](c)
    finally:
        c.close()
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error[")]
    assert errors == [errors[-1]] and errors[0].startswith(f"error[{code}]: "), result.stderr
    assert lines[-1].startswith("hint: ") and lines[-2] == errors[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == "", result.stdout  # nothing else printed (huggingface_hub once did)
