"""Planning from a model *reference*: the one module of :mod:`kvcalc.planning` that does I/O.

Each function here resolves a reference (bundled alias, path or Hub id) through a
:class:`~kvcalc.sources.cache.ModelCache`, reads the calibration file a
:class:`~kvcalc.planning.inputs.PlanInputs` names, and hands plain values to the pure functions
(:func:`~kvcalc.planning.core.plan`, :func:`~kvcalc.planning.curves.capacity_curve`,
:func:`~kvcalc.planning.compare.compare`, :func:`~kvcalc.planning.throughput.throughput_ceiling`).
The CLI, ``kvcalc check`` and ``kvcalc verify`` call these; library users with a
:class:`~kvcalc.model.shape.ModelShape` in hand call the pure functions directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvcalc.planning.core import plan
from kvcalc.planning.deployment import Deployment
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.result import CapacityPlan
from kvcalc.sources.cache import ModelCache

if TYPE_CHECKING:
    from kvcalc.estimate.calibration import Calibration
    from kvcalc.model.shape import ModelShape
    from kvcalc.planning.architectures import ArchitectureList
    from kvcalc.planning.compare import Comparison
    from kvcalc.planning.curves import CapacityCurve
    from kvcalc.planning.prices import PriceTable
    from kvcalc.planning.recommend import Recommendation, Requirements, Search
    from kvcalc.planning.recommend_disagg import DisaggregatedRecommendation
    from kvcalc.planning.throughput import ThroughputReport
    from kvcalc.sources.resolve import LoadedModel
    from kvcalc.sources.safetensors_meta import SafetensorsWeights

#: the models this process has loaded (``kvcalc check`` plans many deployments of few models)
MODELS = ModelCache()


def resolve_model_cached(
    reference: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
    trust_layout: bool = False,
) -> LoadedModel:
    """``reference`` loaded through :data:`MODELS`: once per process while its files stay the same."""
    return MODELS.load(reference, revision=revision, token=token, offline=offline,
                       trust_layout=trust_layout)  # fmt: skip


def _exact_weights(loaded: LoadedModel, inputs: PlanInputs | None) -> SafetensorsWeights | None:
    if loaded.source == "bundled" or inputs is None or inputs.weights_memory_bytes is not None:
        return None
    return loaded.weights_metadata()


def with_draft(
    inputs: PlanInputs, *, token: str | None = None, offline: bool | None = None
) -> PlanInputs:
    """``inputs`` with the speculative draft's config read (an EAGLE head or a draft model named
    by ``model``: bundled, a path or a Hub id, resolved like the target)."""
    spec = inputs.speculative_config
    if spec is None or spec.model is None or spec.draft is not None:
        return inputs
    from kvcalc.engines.vllm.speculative import draft_method

    if not draft_method(spec).needs_draft_config:
        return inputs
    loaded = resolve_model_cached(spec.model, token=token, offline=offline,
                                  trust_layout=inputs.trust_layout)  # fmt: skip
    return replace(inputs, speculative_config=replace(spec, draft=loaded.shape))


def read_calibration(inputs: PlanInputs | Deployment) -> Calibration | None:
    """The correction ``inputs.calibration`` holds for the planned GPU (``None`` without a file)."""
    deployment = Deployment.resolve(inputs)
    if not deployment.inputs.calibration:
        return None
    from kvcalc.sources.calibration import calibration_for

    gpu = deployment.gpu
    return calibration_for(deployment.inputs.calibration, gpu.device_name if gpu else None,
                           total_memory_bytes=deployment.memory_bytes)  # fmt: skip


def plan_reference(
    reference: str,
    inputs: PlanInputs,
    *,
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
    with_throughput: bool = False,
    with_suggestions: bool = True,
    notes: tuple[str, ...] = (),
) -> CapacityPlan:
    """Resolve ``reference`` (bundled, path or Hub id) and :func:`plan` it; ``notes`` (e.g. the
    flags a pasted serving command had that kvcalc ignores) go first in the plan's notes."""
    from kvcalc.hfconfig.family import UnverifiedConfigError

    try:
        loaded = resolve_model_cached(reference, revision=revision, token=token, offline=offline,
                                      trust_layout=inputs.trust_layout)  # fmt: skip
    except UnverifiedConfigError as exc:
        from kvcalc.engines.vllm.refused import refuse_unverified

        refuse_unverified(exc, inputs.engine, inputs.engine_version)
        raise
    source = (
        "bundled config" if loaded.source == "bundled" else f"{loaded.source}: {loaded.location}"
    )
    inputs = with_draft(inputs, token=token, offline=offline)
    deployment = Deployment.resolve(inputs)  # the GPU and the engine, looked up once
    result = plan(
        loaded.shape,
        deployment,
        exact_weights=_exact_weights(loaded, inputs),
        model_source=source,
        with_throughput=with_throughput,
        with_suggestions=with_suggestions,
        calibration=read_calibration(deployment),
    )
    return replace(result, notes=(*notes, *result.notes)) if notes else result


