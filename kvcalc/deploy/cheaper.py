"""``recommend: true`` in a deployment file: does a cheaper deployment meet the same requirements?

:func:`cheaper_deployment` searches, with :func:`kvcalc.planning.api.recommend_reference`, every
catalog GPU, count and parallel split of the deployment's own engine — its model, engine version,
KV dtype, quantization, lengths and other settings kept — ranked by price per hour, and judges each
candidate with the deployment's own requirements (:func:`kvcalc.deploy.judge.judge`: the same
verdicts, concurrency, context length, headroom and host memory). The first candidate that passes
and costs less per hour than the deployment's own GPUs is the answer. Prices are the same table as
``kvcalc recommend``'s (``--prices``, ``$KVCALC_PRICES``, else the bundled one, with its date).

What is reported is a note; ``kvcalc check --fail-on cheaper`` turns it into a failure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, fields, replace
from typing import TYPE_CHECKING, Any

from kvcalc.deploy.judge import Failure, judge
from kvcalc.deploy.spec import Deployment
from kvcalc.frozen import frozen
from kvcalc.planning.recommend_result import DeploymentShape

if TYPE_CHECKING:
    from kvcalc.planning.prices import PriceTable
    from kvcalc.planning.recommend_result import Candidate
    from kvcalc.planning.result import CapacityPlan

#: the ``--fail-on`` value that fails a deployment a cheaper one could replace
FAIL_ON_CHEAPER = "cheaper"
#: GPUs per node (as ``kvcalc recommend`` counts them)
_GPUS_PER_NODE = 8
#: settings whose meaning depends on the GPU count in a way the search does not vary
_NOT_SEARCHED = {
    "prefill_context_parallel_size": 1,
    "enable_dp_attention": False,
}


@frozen
class CheaperOption(DeploymentShape):
    """The cheapest deployment found that meets the same requirements."""

    #: price of all its GPUs per hour
    usd_per_hour: float
    #: requests it runs at the workload, over all its KV pools
    total_concurrency: float
    #: ``kvcalc plan ...`` that reproduces it
    kvcalc_command: str
    #: the engine's serving command (null for engines kvcalc writes none for)
    serve_command: str | None


@frozen
class CheaperCheck:
    """What ``recommend: true`` found (``recommend`` in ``check --format json``)."""

    #: price per hour of the deployment's own GPUs (null: its GPU has no price in the table)
    own_usd_per_hour: float | None
    #: where the prices come from and the day they were listed
    prices: str
    #: the cheapest deployment that meets the same requirements (null: none cheaper found)
    cheaper: CheaperOption | None
    #: what was found, in a sentence
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cheaper_deployment(
    dep: Deployment,
    plan: CapacityPlan,
    *,
    prices: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
) -> CheaperCheck:
    """Search for a deployment cheaper than ``dep`` (planned as ``plan``) that meets its
    requirements (see the module)."""
    from kvcalc.model.gpus import get_gpu, list_gpus
    from kvcalc.planning.api import read_prices, recommend_reference
    from kvcalc.planning.recommend_result import Requirements, Search

    table = read_prices(prices)
    inputs = dep.inputs
    if inputs.gpu is None:
        return CheaperCheck(own_usd_per_hour=None, prices=table.label, cheaper=None,
                            message="recommend: the deployment names no catalog GPU (only its "
                            "memory), so there is no price to compare")  # fmt: skip
    own_gpu = get_gpu(inputs.gpu).name
    own_price = table.price(own_gpu)
    if own_price is None:
        return CheaperCheck(own_usd_per_hour=None, prices=table.label, cheaper=None,
                            message=f"recommend: no price for {own_gpu} ({_when(table)}), so "
                            "there is nothing to compare (give prices with --prices FILE)")  # fmt: skip
    own = own_price * plan.num_gpus
    unsearched = [name for name, plain in _NOT_SEARCHED.items() if getattr(inputs, name) != plain]
    if unsearched:
        return CheaperCheck(own_usd_per_hour=own, prices=table.label, cheaper=None,
                            message="recommend: not searched: the deployment sets "
                            f"{', '.join(unsearched)}, which the search does not vary")  # fmt: skip
    base = replace(
        inputs, num_gpus=None, tensor_parallel_size=1, pipeline_parallel_size=1,
        data_parallel_size=1, enable_expert_parallel=False, decode_context_parallel_size=1,
    )  # fmt: skip
    req = dep.requirements
    concurrency = max(1, math.ceil(req.min_concurrency)) if req.min_concurrency else None
    if concurrency is None:
        concurrency = max(1, (inputs.batch or 1) * max(1, plan.data_parallel_replicas))
    headroom = req.min_headroom[1] if req.min_headroom and req.min_headroom[0] == "fraction" else 0
    search = Search(
        gpus=tuple(g.name for g in list_gpus()), engines=(inputs.engine,),
        kv_cache_dtypes=(inputs.kv_cache_dtype,), quantizations=(inputs.quantization,),
        nodes=max(1, -(-plan.num_gpus // _GPUS_PER_NODE)), objective="cost", top=5,
    )  # fmt: skip
    found = recommend_reference(
        dep.model, base, Requirements(concurrency=concurrency, min_headroom=min(headroom, 0.99)),
        search, prices=prices, revision=dep.revision, token=token, offline=offline,
    )  # fmt: skip
    for c in found.candidates:
        if c.usd_per_hour is None or c.usd_per_hour >= own - 1e-9:
            continue
        if judge(dep, c.plan):  # the file's own requirements, as the deployment is judged
            continue
        shape = {f.name: getattr(c, f.name) for f in fields(DeploymentShape)}
        option = CheaperOption(
            **shape, usd_per_hour=c.usd_per_hour, total_concurrency=c.total_concurrency,
            kvcalc_command=c.kvcalc_command, serve_command=c.serve_command,
        )  # fmt: skip
        message = (
            f"recommend: {c.num_gpus} × {c.gpu} ({_split_of(c)}) meets the same requirements "
            f"for ${c.usd_per_hour:,.2f}/h, against ${own:,.2f}/h for "
            f"{plan.num_gpus} × {own_gpu} ({_when(table)}): {c.kvcalc_command}"
        )
        return CheaperCheck(own_usd_per_hour=own, prices=table.label, cheaper=option,
                            message=message)  # fmt: skip
    return CheaperCheck(own_usd_per_hour=own, prices=table.label, cheaper=None,
                        message=f"recommend: no cheaper deployment of {inputs.engine.value} on "
                        f"the catalog's priced GPUs meets the same requirements (${own:,.2f}/h, "
                        f"{_when(table)})")  # fmt: skip


def _when(table: PriceTable) -> str:
    return f"prices listed {table.date}" if table.date else "undated prices"


def _split_of(c: Candidate) -> str:
    from kvcalc.planning.recommend import split_text
    from kvcalc.planning.recommend_space import Split

    return split_text(Split(tensor_parallel_size=c.tensor_parallel_size,
                            pipeline_parallel_size=c.pipeline_parallel_size,
                            data_parallel_size=c.data_parallel_size,
                            enable_expert_parallel=c.enable_expert_parallel,
                            decode_context_parallel_size=c.decode_context_parallel_size))  # fmt: skip


def cheaper_failure(dep: Deployment, found: CheaperCheck) -> Failure | None:
    """The ``--fail-on cheaper`` failure, when a cheaper deployment was found."""
    if found.cheaper is None:
        return None
    return Failure(requirement="recommend", expected=found.own_usd_per_hour,
                   actual=found.cheaper.usd_per_hour, message=f"{found.message} (--fail-on "
                   f"{FAIL_ON_CHEAPER})", line=dep.line_of("recommend"))  # fmt: skip
