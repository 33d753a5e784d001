"""Ask SGLang 0.5.23 what one ``launch_server`` flag changes at start-up (a recording tool).

Runs the SGLang reference tool beside the project (``--harness``: its ``sglang_reference.py``)
once per command: the command's flags are parsed by SGLang's own ``prepare_server_args`` (its
argparse parser and ``ServerArgs.from_cli_args``), resolved by its pipeline
(``runtime_context.publish``), and the tool's pool sizing runs on them (emulated H100 80 GB, the
KV budget fixed by ``--kv-memory-gib``). Each entry records SGLang's error, or its
``max_total_num_tokens``, ``max_running_requests``, default ``mem_fraction_static`` and every
resolved server argument (but the random default seed) that differs from the same command without the flag — so a flag read
only after start-up (a scheduler policy, a tokenizer option) shows no difference, and one that
resolves others (``--enable-deterministic-inference`` choosing an attention backend) names them.

    python scripts/sglang_flag_probe.py --harness PATH/sglang_reference.py \\
        --config PATH/config.json --tp 1 --kv-memory-gib 20 \\
        --flags flags.json --out probe.json

``flags.json`` is a list of argument lists (``[["--schedule-policy", "lpm"], ...]``). Run with
the SGLang venv's Python (its README), ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from typing import Any

_SIZING = (
    "max_total_num_tokens", "max_running_requests", "page_size", "cell_size_bytes", "status",
    "failed_stage", "error",
)  # fmt: skip
#: what resolution picked, recorded for an entry that fails later (its pools not built)
_PICKED = (
    "attention_backend", "page_size", "speculative_algorithm", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens",
)  # fmt: skip
#: the emulated GPUs (``--gpu``): what the reference tool's device queries answer
GPUS = {
    "h100": dict(name="NVIDIA H100 80GB HBM3", cap=(9, 0), total_mib=81559, sms=132, count=8),
    "b200": dict(name="NVIDIA B200", cap=(10, 0), total_mib=182623, sms=148, count=8),
    "a100": dict(name="NVIDIA A100-SXM4-80GB", cap=(8, 0), total_mib=81920, sms=108, count=8),
    "rtx5090": dict(name="NVIDIA GeForce RTX 5090", cap=(12, 0), total_mib=32607, sms=170, count=8),
}


def _load_harness(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("sglang_reference", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _one(
    harness_path: str, config_dir: str, tp: int, kv_gib: float, argv: list[str], gpu: str = "h100"
) -> dict:
    """One command in this process (SGLang's context is process-global)."""
    harness = _load_harness(harness_path)
    harness.GPU.update(GPUS[gpu])
    harness.FREE[0] = harness.GPU["total_mib"] << 20
    harness._bootstrap()
    import logging

    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    import sglang.srt.server_args as sa_mod
    from sglang.srt.arg_groups.arg_utils import record_fields
    from sglang.srt.arg_groups.overrides import resolving_view

    original = sa_mod.ServerArgs
    full = ["--model-path", config_dir, "--tp-size", str(tp), "--skip-tokenizer-init", *argv]
    try:
        made = [sa_mod.prepare_server_args(full)]
    except BaseException as e:  # noqa: BLE001 - argparse's SystemExit included
        return {"status": "error", "failed_stage": "parse", "error": f"{type(e).__name__}: {e}"}

    # as Engine._launch_subprocesses does (sglang/srt/entrypoints/engine.py): resolve, then
    # check_server_args (the start-up validation that publish() alone does not run)
    for stage, step in (("resolve", made[0].resolve_once), ("check", made[0].check_server_args)):
        try:
            step()
        except BaseException as e:  # noqa: BLE001
            return {"status": "error", "failed_stage": stage, "error": f"{type(e).__name__}: {e}"}

    # what resolution picked, kept for an entry whose pools the tool then cannot build
    resolved = resolving_view(made[0])
    picked = {k: getattr(resolved, k, None) for k in _PICKED}

    def factory(**_harness_kwargs: Any) -> Any:
        return made[0]

    sa_mod.ServerArgs = factory
    try:
        rec = harness.run_scenario(config_dir, tp, "auto", kv_gib)
    finally:
        sa_mod.ServerArgs = original
    out = {k: rec.get(k) for k in _SIZING if k in rec}
    out["mem_fraction_static"] = (rec.get("resolved") or {}).get("schedule.mem_fraction_static")
    if rec.get("status") != "ok":
        out["resolved_before_pools"] = {k: v for k, v in picked.items() if v is not None}
    if rec.get("status") == "ok":
        view = resolving_view(made[0])
        out["attention_backend"], out["page_size"] = view.attention_backend, view.page_size
        strategy = getattr(view, "mamba_radix_cache_strategy", None)
        if strategy not in (None, "auto"):
            out["mamba_radix_cache_strategy"] = strategy
        out["resolved"] = {
            f.name: harness._plain(getattr(view, f.name, None)) for f in record_fields(original)
        }
    return out


def _child(a: argparse.Namespace) -> None:
    argv = json.loads(a.argv)
    json.dump(_one(a.harness, a.config_dir, a.tp, a.kv_memory_gib, argv, a.gpu), sys.stdout)


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harness", required=True)
    ap.add_argument("--config")
    ap.add_argument("--config-dir")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--kv-memory-gib", type=float, default=20.0)
    ap.add_argument("--flags")
    ap.add_argument("--argv")
    ap.add_argument("--out")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--gpu", choices=sorted(GPUS), default="h100")
    a = ap.parse_args()
    if a.argv is not None:
        return _child(a)
    commands: list[list[str]] = [[]] + json.load(open(a.flags))
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(a.config, os.path.join(d, "config.json"))

        def run(argv: list[str]) -> dict:
            p = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--harness", a.harness,
                 "--config-dir", d, "--tp", str(a.tp), "--kv-memory-gib", str(a.kv_memory_gib),
                 "--gpu", a.gpu, "--argv", json.dumps(argv)],
                capture_output=True, text=True,
            )  # fmt: skip
            try:
                r = json.loads(p.stdout)
            except ValueError:
                r = {"status": "crash", "error": p.stderr[-2000:]}
            print(f"{' '.join(argv) or '(baseline)'}: {r.get('status')} "
                  f"{r.get('max_total_num_tokens')}", file=sys.stderr)  # fmt: skip
            return {"argv": argv, **r}

        with ThreadPoolExecutor(a.jobs) as ex:
            entries = list(ex.map(run, commands))
    base = entries[0].get("resolved", {})
    for e in entries:
        resolved = e.pop("resolved", None)
        if resolved is not None and e["argv"]:
            e["resolved_changes"] = {
                k: v for k, v in resolved.items() if base.get(k) != v and k != "random_seed"
            }
    import importlib.metadata as md

    out = {
        "provenance": {
            "kind": "engine-recording",
            "engine": f"SGLang {md.version('sglang')} (sglang-kernel {md.version('sglang-kernel')})",
            "torch": md.version("torch"),
            "transformers": md.version("transformers"),
            "tool": "scripts/sglang_flag_probe.py driving shared/tools/sglang_reference/"
            f"sglang_reference.py sha256:{_sha256(a.harness)}",
            "recorded": date.today().isoformat(),
            "command": f"HF_HUB_OFFLINE=1 $SGLENV/bin/python scripts/sglang_flag_probe.py "
            f"--harness shared/tools/sglang_reference/sglang_reference.py --config "
            f"{os.path.basename(a.config)} --tp {a.tp} --kv-memory-gib {a.kv_memory_gib:g} "
            f"--gpu {a.gpu} --flags {os.path.basename(a.flags)}",
        },
        "config": os.path.basename(a.config),
        "gpu": GPUS[a.gpu]["name"],
        "tp": a.tp,
        "kv_memory_gib": a.kv_memory_gib,
        "baseline": entries[0],
        "entries": entries[1:],
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
