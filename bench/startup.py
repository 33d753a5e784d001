"""Cold-start cost of `kvcalc plan` on a bundled model, as a ratio to a one-command typer app.

Runs each command several times in fresh interpreters (one run, interleaved, so machine load
affects both alike) and prints the fastest (``--stat min``, the default: least disturbed by other
work on the machine) or median wall times and their ratio, and the same for the CPU time the
child used (user + system: less disturbed by a loaded machine than wall time). The children run
with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` dropped), as an installed package has its
``.pyc`` files: otherwise kvcalc's modules would be compiled from source on every run while
typer's come from its cache. Also lists heavy modules that
the kvcalc path imported (there must be none: torch, huggingface_hub, yaml).

    python bench/startup.py [--runs 7] [--command plan|inspect|models] [--stat min|median]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
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


def _time(code: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh interpreter running ``code``."""
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, env=ENV)
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
    ns = parser.parse_args()
    args = COMMANDS[ns.command]
    kvcalc_code = (
        f"from kvcalc.cli.app import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass"
    )
    hello = (
        "import typer\napp = typer.Typer()\n@app.command()\ndef hello(name: str = 'x'):\n    print(name)\n"
        "try:\n    app(['--name', 'y'])\nexcept SystemExit:\n    pass"
    )
    _time(kvcalc_code)  # write the bytecode cache once
    bare, app_run, ours = [], [], []
    for _ in range(ns.runs):
        bare.append(_time("import typer"))
        app_run.append(_time(hello))
        ours.append(_time(kvcalc_code))
    # the minimum is the run least disturbed by other work on the machine
    pick = min if ns.stat == "min" else statistics.median
    for index, clock in enumerate(("wall", "CPU")):
        b, h, o = (pick(t[index] for t in runs) for runs in (bare, app_run, ours))
        print(f"{clock} time, {ns.stat} over {ns.runs} runs (kvcalc {' '.join(args)})")
        print(f"  import typer                {b * 1000:7.1f} ms")
        print(f"  a one-command typer app     {h * 1000:7.1f} ms")
        print(f"  kvcalc {ns.command:<20} {o * 1000:7.1f} ms")
        print(f"  ratio to import typer       {o / b:7.2f}x")
        print(f"  ratio to a typer app        {o / h:7.2f}x")
    heavy = heavy_modules(args)
    print("heavy modules imported: " + (", ".join(heavy) if heavy else "none"))


if __name__ == "__main__":
    main()
