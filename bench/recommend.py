"""Wall and CPU time of `kvcalc recommend`'s search over the whole GPU catalog, for bundled models.

For each model: the search (bounds and early stop, as the command runs it), the time of one plan
of the winner (so the search reads as "N plans' worth"), and the plans the search made against
the candidates it ruled out without planning. ``--exhaustive`` also times the slow path (every
candidate planned, no bound) on the catalog's priced GPUs and prints the ratio. Times are the
fastest of ``--runs`` (least disturbed by other work on the machine) and the first of them (the
process's weight estimates not yet memoised: what one ``kvcalc recommend`` pays); the model is
loaded once before timing.

    python bench/recommend.py [--runs 3] [--exhaustive] [--model deepseek-v3 ...]
"""

from __future__ import annotations

import argparse
import time

CASES = (
    ("llama-3.1-8b", 32768, 64),
    ("qwen3-30b-a3b", 32768, 64),
    ("qwen3-next-80b-a3b-thinking", 32768, 64),
    ("deepseek-v3", 32768, 64),
)


def _timed(fn, runs: int):
    """(result, first wall time, fastest wall time, fastest CPU time)."""
    walls, cpus = [], []
    out = None
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return out, walls[0], min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--exhaustive", action="store_true")
    parser.add_argument("--model", action="append", help="bundled model (repeatable)")
    args = parser.parse_args()

    from kvcalc.model.gpus import list_gpus
    from kvcalc.planning.api import read_prices

    catalog = tuple(g.name for g in list_gpus())
    priced = tuple(g for g in catalog if read_prices().price(g) is not None)
    cases = [c for c in CASES if not args.model or c[0] in args.model]
    print(f"{'model':<30} {'first s':>7} {'wall s':>7} {'cpu s':>6} {'plan ms':>8} "
          f"{'x plan':>7} {'planned':>7} {'bounded':>7}")  # fmt: skip
    for reference, length, concurrency in cases:
        _case(reference, length, concurrency, catalog, priced, args.runs, args.exhaustive)


def _case(reference: str, length: int, concurrency: int, catalog: tuple[str, ...],
          priced: tuple[str, ...], runs: int, exhaustive: bool) -> None:  # fmt: skip
    from kvcalc.engines.names import EngineName
    from kvcalc.planning.api import plan_reference, recommend_reference, resolve_model_cached
    from kvcalc.planning.inputs import PlanInputs
    from kvcalc.planning.recommend_result import Requirements, Search

    resolve_model_cached(reference)
    base = PlanInputs(gpu=catalog[0], max_model_len=length)

    def search(gpus: tuple[str, ...] = catalog, slow: bool = False):
        return recommend_reference(
            reference, base, Requirements(concurrency=concurrency),
            Search(gpus=gpus, engines=(EngineName.VLLM,), exhaustive=slow),
        )  # fmt: skip

    result, first, wall, cpu = _timed(search, runs)
    one = 0.0
    if result.candidates:
        best = result.candidates[0].kvcalc_command
        inputs = result.candidates[0].plan.inputs
        fields = {k: v for k, v in inputs.items() if k in PlanInputs.__dataclass_fields__
                  and k not in ("speculative_config", "engine_options")}  # fmt: skip
        winner = PlanInputs(**fields)
        _, _, one, _ = _timed(lambda: plan_reference(reference, winner, with_suggestions=False),
                              runs)  # fmt: skip
        assert best
    ratio = f"{wall / one:7.1f}" if one else "      -"
    print(f"{reference:<30} {first:7.2f} {wall:7.2f} {cpu:6.2f} {one * 1000:8.1f} {ratio} "
          f"{result.planned:7d} {result.bounded:7d}")  # fmt: skip
    if exhaustive:
        slow, _, slow_wall, _ = _timed(lambda: search(priced, True), 1)
        fast, _, fast_wall, _ = _timed(lambda: search(priced), 1)
        same = [c.kvcalc_command for c in fast.candidates] == [
            c.kvcalc_command for c in slow.candidates
        ]
        print(f"  priced GPUs only: exhaustive {slow_wall:.2f} s ({slow.planned} plans), "
              f"search {fast_wall:.2f} s ({fast.planned} plans): "
              f"{slow_wall / fast_wall:.1f}x faster, same rows: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
