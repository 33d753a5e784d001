"""Record a serving engine's flags from its own argument parser, and compile them for kvcalc.

    # vLLM 0.33.0: `vllm serve`'s parser (make_arg_parser on a FlexibleArgumentParser); the
    # reference harness's fake CUDA platform lets vLLM build its config defaults without a GPU
    HF_HUB_OFFLINE=1 $VLLMENV/bin/python scripts/serve_flags.py vllm --harness $VLLM_REFERENCE \\
        > tests/fixtures/vllm_0_33/serve_flags.json
    # SGLang 0.5.23: `python -m sglang.launch_server`'s parser (ServerArgs.add_cli_args)
    $SGLANGENV/bin/python scripts/serve_flags.py sglang > tests/fixtures/sglang_0_5_23/launch_server_flags.json
    # the table kvcalc reads at run time (kvcalc/data/serve_flags.json), from the two recordings
    python scripts/serve_flags.py compile

``$VLLM_REFERENCE`` is the folder of the vLLM reference harness (``vllm_reference.py``).
tests/test_serve_flags.py fails while kvcalc/data/serve_flags.json differs from what ``compile``
writes, and while a recorded flag has no class (modelled, no effect on memory, not modelled).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = {
    "vllm": ROOT / "tests" / "fixtures" / "vllm_0_33" / "serve_flags.json",
    "sglang": ROOT / "tests" / "fixtures" / "sglang_0_5_23" / "launch_server_flags.json",
}
TABLE = ROOT / "kvcalc" / "data" / "serve_flags.json"
#: what the run-time table keeps of each recorded flag
KEPT = ("options", "dest", "negative", "takes_value", "nargs", "choices", "type")


def _type_name(t: Any) -> str | None:
    if t is None:
        return None
    return getattr(t, "__name__", type(t).__name__)


def _choices(choices: Any) -> list[Any] | None:
    if choices is None:
        return None
    if isinstance(choices, (set, frozenset)):  # no order of its own: sorted, for a stable file
        choices = sorted(choices, key=str)
    return [c if c is None or isinstance(c, (int, float, str)) else str(c) for c in choices]


def _actions(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """Every optional argument as the parser matches it: all its option strings (hidden ones
    too: ``parser._option_string_actions`` is what ``parse_args`` looks up)."""
    by_action: dict[int, list[str]] = {}
    for option, action in parser._option_string_actions.items():
        by_action.setdefault(id(action), []).append(option)
    out = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        options = sorted(by_action.get(id(action), action.option_strings),
                         key=lambda o: (o not in action.option_strings, not o.startswith("--"),
                                        action.option_strings.index(o) if o in action.option_strings else 0, o))  # fmt: skip
        negative = sorted(set(getattr(action, "negative_option_strings", ()) or ()) & set(options)
                          | {o for o in options if o.startswith("--no-")
                             and isinstance(action, argparse.BooleanOptionalAction)})  # fmt: skip
        nargs = action.nargs
        out.append({
            "options": options,
            "negative": negative,
            "dest": action.dest,
            "action": type(action).__name__,
            "takes_value": nargs != 0,
            "nargs": nargs,
            "choices": _choices(action.choices),
            "type": _type_name(action.type),
        })  # fmt: skip
    return out


def _provenance(engine: str, command: str, harness: str | None = None) -> dict[str, str]:
    """The block tests/test_fixture_provenance.py reads (docs/testing.md)."""
    import torch
    import transformers

    def sha(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    tool = f"scripts/serve_flags.py sha256:{sha(Path(__file__))}"
    if harness:
        tool += (" with shared/tools/vllm_reference/vllm_reference.py sha256:"
                 f"{sha(Path(harness) / 'vllm_reference.py')} (its fake CUDA platform only)")  # fmt: skip
    return {
        "kind": "engine-recording",
        "engine": engine,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tool": tool,
        "recorded": datetime.date.today().isoformat(),
        "command": command,
    }


def record_vllm(harness: str) -> dict[str, Any]:
    sys.path.insert(0, harness)
    import vllm_reference  # the reference harness: a fake CUDA platform for config defaults

    vllm_reference._bootstrap("h100")
    import dataclasses

    import vllm
    from vllm.config.cache import KV_CACHE_DTYPES
    from vllm.config.compilation import CompilationConfig
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    command = (
        "HF_HUB_OFFLINE=1 $VLLMENV/bin/python scripts/serve_flags.py vllm "
        "--harness $VLLM_REFERENCE > tests/fixtures/vllm_0_33/serve_flags.json"
    )
    return {
        "provenance": _provenance(f"vLLM {vllm.__version__}", command, harness),
        "engine": f"vLLM {vllm.__version__}",
        "program": "vllm serve",
        "recorded_with": "scripts/serve_flags.py vllm: vllm/entrypoints/common/cli_args.py "
        "make_arg_parser(FlexibleArgumentParser()) (FrontendArgs.add_cli_args, "
        "AsyncEngineArgs.add_cli_args in vllm/engine/arg_utils.py), every entry of "
        "parser._option_string_actions",
        "command": command,
        "recorded_on": datetime.date.today().isoformat(),
        "allow_abbrev": parser.allow_abbrev,
        # values argparse takes as text but the engine's config refuses, by its own list
        "validated": {
            "kv_cache_dtype": {
                "choices": list(KV_CACHE_DTYPES),
                "where": "vllm/config/cache.py CacheConfig._validate_cache_dtype",
                "message": "Invalid kv_cache_dtype: {value!r}. Valid values are: {choices}",
            },
            "quantization": {
                "choices": list(QUANTIZATION_METHODS),
                "lowercased": True,
                "where": "vllm/config/model.py ModelConfig._verify_quantization",
                "message": "Unknown quantization method: {value}. Must be one of {choices}.",
            },
        },
        # the keys -cc/--compilation-config takes (vllm/config/compilation.py CompilationConfig)
        "config_keys": {
            "compilation_config": [f.name for f in dataclasses.fields(CompilationConfig)]
        },
        "flags": _actions(parser),
    }


def record_sglang() -> dict[str, Any]:
    import sglang
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")  # as prepare_server_args builds it
    ServerArgs.add_cli_args(parser)
    command = (
        "$SGLANGENV/bin/python scripts/serve_flags.py sglang "
        "> tests/fixtures/sglang_0_5_23/launch_server_flags.json"
    )
    return {
        "provenance": _provenance(f"SGLang {sglang.__version__}", command),
        "engine": f"SGLang {sglang.__version__}",
        "program": "python -m sglang.launch_server",
        "recorded_with": "scripts/serve_flags.py sglang: sglang/srt/server_args.py "
        "ServerArgs.add_cli_args(argparse.ArgumentParser()) as sglang/launch_server.py "
        "prepare_server_args builds it, every entry of parser._option_string_actions",
        "command": command,
        "recorded_on": datetime.date.today().isoformat(),
        "allow_abbrev": parser.allow_abbrev,
        "validated": {},
        "flags": _actions(parser),
    }


def compile_table() -> dict[str, Any]:
    """The run-time table: per engine, the flags as the parser matches them."""
    out: dict[str, Any] = {"source": "compiled by scripts/serve_flags.py from "
                           + ", ".join(str(p.relative_to(ROOT)) for p in RECORDINGS.values())}  # fmt: skip
    for engine, path in RECORDINGS.items():
        if not path.exists():
            continue
        rec = json.loads(path.read_text(encoding="utf-8"))
        out[engine] = {
            "engine": rec["engine"],
            "program": rec["program"],
            "allow_abbrev": rec["allow_abbrev"],
            "validated": rec["validated"],
            "config_keys": rec.get("config_keys", {}),
            "flags": [{k: f[k] for k in KEPT} for f in rec["flags"]],
        }
    return out


def dump(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def dump_table(table: dict[str, Any]) -> str:
    """The run-time table, one flag a line (a reviewable diff when a release adds flags)."""

    def one(x: Any) -> str:
        return json.dumps(x, ensure_ascii=False, separators=(",", ":"))

    lines = ["{", f' "source": {one(table["source"])},']
    engines = [k for k in table if k != "source"]
    for n, engine in enumerate(engines):
        rec = table[engine]
        lines.append(f' "{engine}": {{')
        for key in ("engine", "program", "allow_abbrev", "validated", "config_keys"):
            lines.append(f'  "{key}": {one(rec[key])},')
        lines.append('  "flags": [')
        lines += [f"   {one(f)}," for f in rec["flags"]]
        lines[-1] = lines[-1].rstrip(",")
        lines.append("  ]")
        lines.append(" }" + ("," if n + 1 < len(engines) else ""))
    return "\n".join(lines) + "\n}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("vllm", "sglang", "compile"))
    ap.add_argument("--harness", help="the vLLM reference harness's folder")
    args = ap.parse_args()
    if args.what == "compile":
        TABLE.write_text(dump_table(compile_table()), encoding="utf-8")
        return
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # engines print while importing
    try:
        data = record_vllm(args.harness) if args.what == "vllm" else record_sglang()
    finally:
        sys.stdout = real_stdout
    sys.stdout.write(dump(data))


if __name__ == "__main__":
    main()
