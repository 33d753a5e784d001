"""Capacity curves: maximum concurrency and token capacity as a function of context length.

The work is split so that a sweep stays cheap. :func:`curve_basis` plans once per
(model, GPU, engine, KV dtype) with :func:`kvcalc.planning.core.plan` (suggestions off) at the longest
length asked for; that plan fixes the KV bytes the engine has, the block pool and the KV-cache
groups, none of which depend on the context length (the pool is sized from memory alone). Each
length is then priced by :func:`curve_point` with the engine's block arithmetic:

- full and MLA groups need ``cdiv(L, block)`` blocks per request; a sliding group
  ``min(cap, cdiv(L, block) + 1)``; a chunked group ``min(cap, cdiv(L, block))``, where ``cap`` is
  what the group needs at the longest length (vLLM: ``cdiv(min(W − 1 + in_flight, L), block) + 1``);
  recurrent groups a constant;
- ``max_concurrency = num_blocks / Σ blocks per request``; the effective token capacity is
  ``floor(concurrency · L)`` (vLLM's merged "GPU KV cache size" line); one request fits when
  ``page · Σ blocks ≤ fit budget`` (vLLM ≥ 0.33 holds the null block back).

The basis checks that arithmetic against the engine's plan at the reference length (and, for
capped groups, at 1,024 tokens too); where they disagree (an
engine or layout it does not cover), every point is planned in full instead (exact, slower).
Engines that allocate per request up front (llama.cpp slots, transformers' cache) are always
planned per length; for llama.cpp the concurrency is the number of ``L``-token slots the KV
memory holds (``available / one slot's bytes``: ``-np N -c N·L``).

Worked example (Qwen3-1.7B, vLLM, H200): 70,439 blocks of 16 tokens; at 4,096 tokens a request
needs 256 blocks → 275.15x, at 32,768 tokens 2,048 blocks → 34.39x.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

from kvcalc.engines.base import KvCacheGroup
from kvcalc.engines.names import engine_name, traits
from kvcalc.frozen import frozen
from kvcalc.model.gpus import get_gpu
from kvcalc.model.layouts import LayerKind
from kvcalc.model.shape import ModelShape
from kvcalc.planning.inputs import MAX_COUNT, PlanInputs
from kvcalc.planning.result import CapacityPlan

#: engines whose concurrency is ``pool / per-request need`` with a length-independent pool
#: fewer series than this make no sense; more than this make an unreadable chart
MAX_SERIES = 16


@frozen
class CurveBasis:
    """What a (model, GPU, engine, KV dtype) contributes to every length."""

    label: str
    engine: str
    engine_version: str
    kv_cache_dtype: str
    available_kv_bytes: int
    num_blocks: int
    #: bytes one block takes in all layers of its group (the widest stage)
    bytes_per_block: int
    #: vLLM: what ``bytes_per_block × blocks`` is checked against; None: fits when a block pool
    #: holds one request (SGLang, TensorRT-LLM)
    fit_budget_bytes: int | None
    groups: tuple[KvCacheGroup, ...]
    reference_len_tokens: int
    kv_bytes_per_token: int
    max_num_seqs: int | None
    weights_bytes: int
    #: the plan at the reference length failed before the KV cache (weights, no memory left)
    verdict: str
    #: True: points from the block arithmetic; False: a full plan per length
    fast: bool
    inputs: PlanInputs
    notes: tuple[str, ...] = ()
    #: below this length the block arithmetic does not hold and points are planned in full: a
    #: defaulted token budget is capped at ``max_num_seqs × max_model_len`` (vLLM 0.12 on), which
    #: moves the activation estimate and so the KV budget
    fast_from_tokens: int = 0


@frozen
class CurvePoint:
    length_tokens: int
    #: KV-limited, as the engine prints it ("Maximum concurrency")
    max_concurrency: float
    #: floor(concurrency × length): the tokens the pool holds in requests of this length
    kv_cache_tokens: int
    #: one request of this length fits
    fits: bool
    #: beyond the model's own max_model_len (vLLM refuses it unless allowed)
    beyond_model_max: bool = False
    #: what the deployment runs: ``max_concurrency`` capped by ``max_num_seqs`` (0 when it does
    #: not fit); None until the series fills it in
    runnable_concurrency: float | None = None
    #: ``max_num_seqs``, not the KV cache, limits concurrency at this length
    capped_by_max_num_seqs: bool = False


@frozen
class CurveSeries:
    label: str
    engine: str
    engine_version: str
    kv_cache_dtype: str
    available_kv_bytes: int
    kv_bytes_per_token: int
    weights_bytes: int
    max_num_seqs: int | None
    verdict: str
    method: str
    points: tuple[CurvePoint, ...]
    notes: tuple[str, ...] = ()


@frozen
class CapacityCurve:
    """The answer of ``kvcalc curve``. Field names are the ``--json`` keys."""

    model: str
    gpu: str | None
    gpu_memory_bytes: int | None
    tensor_parallel_size: int
    lengths_tokens: tuple[int, ...]
    #: the model's own max_model_len (points beyond it are marked ``beyond_model_max``)
    default_max_model_len: int
    series: tuple[CurveSeries, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for s in data["series"]:
            s["points"] = [{k: v for k, v in p.items()} for p in s["points"]]
        return data


def default_lengths(max_len: int, *, start: int = 1024) -> tuple[int, ...]:
    """A doubling series from ``start`` up to ``max_len``, ending at ``max_len`` itself.

    >>> default_lengths(40960)
    (1024, 2048, 4096, 8192, 16384, 32768, 40960)
    >>> default_lengths(1024)
    (1024,)
    """
    out, n = [], min(start, max_len)
    while n < max_len:
        out.append(n)
        n *= 2
    return tuple(out + [max_len])


def parse_lengths(text: str) -> tuple[int, ...]:
    """``"4k,8K,32768,1M"`` → ``(4000, 8192, 32768, 1048576)``, sorted and unique: vLLM's spelling
    (``k`` = 1,000, ``K`` = 1,024, as ``--max-model-len`` reads it)."""
    from kvcalc.errors import InputError
    from kvcalc.units import TOKENS_HINT, parse_token_count

    out = set()
    for item in str(text).replace(" ", "").split(","):
        if not item:
            continue
        try:
            value = parse_token_count(item, what="--lengths")
        except InputError:
            raise InputError(f"cannot read {item[:40]!r} as a length", hint=TOKENS_HINT,
                             code="invalid-input") from None  # fmt: skip
        if value < 1:
            raise InputError(f"lengths must be positive, got {item[:40]!r}", code="invalid-input")
        if value > MAX_COUNT:
            raise InputError(
                f"lengths must be at most {MAX_COUNT:,} tokens, got {item[:40]!r}",
                code="invalid-input",
            )
        out.add(value)
    if not out:
        raise InputError(
            "no lengths given", hint="write e.g. --lengths 4k,8k,32k", code="invalid-input"
        )
    return tuple(sorted(out))


def _label(engine: str, dtype: str, engines: int, dtypes: int) -> str:
    if engines > 1 and dtypes > 1:
        return f"{engine} {dtype}"
    return dtype if engines == 1 else engine


def curve_basis(model: ModelShape, inputs: PlanInputs, *, label: str = "") -> CurveBasis:
    """Plan once at ``inputs.max_model_len`` (the longest length) and keep what every length shares."""
    from kvcalc.planning.core import plan

    ref = inputs.max_model_len or model.max_model_len
    result = plan(model, replace(inputs, max_model_len=ref), with_suggestions=False)
    blocks = sum(g.blocks_per_request for g in result.groups)
    per_block = result.engine_kv_bytes_per_request // blocks if blocks else 0
    basis = CurveBasis(
        label=label or result.kv_cache_dtype, engine=result.engine, engine_version=result.engine_version,
        kv_cache_dtype=result.kv_cache_dtype, available_kv_bytes=result.available_kv_bytes,
        num_blocks=result.num_blocks,
        bytes_per_block=per_block, fit_budget_bytes=_fit_budget(result, per_block), groups=result.groups, reference_len_tokens=ref,
        kv_bytes_per_token=result.kv_bytes_per_token, max_num_seqs=result.max_num_seqs,
        weights_bytes=result.weights_bytes, verdict=result.verdict, fast=False,
        inputs=replace(inputs, max_model_len=ref),
    )  # fmt: skip
    if result.verdict == "weights-dont-fit" or result.available_kv_bytes <= 0:
        return replace(basis, fast=True, notes=(result.verdict_reason,))
    short = _device_short(model, inputs, result, ref)
    if short is not None:  # what the engine allocates after its pool does not fit at any length
        return replace(
            basis, groups=(), verdict=short.verdict, fast=True, notes=(short.verdict_reason,)
        )
    if (
        not traits(result.engine).block_pool
        or not result.groups
        or result.data_parallel_replicas < 1
    ):
        return basis
    seqs, tokens = result.max_num_seqs, result.max_num_batched_tokens
    fast_from = (
        -(-tokens // seqs) if seqs and tokens and inputs.max_num_batched_tokens is None else 0
    )
    fast = replace(basis, fast=True, fast_from_tokens=fast_from)
    # full/MLA groups need cdiv(L, block) at every length; capped groups are checked below the cap too
    capped = any(g.kind not in (LayerKind.FULL, LayerKind.MLA) for g in result.groups)
    if _agrees(model, fast, result, ref) and (
        not capped or _agrees(model, fast, None, min(ref, 1024))
    ):
        return fast
    return replace(
        basis,
        notes=("block arithmetic disagrees with the engine here: every length planned in full",),
    )


def _device_short(
    model: ModelShape, inputs: PlanInputs, result: CapacityPlan, ref: int
) -> CapacityPlan | None:
    """The plan at a short length when the whole GPU is short at ``ref`` (``memory.free_bytes``
    negative: terms the engine allocates after its KV cache do not fit) and still short there: a
    block pool fills its budget at every length, so no length starts."""
    from kvcalc.planning.core import plan

    m = result.memory
    if not m.total_bytes or m.free_bytes >= 0 or not traits(result.engine).block_pool:
        return None
    probe = plan(model, replace(inputs, max_model_len=min(ref, 1024)), with_suggestions=False)
    short = probe.verdict == "wont-start" and probe.memory.free_bytes < 0
    return probe if short else None


def _fit_budget(result: CapacityPlan, bytes_per_block: int) -> int | None:
    """What the engine's fit check compares one request's bytes with (``None``: it compares blocks
    with its pool, as SGLang and TensorRT-LLM do)."""
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import fit_budget_bytes

    return fit_budget_bytes(
        get_engine(result.engine), available_kv_bytes=result.available_kv_bytes,
        bytes_per_block=bytes_per_block, version=result.engine_version,
    )  # fmt: skip


def _agrees(model: ModelShape, basis: CurveBasis, result: CapacityPlan | None, length: int) -> bool:
    if result is None:
        from kvcalc.planning.core import plan

        result = plan(model, replace(basis.inputs, max_model_len=length), with_suggestions=False)
    point = curve_point(basis, length, model_max_len=model.max_model_len)
    fits = result.verdict not in ("wont-start", "weights-dont-fit")
    return (
        math.isclose(point.max_concurrency, result.max_concurrency, rel_tol=1e-12)
        and point.fits == fits
    )


def _group_blocks(group: KvCacheGroup, length: int, reference: int) -> int:
    return group.blocks_for(length, reference)


def curve_point(basis: CurveBasis, length: int, *, model_max_len: int | None = None) -> CurvePoint:
    """Concurrency at ``length`` tokens per request from the basis's block arithmetic (pure, fast)."""
    beyond = model_max_len is not None and length > model_max_len
    if basis.verdict == "weights-dont-fit" or basis.available_kv_bytes <= 0 or not basis.groups:
        return CurvePoint(length_tokens=length, max_concurrency=0.0, kv_cache_tokens=0, fits=False,
                          beyond_model_max=beyond)  # fmt: skip
    blocks = 0
    for g in basis.groups:
        blocks += _group_blocks(g, length, basis.reference_len_tokens)
    conc = basis.num_blocks / blocks
    if basis.fit_budget_bytes is None:
        fits = blocks <= basis.num_blocks
    else:
        fits = (
            0 < basis.fit_budget_bytes and basis.bytes_per_block * blocks <= basis.fit_budget_bytes
        )
    return CurvePoint(length_tokens=length, max_concurrency=conc, kv_cache_tokens=int(conc * length),
                      fits=fits, beyond_model_max=beyond)  # fmt: skip


