"""Sweep capacity curves in-process and print points per second.

10 bundled models × 10 catalog GPUs × 2 KV dtypes × 50 context lengths = 10,000 points. Each
(model, GPU, dtype) is planned once (:func:`kvcalc.planning.curves.curve_basis`); the 50 lengths are priced
with the engine's block arithmetic (:func:`kvcalc.planning.curves.curve_point`).

    python bench/sweep.py            # prints points, seconds and points per second
    python bench/sweep.py --check    # also re-plans 1 point in 50 in full and compares
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # this checkout, not an installed copy

MODELS = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-8b", "qwen2.5-7b", "llama-3.1-8b", "mistral-7b-v0.1",
          "gemma-2-9b-it", "gpt-oss-20b", "qwen3-30b-a3b", "mixtral-8x7b-v0.1")  # fmt: skip
GPUS = (
    "H100-SXM",
    "H200",
    "B200",
    "A100-40GB",
    "A100-80GB",
    "L40S",
    "L4",
    "A10G",
    "RTX-4090",
    "MI300X",
)
DTYPES = ("auto", "fp8")
NUM_LENGTHS = 50


def lengths(max_len: int, count: int = NUM_LENGTHS) -> tuple[int, ...]:
    """``count`` lengths spread geometrically from 256 to ``max_len`` (distinct, sorted)."""
    out, n = [], 0
    ratio = (max_len / 256) ** (1 / (count - 1))
    for i in range(count):
        n = max(n + 1, round(256 * ratio**i))
        out.append(min(n, max_len) if i < count - 1 else max_len)
    return tuple(out)


def main(argv: list[str]) -> int:
    from kvcalc.planning.api import resolve_model_cached
    from kvcalc.planning.curves import capacity_curve
    from kvcalc.planning.inputs import PlanInputs

    shapes = [
        resolve_model_cached(m).shape for m in MODELS
    ]  # config parsing is not part of the sweep
    start = time.perf_counter()
    points = 0
    curves = []
    for shape in shapes:
        grid = lengths(shape.max_model_len)
        for gpu in GPUS:
            c = capacity_curve(shape, PlanInputs(gpu=gpu), lengths=grid, kv_cache_dtypes=DTYPES)
            points += sum(len(s.points) for s in c.series)
            curves.append((shape, gpu, c))
    elapsed = time.perf_counter() - start
    print(
        f"{points:,} points (models × GPUs × dtypes × lengths = {len(MODELS)} × {len(GPUS)} × "
        f"{len(DTYPES)} × {NUM_LENGTHS}) in {elapsed:.3f} s: {points / elapsed:,.0f} points/s"
    )
    if "--check" in argv:
        _check(curves)
    return 0


def _check(curves) -> None:
    from dataclasses import replace

    from kvcalc.planning.core import plan
    from kvcalc.planning.inputs import PlanInputs

    checked = bad = 0
    for shape, gpu, c in curves:
        for s in c.series:
            for p in s.points[::50]:
                inputs = PlanInputs(
                    gpu=gpu, kv_cache_dtype=s.kv_cache_dtype, max_model_len=p.length_tokens
                )
                r = plan(shape, replace(inputs), with_suggestions=False)
                conc = r.max_concurrency if r.verdict != "weights-dont-fit" else 0.0
                checked += 1
                bad += abs(conc - p.max_concurrency) > 1e-9 * max(1.0, conc)
    print(f"checked {checked} points against full plans: {bad} differ")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