def calibrated_efficiency(inputs: PlanInputs, gpu_name: str | None) -> tuple[float, str]:
    """The measured decode efficiency of a ``kvcalc verify --record`` file, when one applies;
    without one, 1.0 (the pure ceiling)."""
    if not inputs.calibration:
        return 1.0, "none (pure ceiling)"
    from kvcalc.sources.calibration import load_calibration

    record = load_calibration(inputs.calibration, gpu_name)
    value = getattr(record, "decode_efficiency", None)
    if not value:
        return 1.0, f"none ({inputs.calibration} has no decode measurement)"
    return float(value), f"measured ({inputs.calibration})"


def attach_throughput(result: CapacityPlan, inputs: PlanInputs, model: ModelShape) -> CapacityPlan:
    """:func:`kvcalc.planning.throughput.attach_throughput` with the efficiency the calibration
    file named in ``inputs`` measured."""
    from kvcalc.planning.throughput import attach_throughput as attach

    if result.throughput is not None or not inputs.gpu:
        return result
    from kvcalc.model.gpus import get_gpu

    return attach(
        result, inputs, model, efficiency=calibrated_efficiency(inputs, get_gpu(inputs.gpu).name)
    )


def throughput_reference(
    reference: str,
    inputs: PlanInputs,
    *,
    bandwidth: str | float | None = None,
    tflops: float | None = None,
    batches: tuple[int, ...] = (),
    efficiency: float | None = None,
    engines: tuple[str, ...] = (),
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
) -> ThroughputReport:
    """Resolve ``reference``, plan it (suggestions off) and compute the ceiling per batch, for
    ``inputs``' engine or each of ``engines`` (the top level is the first one's)."""
    from kvcalc.engines.names import engine_name
    from kvcalc.planning.throughput import resolve_roofline, throughput_ceiling

    roof = resolve_roofline(inputs, bandwidth=bandwidth, tflops=tflops)
    loaded = resolve_model_cached(reference, revision=revision, token=token, offline=offline,
                                  trust_layout=inputs.trust_layout)  # fmt: skip
    inputs = with_draft(inputs, token=token, offline=offline)
    names = tuple(dict.fromkeys(engines)) or (inputs.engine,)
    reports = []
    for name in names:
        asked = replace(inputs, engine=engine_name(name)) if len(names) > 1 else inputs
        result = plan(loaded.shape, asked, exact_weights=_exact_weights(loaded, asked),
                      with_suggestions=False, calibration=read_calibration(asked))  # fmt: skip
        if efficiency is not None:
            eff, source = efficiency, "given (--efficiency)"
        else:
            eff, source = calibrated_efficiency(asked, roof.name or None)
        reports.append(throughput_ceiling(loaded.shape, result, asked, roof, batches=tuple(batches) or None,
                                          efficiency=eff, efficiency_source=source))  # fmt: skip
    return replace(reports[0], engines=tuple(r.ceiling() for r in reports))


def capacity_curve_reference(
    reference: str,
    inputs: PlanInputs,
    *,
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
    **kwargs: Any,
) -> CapacityCurve:
    """Resolve ``reference`` and :func:`~kvcalc.planning.curves.capacity_curve` it."""
    from kvcalc.planning.curves import capacity_curve

    loaded = resolve_model_cached(reference, revision=revision, token=token, offline=offline,
                                  trust_layout=inputs.trust_layout)  # fmt: skip
    return capacity_curve(loaded.shape, with_draft(inputs, token=token, offline=offline), **kwargs)


def compare_references(
    references: Sequence[str],
    inputs: PlanInputs | None,
    *,
    max_model_len: int,
    attention_variants_of: bool = False,
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
    **kwargs: Any,
) -> Comparison:
    """Resolve each reference (bundled, path or Hub id) and
    :func:`~kvcalc.planning.compare.compare` them."""
    from kvcalc.planning.compare import CompareEntry, attention_variants, compare

    entries: list[CompareEntry] = []
    if inputs is not None:
        inputs = with_draft(inputs, token=token, offline=offline)
    for ref in references:
        loaded = resolve_model_cached(ref, revision=revision, token=token, offline=offline,
                                      trust_layout=bool(inputs and inputs.trust_layout))  # fmt: skip
        if attention_variants_of:
            entries += attention_variants(loaded.shape)
        else:
            entries.append(
                CompareEntry(
                    label=ref, model=loaded.shape, exact_weights=_exact_weights(loaded, inputs)
                )
            )
    return compare(entries, inputs, max_model_len=max_model_len, **kwargs)


#: the environment variable that names a price file (``--prices`` wins over it)
PRICES_ENV = "KVCALC_PRICES"


