"""What ``kvcalc recommend`` answers, and what it is asked: frozen dataclasses (the answer's
fields are the ``--json`` keys)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvcalc.engines.names import EngineName
from kvcalc.frozen import frozen
from kvcalc.planning.result import CapacityPlan


@frozen
class Search:
    """What is searched and how it ranks."""

    gpus: tuple[str, ...]
    engines: tuple[EngineName, ...]
    #: KV dtypes to try (empty: ``auto`` and the engine's fp8 where the GPU has fp8)
    kv_cache_dtypes: tuple[str, ...] = ()
    #: weight quantizations to try (``None``: the checkpoint's); never more unless asked
    quantizations: tuple[str | None, ...] = (None,)
    nodes: int = 1
    max_gpus: int | None = None
    #: PlanInputs fields the person fixed (a flag or ``--from-command``): not searched
    pinned: frozenset[str] = frozenset()
    objective: str = "cost"
    top: int = 5
    exhaustive: bool = False


@frozen
class Requirements:
    """What every candidate must meet."""

    #: concurrent requests over the whole deployment (all KV pools)
    concurrency: int
    #: the least KV headroom beyond the target, a fraction of the pool
    min_headroom: float = 0.0
    #: the least decode ceiling over all pools, tokens/s (an upper bound is compared)
    min_decode_tokens_per_s: float | None = None


@frozen
class DeploymentShape:
    """Where a deployment runs: GPUs, engine and parallel split."""

    #: the catalog's GPU name
    gpu: str
    #: GPUs in all: TP × PP × DP
    num_gpus: int
    #: ``vllm``, ``sglang``, ...
    engine: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    #: vLLM data-parallel ranks; for engines without ``-dp``, independent replicas
    data_parallel_size: int
    enable_expert_parallel: bool
    decode_context_parallel_size: int


@frozen
class Candidate(DeploymentShape):
    """One deployment that meets the requirements (a row of ``kvcalc recommend``): the best of
    its engine × GPU type × count."""

    #: the KV dtype asked for (``auto``, ``fp8``...); ``plan.kv_cache_dtype`` is the resolved one
    kv_cache_dtype: str
    #: the weight quantization asked for (null: the checkpoint's)
    quantization: str | None
    #: price of all its GPUs per hour (null: the GPU's price is unknown)
    usd_per_hour: float | None
    #: KV pools (vLLM data-parallel ranks, replicas), each with its own requests
    kv_pools: int
    #: requests one pool runs at the workload, and all pools together
    concurrency_per_replica: float
    total_concurrency: float
    headroom_fraction: float
    #: decode tokens/s over all pools at the requested concurrency: an upper bound (the roofline)
    decode_tokens_per_s_upper_bound: float | None
    #: dollars per million output tokens at that ceiling (null: price or ceiling unknown)
    usd_per_million_output_tokens: float | None
    #: ``kvcalc plan ...`` that reproduces this row
    kvcalc_command: str
    #: the engine's serving command (``vllm serve ...``, ``python -m sglang.launch_server ...``),
    #: null for engines without one here; plan it with ``kvcalc plan --from-command``
    serve_command: str | None
    #: the full plan (the ``plan --json`` object)
    plan: CapacityPlan


@frozen
class Rejection:
    """A configuration (engine × GPU type × count) ranked before the winner that does not meet
    the requirements."""

    gpu: str
    num_gpus: int
    engine: str
    #: price of all its GPUs per hour (null: unknown)
    usd_per_hour: float | None
    #: why (the weights alone, the KV of the requests, the best candidate's verdict, a refusal)
    reason: str


@frozen
class Recommendation:
    """The answer of ``kvcalc recommend``. Field names are the ``--json`` keys."""

    #: the model's Hub id (or the name its config gives)
    model: str
    #: ``cost``, ``gpus`` or ``tokens-per-dollar``: what ranks first
    objective: str
    #: concurrent requests the deployment must run, over all its KV pools
    concurrency: int
    #: the least KV headroom beyond them, a fraction of the pool (0: none asked)
    min_headroom: float
    #: the least decode ceiling over all pools, tokens/s (null: none asked)
    min_decode_tokens_per_s: float | None
    #: where the prices come from and the day they were listed
    prices: str
    #: best first; empty when nothing searched meets the requirements
    candidates: tuple[Candidate, ...]
    #: configurations ranked before the winner (all searched, without one) that do not meet them
    rejected: tuple[Rejection, ...] = ()
    #: candidates planned, and candidates ruled out by a bound without planning
    planned: int = 0
    bounded: int = 0
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