def planned_point(model: ModelShape, basis: CurveBasis, length: int) -> CurvePoint:
    """The exact, slower path: a full plan at ``length``."""
    from kvcalc.planning.core import plan

    r = plan(model, replace(basis.inputs, max_model_len=length), with_suggestions=False)
    fits = r.verdict not in ("wont-start", "weights-dont-fit")
    conc = (
        r.max_concurrency if r.verdict != "weights-dont-fit" and r.available_kv_bytes > 0 else 0.0
    )
    if conc and traits(r.engine).slots_from_target:  # slots of `length` tokens the memory holds
        conc = (
            r.available_kv_bytes / r.kv_cache_bytes
            if r.kv_cache_bytes and r.available_kv_bytes > 0
            else 0.0
        )
    return CurvePoint(length_tokens=length, max_concurrency=conc, kv_cache_tokens=int(conc * length), fits=fits,
                      beyond_model_max=length > model.max_model_len)  # fmt: skip


def series_points(
    model: ModelShape, basis: CurveBasis, lengths: tuple[int, ...]
) -> tuple[CurvePoint, ...]:
    if basis.fast:
        return tuple(
            curve_point(basis, n, model_max_len=model.max_model_len)
            if n >= basis.fast_from_tokens
            else planned_point(model, basis, n)
            for n in lengths
        )
    return tuple(planned_point(model, basis, n) for n in lengths)


