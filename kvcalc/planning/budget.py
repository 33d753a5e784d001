"""The KV budget per GPU: the engine's rule applied to every pipeline stage, and its error band.

vLLM sizes each stage's cache from that stage's own profile (its layers' weights, its activation
peak; the last stage also holds ``lm_head`` and runs the sampler) and then gives every stage the
smallest block count (engine-accounting §1.9). The printed token count therefore comes from the stage
with the least memory left. Llama-3.1-8B at PP 4 on H100s (vLLM 0.19): the first stage prints
"Available KV cache memory: 69.8 GiB", but 2,257,264 tokens × 32 KiB = 68.89 GiB is the last stage's
75.23 − 6.34 GiB (repolog-llmd-llama31-8b-4xh100-pp4).

The band (``low``/``high``) is the error measured on the engine's records for the terms kvcalc had
to estimate (``kvcalc.estimate.overhead``); it is zero when the KV memory was given.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.base import Engine, MemoryInputs
from kvcalc.engines.names import traits
from kvcalc.estimate.overhead import Overhead
from kvcalc.frozen import frozen


@frozen
class KvBudget:
    """Per GPU, in bytes (negative when nothing is left)."""

    #: the binding stage's budget: what the engine's block count comes from
    available_bytes: int
    #: the pessimistic and optimistic ends of the estimate
    low_bytes: int
    high_bytes: int
    #: every pipeline stage's budget, first to last (one entry without PP)
    stage_bytes: tuple[int, ...]
    #: the band was measured for this engine (else low = high = the prediction)
    measured: bool


def kv_budget(
    engine: Engine,
    memory: MemoryInputs,
    *,
    given_kv_bytes: int | None,
    stage_weights_bytes: tuple[int, ...],
    overhead: Overhead,
) -> KvBudget:
    """The engine's KV budget for every stage and the band around it (see the module doc).

    ``memory`` is the deployment's device side, its fraction resolved; ``given_kv_bytes`` is
    ``--kv-cache-memory``, which replaces the engine's rule."""
    if given_kv_bytes is not None:
        given = given_kv_bytes
        return KvBudget(available_bytes=given, low_bytes=given, high_bytes=given, stage_bytes=(given,),
                        measured=True)  # fmt: skip
    stages = overhead.per_stage()
    # a calibration (`plan --calibration`) corrects the last stage's non-torch: apply it to all
    shift = overhead.non_torch_bytes - stages[-1].non_torch_bytes
    weights = stage_weights_bytes if len(stage_weights_bytes) == len(stages) else (
        (stage_weights_bytes[-1],) * len(stages))  # fmt: skip
    per_stage = tuple(
        engine.available_kv_bytes(
            memory.with_terms(
                weights_bytes=w,
                activation_bytes=s.activation_bytes,
                non_torch_bytes=s.non_torch_bytes + shift,
                # graphs whose memory vLLM does not estimate are not subtracted (runner V2 < 0.29)
                cudagraph_bytes=s.cudagraph_bytes if overhead.cudagraph_estimated else 0,
            )
        )
        for w, s in zip(weights, stages, strict=True)
    )
    available = min(per_stage)
    # the band was measured on the engine's own records where the overhead estimate is calibrated on them
    measured = traits(engine.name).overhead_calibrated
    low = available - overhead.band_low_bytes if measured else available
    high = available + overhead.band_high_bytes if measured else available
    return KvBudget(available_bytes=available, low_bytes=low, high_bytes=high, stage_bytes=per_stage,
                    measured=measured)  # fmt: skip


def shifted(stage_bytes: tuple[int, ...], delta: int) -> tuple[int, ...]:
    """Every stage's budget moved by ``delta`` (the band's end), floored at 0 for the engine."""
    return tuple(max(0, s + delta) for s in stage_bytes)


#: the overhead terms an engine's budget rule may leave out, as the memory table names them
_TERMS = (("activation peak", "activation_bytes"), ("CUDA graphs", "cudagraph_bytes"))
#: with ``--kv-cache-memory`` every term is outside the (given) budget
GIVEN_KV_TERMS = (*_TERMS[:1], ("non-torch memory", "non_torch_bytes"), *_TERMS[1:])
#: those terms' ``MemoryBreakdown.outside_budget`` names (their ``_bytes`` fields' stems)
OUTSIDE_KEYS = {name: key.removesuffix("_bytes") for name, key in GIVEN_KV_TERMS}


def outside_terms(
    engine: Engine, memory: MemoryInputs, *, weights_bytes: int, overhead: Overhead
) -> tuple[tuple[str, int], ...]:
    """The overhead terms (name, bytes) the engine allocates after its KV cache, outside the
    budget the cache was sized from: asked of the engine's own rule (a term whose growth leaves
    ``available_kv_bytes`` unchanged is not in it), plus graphs the release does not estimate
    (``Overhead.cudagraph_estimated``). vLLM before 0.21, and runner V2 before 0.29, captures
    its CUDA graphs after allocating the KV cache (``v1/worker/gpu_worker.py:
    Worker.compile_or_warm_up_model``: ``capture_model`` after ``initialize_from_config``);
    SGLang keeps activations and graphs in the reserved ``1 − mem_fraction_static``
    (``srt/model_executor/runner/decode_cuda_graph_runner.py``: "Capture cuda graph failed").
    Empty without a GPU size."""
    if memory.gpu_memory_bytes is None:
        return ()
    stage = memory.with_terms(weights_bytes=weights_bytes, activation_bytes=overhead.activation_bytes,
                    non_torch_bytes=overhead.non_torch_bytes,
                    cudagraph_bytes=overhead.cudagraph_bytes if overhead.cudagraph_estimated else 0)  # fmt: skip
    base = engine.available_kv_bytes(stage)
    out = []
    for name, key in _TERMS:
        value = getattr(overhead, key)
        if value <= 0:
            continue
        if key == "cudagraph_bytes" and not overhead.cudagraph_estimated:
            out.append((name, value))
            continue
        grown = stage.with_terms(**{key: getattr(stage, key) + (1 << 30)})
        if engine.available_kv_bytes(grown) >= base:
            out.append((name, value))
    return tuple(out)


def less(budget: KvBudget, reserved_bytes: int) -> KvBudget:
    """``budget`` with ``reserved_bytes`` taken off every stage and both ends of the band (vLLM's
    ``reserve_mm_ipc_gpu_memory``, on the profiled and the given-memory path alike)."""
    if not reserved_bytes:
        return budget
    return replace(budget, available_bytes=budget.available_bytes - reserved_bytes,
                   low_bytes=budget.low_bytes - reserved_bytes,
                   high_bytes=budget.high_bytes - reserved_bytes,
                   stage_bytes=tuple(s - reserved_bytes for s in budget.stage_bytes))  # fmt: skip
