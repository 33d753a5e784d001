"""Cold-start cost of `kvcalc plan` on a bundled model, as a ratio to a one-command typer app.

Runs each command several times in fresh interpreters (one run, interleaved, so machine load
affects both alike) and prints the fastest (``--stat min``, the default: least disturbed by other
work on the machine) or median wall times and their ratio, and the same for the CPU time the
child used (user + system: less disturbed by a loaded machine than wall time). The children run
with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` dropped), as an installed package has its
``.pyc`` files: otherwise kvcalc's modules would be compiled from source on every run while
typer's come from its cache. ``--no-bytecode`` measures that case on purpose (a source checkout
with ``PYTHONDONTWRITEBYTECODE=1``): kvcalc is imported from a copy without ``__pycache__`` and
nothing is written. Also lists heavy modules that the kvcalc path imported (there must be none:
torch, huggingface_hub, yaml).

``--instructions`` counts the instructions each child executes under valgrind's callgrind
instead (one run each, slow): the same on an idle and a loaded machine, so a change can be
measured while other work runs; time and instructions are not proportional (the ratio of
instructions is larger than the ratio of times), so the target is judged on time.

    python bench/startup.py [--runs 7] [--command plan|inspect|models] [--stat min|median]
                            [--no-bytecode] [--instructions]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "torch",
    "huggingface_hub",
    "yaml",
    "transformers",
    "safetensors",
    "numpy",
    "requests",
    "httpx",
)

COMMANDS = {
    "inspect": ["inspect", "llama-3.1-8b"],
    "plan": ["plan", "llama-3.1-8b", "--gpu", "H100-80GB"],
    "models": ["models"],
}


#: the children's environment: bytecode cached, as an installed package has it
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(code: str, cwd: Path = ROOT) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh interpreter running ``code`` in ``cwd``."""
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=cwd, capture_output=True, env=ENV)
    return time.perf_counter() - start, _cpu() - cpu


def heavy_modules(args: list[str]) -> list[str]:
    code = (
        "import sys, json\n"
        "from kvcalc.cli.app import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    return json.loads(done.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--command", choices=sorted(COMMANDS), default="plan")
    parser.add_argument("--stat", choices=("min", "median"), default="min")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="compile kvcalc from source on every run (PYTHONDONTWRITEBYTECODE=1)")  # fmt: skip
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind's callgrind (one run each)")  # fmt: skip
    ns = parser.parse_args()
    if ns.instructions:
        _instructions(ns)
        return
    if ns.no_bytecode:
        ENV["PYTHONDONTWRITEBYTECODE"] = "1"
        with tempfile.TemporaryDirectory() as tmp:
            # kvcalc's sources without their __pycache__: each run compiles them, as a checkout
            # never run with bytecode written does (typer's still come from its cache)
            shutil.copytree(ROOT / "kvcalc", Path(tmp) / "kvcalc",
                            ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
            (Path(tmp) / "model_configs").symlink_to(ROOT / "model_configs")
            _report(ns, Path(tmp))
    else:
        _report(ns, ROOT)


HELLO = (
    "import typer\napp = typer.Typer()\n@app.command()\ndef hello(name: str = 'x'):\n    print(name)\n"
    "try:\n    app(['--name', 'y'])\nexcept SystemExit:\n    pass"
)


def _count(code: str) -> int:
    """Instructions one fresh interpreter running ``code`` executes (callgrind's total)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code],
        cwd=ROOT, capture_output=True, text=True, env=ENV, check=True,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit("callgrind printed no instruction count")
    return int(found.group(1))


def _instructions(ns: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on the PATH")
    args = COMMANDS[ns.command]
    kvcalc_code = f"from kvcalc.cli.app import main\nmain({args!r})"
    _time(kvcalc_code)  # write the bytecode cache once
    bare, hello, ours = (_count(c) for c in ("import typer", HELLO, kvcalc_code))
    print(f"instructions, one run each under callgrind (kvcalc {' '.join(args)})")
    print(f"  import typer                {bare / 1e6:9.1f} M")
    print(f"  a one-command typer app     {hello / 1e6:9.1f} M")
    print(f"  kvcalc {ns.command:<20} {ours / 1e6:9.1f} M")
    print(f"  ratio to a typer app        {ours / hello:9.2f}x")


def _report(ns: argparse.Namespace, cwd: Path) -> None:
    args = COMMANDS[ns.command]
    # exit status 0 (the plan passes) or the run stops with an error: a failing command is not timed
    kvcalc_code = f"from kvcalc.cli.app import main\nmain({args!r})"
    hello = HELLO
    _time(kvcalc_code, cwd)  # write the bytecode cache once (with --no-bytecode: warm the disk)
    bare, app_run, ours = [], [], []
    for _ in range(ns.runs):
        bare.append(_time("import typer", cwd))
        app_run.append(_time(hello, cwd))
        ours.append(_time(kvcalc_code, cwd))
    # the minimum is the run least disturbed by other work on the machine
    pick = min if ns.stat == "min" else statistics.median
    for index, clock in enumerate(("wall", "CPU")):
        b, h, o = (pick(t[index] for t in runs) for runs in (bare, app_run, ours))
        how = ", no bytecode" if ns.no_bytecode else ""
        print(f"{clock} time, {ns.stat} over {ns.runs} runs{how} (kvcalc {' '.join(args)})")
        print(f"  import typer                {b * 1000:7.1f} ms")
        print(f"  a one-command typer app     {h * 1000:7.1f} ms")
        print(f"  kvcalc {ns.command:<20} {o * 1000:7.1f} ms")
        print(f"  ratio to import typer       {o / b:7.2f}x")
        print(f"  ratio to a typer app        {o / h:7.2f}x")
        if clock == "wall":  # the target: kvcalc plan within 1.3x a one-command typer app
            print(f"  target 1.30x: {'met' if o / h <= 1.3 else 'MISSED'}")
    heavy = heavy_modules(args)
    print("heavy modules imported: " + (", ".join(heavy) if heavy else "none"))


if __name__ == "__main__":
    main()
