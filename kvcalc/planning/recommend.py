"""``kvcalc recommend``: the cheapest deployment that meets a workload, each candidate a plan.

:func:`recommend` is pure: a model, the settings the person fixed (a :class:`PlanInputs`), the
requirements and the search space in, a frozen :class:`Recommendation` out; ``planner`` plans one
candidate (:func:`kvcalc.planning.core.plan` with the checkpoint's exact weights, from
:func:`kvcalc.planning.api.recommend_reference`). Every candidate shown is such a plan: the engine's
own arithmetic, never an estimate of it.

The search (:mod:`kvcalc.planning.recommend_space` says what a candidate is) goes through the
groups (engine × GPU type × count) in the objective's order — cost: priced GPUs by price per hour,
then unpriced ones by count; gpus: by count — and stops once ``top`` groups pass and the next
group ranks after all of them. Before planning, two bounds rule candidates out: the weights alone
(the one-GPU plan's weights over the count, more than the GPU's memory) and the KV of the
requests (their layers' own bytes, more than the GPUs hold beside the weights). A group's row is
its best candidate; candidates rank by the objective, then by concurrency over all KV pools, then
by the decode ceiling, then the simpler settings. ``exhaustive`` plans every candidate with no bound
and no early stop: the tests' slow path, which must give the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvcalc.engines.names import EngineName
from kvcalc.errors import KvcalcError
from kvcalc.model.gpus import get_gpu
from kvcalc.model.shape import ModelShape
from kvcalc.planning import recommend_space as space
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.prices import PriceTable
from kvcalc.planning.recommend_commands import kvcalc_command, serve_command
from kvcalc.planning.recommend_result import (
    Candidate,
    Recommendation,
    Rejection,
    Requirements,
    Search,
)
from kvcalc.planning.result import CapacityPlan
from kvcalc.units import GIB

Planner = Callable[[PlanInputs], CapacityPlan]


@dataclass(frozen=True)
class _Group:
    engine: EngineName
    gpu: str
    n: int
    price: float | None

    def primary(self, objective: str) -> tuple[Any, ...]:
        total = None if self.price is None else self.price * self.n
        if objective == "gpus":
            return (self.n, total is None, total or 0.0)
        if objective == "cost":
            return (total is None, self.n if total is None else total)
        return ()  # tokens per dollar: known only once planned


def recommend(model: ModelShape, base: PlanInputs, requirements: Requirements, search: Search,
              prices: PriceTable, planner: Planner, *, reference: str) -> Recommendation:  # fmt: skip
    """The best deployments of ``model`` for ``requirements`` over ``search`` (see the module)."""
    from dataclasses import replace

    names = tuple(dict.fromkeys(get_gpu(g).name for g in search.gpus))
    run = _Run(model, base, requirements, replace(search, gpus=names), prices, planner, reference)
    return run.go()


class _Run:
    def __init__(self, model, base, requirements, search, prices, planner, reference) -> None:
        self.model, self.base, self.req, self.search = model, base, requirements, search
        self.prices, self.planner, self.reference = prices, planner, reference
        self.plans: dict[PlanInputs, CapacityPlan | KvcalcError] = {}
        self.bounded = 0

    def plan(self, inputs: PlanInputs) -> CapacityPlan | KvcalcError:
        if inputs not in self.plans:  # no candidate is planned twice
            try:
                self.plans[inputs] = self.planner(inputs)
            except KvcalcError as exc:
                self.plans[inputs] = exc
        return self.plans[inputs]

    def go(self) -> Recommendation:
        s = self.search
        groups = [_Group(e, g, n, self.prices.price(g)) for e in s.engines for g in s.gpus
                  for n in space.gpu_counts(s.nodes, s.max_gpus)]  # fmt: skip
        ordered = s.objective != "tokens-per-dollar"
        if ordered:
            groups.sort(key=lambda g: g.primary(s.objective))
        rows: list[tuple[tuple[Any, ...], _Found]] = []
        failed: list[tuple[_Group, str]] = []
        for group in groups:
            if ordered and not s.exhaustive and len(rows) >= s.top:
                if (
                    group.primary(s.objective)
                    > rows[s.top - 1][0][: len(group.primary(s.objective))]
                ):
                    break
            best = self.best_of(group)
            if isinstance(best, str):
                failed.append((group, best))
                continue
            rows.append(best)
            rows.sort(key=lambda r: r[0])
        winners = tuple(self.candidate(found) for _, found in rows[: s.top])
        rejected = tuple(
            Rejection(gpu=g.gpu, num_gpus=g.n, engine=g.engine.value,
                      usd_per_hour=None if g.price is None else g.price * g.n, reason=why)
            for g, why in failed if not rows or self.before(g, rows[0])
        )  # fmt: skip
        return Recommendation(
            model=self.model.name, objective=s.objective, concurrency=self.req.concurrency,
            min_headroom=self.req.min_headroom,
            min_decode_tokens_per_s=self.req.min_decode_tokens_per_s, prices=self.prices.label,
            candidates=winners, rejected=rejected,
            planned=len(self.plans), bounded=self.bounded, notes=self.notes(),
        )  # fmt: skip

    def before(self, group: _Group, winner: tuple[tuple[Any, ...], _Found]) -> bool:
        primary = group.primary(self.search.objective)
        return not primary or primary <= winner[0][: len(primary)]

    def notes(self) -> tuple[str, ...]:
        unpriced = [g for g in self.search.gpus if self.prices.price(g) is None]
        out = []
        if unpriced and self.search.objective != "gpus":
            out.append(f"price unknown for {', '.join(unpriced)}: they rank after the priced GPUs, "
                       "by GPU count (give prices with --prices FILE)")  # fmt: skip
        out.append("decode ceilings are upper bounds (the memory-bandwidth roofline at the "
                   "requested concurrency), not measured throughput")  # fmt: skip
        return tuple(out)

    def best_of(self, group: _Group) -> tuple[tuple[Any, ...], _Found] | str:
        """The group's best candidate and its rank, or why none passes. Candidates go simplest
        first: once one passes, the more complex ones (which rank after it) are not planned,
        except under tokens-per-dollar, whose rank needs every candidate's ceiling."""
        s, gpu = self.search, get_gpu(group.gpu)
        dtypes = space.kv_dtypes(group.engine, gpu, s.kv_cache_dtypes)
        why: list[tuple[float, str]] = []
        todo = []
        for quant in s.quantizations:
            one = None if s.exhaustive else self.probe(group, dtypes[0], quant)
            limit = gpu.memory_bytes if one is None else space.usable_bytes(group.engine, gpu, one)
            if one is not None and space.weights_bound(one.weights_bytes, self.model, group.n,
                                                       None) > limit:  # fmt: skip
                self.bounded += 1
                why.append((-1, f"weights alone: at least {one.weights_bytes / group.n / GIB:.1f} "
                                f"GiB per GPU, more than the {limit / GIB:.1f} GiB the engine "
                                "may use"))  # fmt: skip
                continue
            for dtype in dtypes:
                if one is not None and self.kv_too_big(one, dtype, group, limit, why):
                    continue
                for split in space.splits(self.model, group.engine, group.n, self.base, s.pinned):
                    if one is not None and self.split_too_big(one, split, dtype, group.n, limit):
                        continue
                    simple = split.complexity + (dtype != "auto") + (quant is not None)
                    todo.append((simple, split, dtype, quant))
        todo.sort(key=lambda t: t[0])  # stable: the table's order within a level
        best: tuple[tuple[Any, ...], _Found] | None = None
        early = not s.exhaustive and s.objective != "tokens-per-dollar"
        for simple, split, dtype, quant in todo:
            if early and best is not None and simple > best[1].plan_complexity:
                self.bounded += 1
                continue
            found = self.judge(group, split, dtype, quant, simple, why)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
        if best is not None:
            return best
        return max(why)[1] if why else "no split of these GPUs the engine takes"

    def probe(self, group: _Group, dtype: str, quant: str | None) -> CapacityPlan | None:
        """The one-GPU plan, whose weights bound every split's (None when the engine refuses it)."""
        split = space.Split(tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1)
        one = self.plan(space.inputs_for(self.base, group.engine, group.gpu, split, dtype, quant,
                                         self.req.concurrency))  # fmt: skip
        return one if isinstance(one, CapacityPlan) else None

    def request_tokens(self, one: CapacityPlan) -> int:
        """Tokens of one request that no prefix sharing saves: at ``max_model_len``, or the
        workload's prompt + output (capped there) less the shared prefix."""
        inputs = self.base
        tokens = one.max_model_len
        if inputs.prompt_len is not None:
            tokens = (
                min(tokens, inputs.prompt_len + (inputs.output_len or 0)) - inputs.shared_prefix
            )
        return max(tokens, 0)

    def split_too_big(self, one: CapacityPlan, split: space.Split, dtype: str, n: int,
                      limit: int) -> bool:  # fmt: skip
        """The split's busiest GPU cannot hold its weights, or its share of the KV beside them."""
        weights = space.weights_bound(one.weights_bytes, self.model, n, split)
        kv = space.rank_kv_bound(self.model, dtype, self.request_tokens(one),
                                 self.req.concurrency, split)  # fmt: skip
        if weights + (kv or 0) <= limit:
            return False
        self.bounded += 1
        return True

    def kv_too_big(self, one: CapacityPlan, dtype: str, group: _Group, memory: int,
                   why: list[tuple[float, str]]) -> bool:  # fmt: skip
        need = space.kv_bound(self.model, dtype, self.request_tokens(one), self.req.concurrency)
        room = group.n * memory - one.weights_bytes
        if need is None or need <= room:
            return False
        self.bounded += 1
        why.append((-1, f"KV of {self.req.concurrency} requests ({dtype}): at least "
                        f"{need / GIB:.1f} GiB, more than {group.n} GPU(s) hold beside the weights "
                        f"({max(room, 0) / GIB:.1f} GiB)"))  # fmt: skip
        return True

    def judge(self, group: _Group, split: space.Split, dtype: str, quant: str | None, simple: int,
              why: list[tuple[float, str]]) -> tuple[tuple[Any, ...], _Found] | None:  # fmt: skip
        inputs = space.inputs_for(self.base, group.engine, group.gpu, split, dtype, quant,
                                  self.req.concurrency)  # fmt: skip
        result = self.plan(inputs)
        label = f"{split_text(split)} {dtype}"
        if isinstance(result, KvcalcError):
            why.append((-2, f"{label}: refused: {result.message}"))
            return None
        pools = result.data_parallel_replicas
        if not result.passed:
            why.append(
                (
                    result.runnable_concurrency * pools,
                    f"{label}: {result.verdict}: {result.verdict_reason}",
                )
            )
            return None
        if result.headroom_fraction < self.req.min_headroom:
            why.append((1e12, f"{label}: headroom {result.headroom_fraction:.0%}, below "
                              f"--min-headroom {self.req.min_headroom:.0%}"))  # fmt: skip
            return None
        floor = self.req.min_decode_tokens_per_s
        tps = None
        if floor is not None or self.search.objective == "tokens-per-dollar":
            result, tps = self.ceiling(result, inputs)
            if floor is not None and (tps is None or tps < floor):
                shown = "unknown" if tps is None else f"{tps:,.0f}"
                why.append((2e12, f"{label}: decode ceiling {shown} tokens/s, below "
                                  f"--min-decode-tokens-per-s {floor:,.0f}"))  # fmt: skip
                return None
        candidate = _Found(group, split, dtype, quant, inputs, result, tps, simple)
        return self.rank(candidate), candidate

    def ceiling(
        self, result: CapacityPlan, inputs: PlanInputs
    ) -> tuple[CapacityPlan, float | None]:
        """The plan with its decode ceiling at the requested concurrency, and that ceiling over all
        KV pools (tokens/s, an upper bound)."""
        from kvcalc.planning.throughput import attach_throughput

        result = attach_throughput(result, inputs, self.model)
        if not result.throughput:
            return result, None
        return result, result.throughput["tokens_per_s"] * result.data_parallel_replicas

    def rank(self, c: _Found) -> tuple[Any, ...]:
        objective = self.search.objective
        primary = c.group.primary(objective)
        if objective == "tokens-per-dollar":
            usd = c.usd_per_hour
            primary = (usd is None or not c.tps, -(c.tps / usd) if usd and c.tps else c.group.n)
        split = c.split
        return (*primary, c.plan_complexity, -round(c.total_concurrency, 6),
                self.search.gpus.index(c.group.gpu), self.search.engines.index(c.group.engine),
                c.group.n, split.tensor_parallel_size, split.pipeline_parallel_size,
                split.decode_context_parallel_size, split.enable_expert_parallel, c.dtype,
                c.quant or "")  # fmt: skip

    def candidate(self, found: _Found) -> Candidate:
        """The row of a found deployment, its ceiling and commands written."""
        result, tps = found.result, found.tps
        if tps is None:
            result, tps = self.ceiling(result, found.inputs)
        usd = found.usd_per_hour
        s = found.split
        return Candidate(
            gpu=found.group.gpu, num_gpus=found.group.n, engine=found.group.engine.value,
            tensor_parallel_size=s.tensor_parallel_size,
            pipeline_parallel_size=s.pipeline_parallel_size, data_parallel_size=s.data_parallel_size,
            enable_expert_parallel=s.enable_expert_parallel,
            decode_context_parallel_size=s.decode_context_parallel_size,
            kv_cache_dtype=found.dtype, quantization=found.quant, usd_per_hour=usd,
            kv_pools=result.data_parallel_replicas,
            concurrency_per_replica=result.runnable_concurrency,
            total_concurrency=found.total_concurrency, headroom_fraction=result.headroom_fraction,
            decode_tokens_per_s_upper_bound=tps,
            usd_per_million_output_tokens=None if usd is None or not tps else usd / (tps * 3600) * 1e6,
            kvcalc_command=kvcalc_command(self.reference, found.inputs),
            serve_command=serve_command(self.model.name, found.inputs), plan=result,
        )  # fmt: skip


@dataclass(frozen=True)
class _Found:
    """A candidate that passes, before its row is written."""

    group: _Group
    split: space.Split
    dtype: str
    quant: str | None
    inputs: PlanInputs
    result: CapacityPlan
    tps: float | None
    plan_complexity: int

    @property
    def total_concurrency(self) -> float:
        return self.result.runnable_concurrency * self.result.data_parallel_replicas

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.group.price is None else self.group.price * self.group.n


def split_text(split: space.Split) -> str:
    """``TP 8 DP 2 EP``: the split in words."""
    parts = [f"TP {split.tensor_parallel_size}"]
    if split.pipeline_parallel_size > 1:
        parts.append(f"PP {split.pipeline_parallel_size}")
    if split.data_parallel_size > 1:
        parts.append(f"DP {split.data_parallel_size}")
    if split.enable_expert_parallel:
        parts.append("EP")
    if split.decode_context_parallel_size > 1:
        parts.append(f"DCP {split.decode_context_parallel_size}")
    return " ".join(parts)