def read_prices(path: str | None = None) -> PriceTable:
    """The price table: ``path`` (YAML, or CSV by its ``.csv`` name), else ``$KVCALC_PRICES``, else
    the bundled one (``kvcalc/data/prices.yaml``, its date and source in it)."""
    import os
    import pkgutil

    from kvcalc.errors import InputError
    from kvcalc.planning.prices import parse_prices

    path = path or os.environ.get(PRICES_ENV) or None
    if path is None:
        data = pkgutil.get_data("kvcalc", "data/prices.yaml")
        assert data is not None  # the package's own loader reads files
        return parse_prices(data.decode("utf-8"), origin="bundled prices")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(1 << 20)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"prices {path}: cannot read it ({type(exc).__name__})",
                         hint=f"give a readable YAML or CSV file with --prices or {PRICES_ENV}",
                         code="invalid-prices") from None  # fmt: skip
    return parse_prices(text, origin=path, is_csv=path.lower().endswith(".csv"))


def recommend_reference(
    reference: str,
    base: PlanInputs,
    requirements: Requirements,
    search: Search,
    *,
    prices: str | None = None,
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
) -> Recommendation:
    """Resolve ``reference`` and :func:`~kvcalc.planning.recommend.recommend` a deployment, each
    candidate planned with the checkpoint's exact weights where known."""
    from kvcalc.planning.recommend import recommend

    shape, base, table, planner = _recommend_setup(
        reference, base, prices, revision, token, offline
    )
    return recommend(shape, base, requirements, search, table, planner, reference=reference)


def disaggregated_reference(
    reference: str,
    base: PlanInputs,
    requirements: Requirements,
    search: Search,
    *,
    prices: str | None = None,
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
) -> DisaggregatedRecommendation:
    """``recommend --disaggregated``: a decode pool and a prefill pool, each recommended as
    :func:`recommend_reference` does (:mod:`kvcalc.planning.recommend_disagg`)."""
    from kvcalc.planning.recommend_disagg import disaggregated_bases, recommend_disaggregated

    disaggregated_bases(base)  # the workload is required: refused before anything is loaded
    shape, base, table, planner = _recommend_setup(
        reference, base, prices, revision, token, offline
    )
    return recommend_disaggregated(shape, base, requirements, search, table, planner,
                                   reference=reference)  # fmt: skip


def _recommend_setup(
    reference: str,
    base: PlanInputs,
    prices: str | None,
    revision: str | None,
    token: str | None,
    offline: bool | None,
) -> tuple[ModelShape, PlanInputs, PriceTable, Callable[[PlanInputs], CapacityPlan]]:
    """The model, the fixed settings with their draft, the prices and the planner of a search."""
    from kvcalc.planning.recommend_commands import check_writable

    check_writable(base)
    table = read_prices(prices)
    loaded = resolve_model_cached(reference, revision=revision, token=token, offline=offline,
                                  trust_layout=base.trust_layout)  # fmt: skip
    base = with_draft(base, token=token, offline=offline)
    exact = _exact_weights(loaded, base)

    def planner(inputs: PlanInputs) -> CapacityPlan:
        return plan(loaded.shape, inputs, exact_weights=exact, with_suggestions=False)

    return loaded.shape, base, table, planner


def architectures_reference(*, engines: bool = False) -> ArchitectureList:
    """``kvcalc models --architectures``: vLLM 0.33's registry with kvcalc's status per
    architecture (:mod:`kvcalc.planning.architectures`); ``engines``: also plan each exact
    family's bundled example on every engine (offline, on an H200, the model's defaults)."""
    import json

    from kvcalc.engines.names import EngineName
    from kvcalc.engines.vllm.registry import vllm_registry
    from kvcalc.errors import KvcalcError
    from kvcalc.hfconfig.families import all_families
    from kvcalc.planning.architectures import EngineSupport, architecture_rows
    from kvcalc.sources.bundled import bundled_models

    families = all_families()
    examples: dict[str, str] = {}
    # each architecture's example: a bundled model whose config names it (a target model before
    # a speculative head whose config names the same class)
    for model in sorted(bundled_models(), key=lambda m: ("eagle" in m.alias, m.alias)):
        archs = json.loads(model.path.read_text(encoding="utf-8")).get("architectures") or ()
        for arch in archs:
            examples.setdefault(arch, model.alias)
    listing = architecture_rows(vllm_registry(), families, examples)
    if not engines:
        return listing
    support: dict[str, tuple[EngineSupport, ...]] = {}
    for alias in sorted(set(examples.values())):
        found = []
        for engine in EngineName:
            try:
                plan_reference(alias, PlanInputs(gpu="H200", engine=engine), offline=True,
                               with_suggestions=False)  # fmt: skip
                found.append(EngineSupport(engine=engine.value, status="planned"))
            except KvcalcError as exc:
                found.append(EngineSupport(engine=engine.value, status=exc.code,
                                           reason=exc.message))  # fmt: skip
        support[alias] = tuple(found)
    rows = tuple(
        replace(r, engines=support.get(r.example, ())) if r.example and r.status == "exact" else r
        for r in listing.rows
    )
    return replace(listing, rows=rows)
