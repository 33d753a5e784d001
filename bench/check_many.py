"""How fast ``kvcalc check`` gets through a big deployment file: deployments per second.

Writes one file of ``--count`` deployments (default 1,000) of bundled models — varied models,
GPUs, context lengths, cache dtypes and requirements, so that most plans differ — then times
:func:`kvcalc.deploy.check_paths` on it in this process after start-up (imports and a first
small check are done first, so the figure is the check itself), and the whole CLI in a fresh
interpreter for comparison. Each model's config is parsed once per process; a plan is arithmetic.

The target is 1 ms a deployment (1,000 within 1 s after start-up); the ratio to it is printed.

``--instructions`` counts, under valgrind's callgrind, the instructions the check itself executes
(a child that starts up and checks the file, less one that only starts up): the same figure on an
idle and a loaded machine, for comparing two versions while other work runs.

    python bench/check_many.py [--count 1000] [--runs 5] [--instructions]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = ("llama-3.1-8b", "qwen3-8b", "mistral-7b-v0.1", "gemma-3-1b-it", "qwen2.5-7b",
          "llama-3.1-70b", "qwen3-30b-a3b", "gpt-oss-20b")  # fmt: skip
GPUS = ("H100-80GB", "A100-80GB", "L40S", "H200", "RTX-4090")
LENGTHS = (4096, 8192, 16384, 32768)
DTYPES = ("auto", "fp8")


def write_file(path: Path, count: int) -> None:
    combos = itertools.cycle(itertools.product(MODELS, GPUS, LENGTHS, DTYPES))
    lines = ["deployments:"]
    for i, (model, gpu, length, dtype) in zip(range(count), combos, strict=False):
        tp = 2 if "70b" in model else 1
        lines += [
            f"  - name: d{i}",
            f"    model: {model}",
            f"    gpu: {gpu}",
            f"    tensor_parallel_size: {tp}",
            f"    max_model_len: {length}",
            f"    kv_cache_dtype: {dtype}",
            f"    max_num_seqs: {16 + i % 7 * 8}",
            "    requirements:",
            f"      min_concurrency: {1 + i % 5}",
            "      allow_verdicts: [ok, tight, below-target]",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--instructions", action="store_true",
                        help="count the check's instructions under valgrind's callgrind")  # fmt: skip
    ns = parser.parse_args()
    if ns.instructions:
        _instructions(ns.count)
        return

    from kvcalc.deploy import check_paths
    from kvcalc.deploy.run import plan_deployment, read_file

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "many.yaml"
        write_file(path, ns.count)
        warm = Path(tmp) / "warm.yaml"
        warm.write_text("model: llama-3.1-8b\ngpu: H100-80GB\n", encoding="utf-8")
        check_paths([str(warm)])  # start-up: imports, GPU catalog

        parse, whole, whole_cpu = [], [], []
        for _ in range(ns.runs):
            start = time.perf_counter()
            _, problems = read_file(str(path))
            parse.append(time.perf_counter() - start)
            assert not problems, problems[:3]
            start, cpu = time.perf_counter(), time.process_time()
            report = check_paths([str(path)])
            whole.append(time.perf_counter() - start)
            whole_cpu.append(time.process_time() - cpu)
            assert not report.problems, report.problems[:3]
        deployments, _ = read_file(str(path))
        start = time.perf_counter()
        for dep in deployments:
            plan_deployment(dep, with_suggestions=False)
        bare = time.perf_counter() - start
        p, w = statistics.median(parse), statistics.median(whole)
        passed = sum(r.passed for r in report.results)
        print(
            f"{ns.count} deployments ({len({r.plan.model for r in report.results})} models, "
            f"{passed} pass), median of {ns.runs} runs after start-up:"
        )
        print(f"  read + validate  {p * 1000:8.1f} ms")
        c = statistics.median(whole_cpu)
        print(f"  whole check      {w * 1000:8.1f} ms   {ns.count / w:,.0f} deployments/s")
        print(
            f"  whole check, CPU time of this process {c * 1000:8.1f} ms (steadier on a loaded machine)"
        )
        # the target: 1,000 deployments checked within 1 s after start-up (1 ms each)
        target = ns.count / 1000
        print(f"  ratio to the target ({target:g} s for {ns.count:,})  {w / target:7.2f}x wall, "
              f"{c / target:.2f}x CPU")  # fmt: skip
        failing = sum(not r.passed for r in report.results)
        print(
            f"    of which: one plan each, no suggestions {bare * 1000:8.1f} ms; computed "
            f"suggestions for the {failing} failing deployments, the rest"
        )

        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "kvcalc", "check", str(path), "--format", "json"],
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        cli = time.perf_counter() - start
        print(
            f"  CLI, fresh interpreter (start-up included, JSON out) {cli * 1000:8.1f} ms "
            f"(exit {done.returncode})"
        )


_CHILD = """import sys
sys.path.insert(0, {root!r})
from kvcalc.deploy import check_paths
check_paths([{warm!r}])
if {run!r}:
    check_paths([{path!r}])
"""


def _instructions(count: int) -> None:
    import re
    import shutil

    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        path, warm = Path(tmp) / "many.yaml", Path(tmp) / "warm.yaml"
        write_file(path, count)
        warm.write_text("model: llama-3.1-8b\ngpu: H100-80GB\n", encoding="utf-8")
        totals = []
        for run in (True, False):
            code = _CHILD.format(root=str(ROOT), warm=str(warm), path=str(path), run=run)
            subprocess.run([sys.executable, "-c", code], check=True)  # bytecode cache written
            done = subprocess.run(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                 "-c", code], capture_output=True, text=True, check=True,
            )  # fmt: skip
            found = re.search(r"Collected : (\d+)", done.stderr)
            if found is None:
                raise SystemExit("callgrind printed no instruction count")
            totals.append(int(found.group(1)))
    print(f"check of {count:,} deployments after start-up: {(totals[0] - totals[1]) / 1e6:,.0f} M "
          "instructions (callgrind)")  # fmt: skip


if __name__ == "__main__":
    main()