def _series(model: ModelShape, basis: CurveBasis, lengths: tuple[int, ...]) -> CurveSeries:
    return CurveSeries(
        label=basis.label, engine=basis.engine, engine_version=basis.engine_version,
        kv_cache_dtype=basis.kv_cache_dtype, available_kv_bytes=basis.available_kv_bytes,
        kv_bytes_per_token=basis.kv_bytes_per_token, weights_bytes=basis.weights_bytes,
        max_num_seqs=basis.max_num_seqs, verdict=basis.verdict,
        method="block arithmetic" if basis.fast else "planned per length",
        points=tuple(_capped(p, basis.max_num_seqs) for p in series_points(model, basis, lengths)),
        notes=basis.notes,
    )  # fmt: skip


def _capped(point: CurvePoint, max_num_seqs: int | None) -> CurvePoint:
    """``point`` with the concurrency the engine runs: at most ``max_num_seqs`` requests."""
    conc = point.max_concurrency if point.fits else 0.0
    capped = max_num_seqs is not None and point.fits and conc > max_num_seqs
    runnable = float(max_num_seqs) if capped and max_num_seqs is not None else conc
    return replace(point, runnable_concurrency=runnable, capped_by_max_num_seqs=capped)


def capacity_curve(
    model: ModelShape,
    inputs: PlanInputs,
    *,
    lengths: tuple[int, ...] | None = None,
    kv_cache_dtypes: tuple[str, ...] = (),
    engines: tuple[str, ...] = (),
) -> CapacityCurve:
    """Concurrency per length for every (engine, KV dtype) pair (pure)."""
    from kvcalc.errors import InputError

    lengths = (
        tuple(sorted(set(lengths)))
        if lengths
        else default_lengths(inputs.max_model_len or model.max_model_len)
    )
    dtypes = tuple(dict.fromkeys(kv_cache_dtypes)) or (inputs.kv_cache_dtype,)
    engine_names = tuple(dict.fromkeys(engines)) or (inputs.engine,)
    if len(dtypes) * len(engine_names) > MAX_SERIES:
        raise InputError(f"{len(dtypes) * len(engine_names)} series are too many for one chart",
                         hint=f"at most {MAX_SERIES} engine × dtype pairs", code="invalid-input")  # fmt: skip
    series = []
    for engine in engine_names:
        for dtype in dtypes:
            label = _label(engine, dtype, len(engine_names), len(dtypes))
            basis = curve_basis(model, replace(inputs, engine=engine_name(engine), kv_cache_dtype=dtype,
                                               max_model_len=max(lengths)), label=label)  # fmt: skip
            series.append(_series(model, basis, lengths))
    return CapacityCurve(
        model=model.name, gpu=get_gpu(inputs.gpu).name if inputs.gpu else None,
        gpu_memory_bytes=inputs.gpu_memory_bytes,
        tensor_parallel_size=inputs.tensor_parallel_size, lengths_tokens=lengths,
        default_max_model_len=model.max_model_len, series=tuple(series),
    )  # fmt: skip
