"""Judging a plan: expected concurrency for a workload, headroom and the verdict. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcalc.engines.base import KvCacheGroup, KvCachePlan
from kvcalc.engines.names import traits
from kvcalc.errors import InputError
from kvcalc.estimate.overhead import Overhead
from kvcalc.frozen import frozen
from kvcalc.model.layouts import LayerKind
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB, format_gib

if TYPE_CHECKING:
    from kvcalc.engines.vllm.startup import StartupMemory


def workload(inputs: PlanInputs, kv: KvCachePlan, max_len: int) -> tuple[int | None, float | None]:
    """Expected concurrency for ``prompt_len + output_len`` tokens per request, with a shared prefix
    counted once (prefix caching shares whole blocks of full-attention layers)."""
    if inputs.prompt_len is None:
        return None, None
    tokens = min(max_len, inputs.prompt_len + (inputs.output_len or 0))
    if not kv.groups or kv.num_blocks <= 0:
        return tokens, 0.0
    # a running request's slots: vLLM allocate_slots, min(computed + new + lookahead, max_model_len)
    held = min(max_len, tokens + kv.lookahead_tokens)
    per_request = 0
    shared = 0
    for g in kv.groups:
        need = group_blocks(g, held, max_len)
        per_request += need
        if g.kind in (LayerKind.FULL, LayerKind.MLA):
            shared += min(need, inputs.shared_prefix // g.block_size)
    unique = per_request - shared
    if unique <= 0:
        return tokens, float(kv.num_blocks)
    return tokens, max(0.0, (kv.num_blocks - shared) / unique)


def workload_length(inputs: PlanInputs, max_len: int) -> tuple[str, ...]:
    """Refuse a workload the engine would reject at ``max_model_len``; a note where it serves it
    cut short. A prompt of ``max_model_len`` tokens or more is rejected (vLLM's
    ``InputProcessor._validate_model_input`` in ``v1/engine/input_processor.py`` leaves room for
    one output token; SGLang's ``TokenizerManager._validate_one_request``); a longer prompt +
    output is served cut at ``max_model_len`` by vLLM and rejected by SGLang
    (:attr:`~kvcalc.engines.names.EngineTraits.output_capped_at_max_model_len`)."""
    if inputs.prompt_len is None:
        return ()
    can = traits(inputs.engine)
    prompt, output = inputs.prompt_len, inputs.output_len or 0
    if prompt >= max_len:
        raise InputError(
            f"the workload's prompt of {prompt:,} tokens is not shorter than max_model_len "
            f"{max_len:,}: {can.name.display} rejects such requests (the prompt needs room for at "
            f"least one output token)",
            hint="raise --max-model-len above the prompt, or shorten --prompt-len",
            code="invalid-input",
        )
    total = prompt + output
    if total <= max_len:
        return ()
    if can.output_capped_at_max_model_len:
        return (f"the workload's {total:,} tokens ({prompt:,} prompt + {output:,} output) exceed "
                f"max_model_len {max_len:,}: {can.name.display} stops each request at {max_len:,} "
                f"tokens, so at most {max_len - prompt:,} output tokens are generated",)  # fmt: skip
    raise InputError(
        f"the workload's {total:,} tokens ({prompt:,} prompt + {output:,} output) exceed "
        f"max_model_len {max_len:,}: "
        + (
            f"{can.name.display} rejects such requests"
            if can.rejects_long_requests
            else f"kvcalc does not know what {can.name.display} does with such requests"
        ),  # fmt: skip
        hint=f"give --output-len at most {max_len - prompt:,}, or raise --max-model-len",
        code="invalid-input",
    )


def group_blocks(g: KvCacheGroup, tokens: int, max_len: int) -> int:
    """Blocks a request of ``tokens`` tokens takes in group ``g``
    (:meth:`~kvcalc.engines.base.KvCacheGroup.blocks_for`)."""
    return g.blocks_for(tokens, max_len)


def overhead_notes(engine: str, overhead: Overhead) -> tuple[str, ...]:
    """The overhead estimate's notes, marked where the estimate was not calibrated on ``engine``."""
    can = traits(engine)
    if can.overhead_calibrated:
        return overhead.notes
    return tuple(
        f"overhead estimate (uncalibrated for {can.name.display}): {n}" for n in overhead.notes
    )


def runnable(conc: float, max_num_seqs: int | None) -> float:
    """Concurrent requests the deployment can run: what the KV cache holds (``conc``), capped by
    the engine's ``max_num_seqs`` (the scheduler never runs more at once).

    >>> runnable(2117.02, 1024), runnable(4.19, 256), runnable(3.5, None)
    (1024, 4.19, 3.5)
    """
    return min(conc, max_num_seqs) if max_num_seqs else conc


def no_memory_reason(engine: str, budget: int, weights: int, available: int) -> str:
    """Why nothing is left for KV, in the terms the memory table shows: the engine's budget, less
    the weights, less what the engine deducts besides (``budget − weights − available``)."""
    gib = 1 << 30
    head = (f"no memory is left for the KV cache ({available / gib:.2f} GiB: the engine budget "
            f"{budget / gib:.2f} GiB less {weights / gib:.2f} GiB of weights")  # fmt: skip
    if traits(engine).overhead_in_reserve:
        return head + "; activations and CUDA graphs come out of the memory it reserves)"
    rest = budget - weights - available
    return head + f" and {rest / gib:.2f} GiB of activation peak and runtime overhead)"


@frozen
class Device:
    """The whole GPU beside the engine's budget: what the plan leaves free on it (negative: short)
    and the terms the engine allocates after its KV cache, outside that budget
    (:func:`kvcalc.planning.budget.outside_terms`)."""

    total_bytes: int
    free_bytes: int
    outside: tuple[tuple[str, int], ...] = ()
    #: the KV cache's size was given (``--kv-cache-memory``): the memory fraction plays no part
    given_kv: bool = False
    #: the engine's start-up check of its memory fraction against what is free when it starts
    #: (vLLM: :mod:`kvcalc.engines.vllm.startup`); None where the engine has none
    startup: StartupMemory | None = None

    @property
    def reserved_bytes(self) -> int:
        """What the GPU holds before the engine's start-up check (vLLM's CUDA context): the
        parts must fit beside it."""
        return self.total_bytes - self.startup.free_bytes if self.startup else 0


def short_reason(engine: str, device: Device) -> str:
    """Why a plan whose parts add up to more than the GPU does not start."""
    gib, mib = 1 << 30, 1 << 20
    used = device.total_bytes - device.free_bytes
    name = traits(engine).name.display
    short = device.reserved_bytes - device.free_bytes
    of = f"the GPU's {device.total_bytes / gib:.2f} GiB"
    if device.reserved_bytes:
        of = (f"the {(device.total_bytes - device.reserved_bytes) / gib:.2f} GiB free when {name} "
              f"starts ({of} less {device.reserved_bytes / gib:.2f} GiB its CUDA context holds)")  # fmt: skip
    whole = (f"weights, overhead and KV cache take {used / gib:.2f} GiB of {of} "
             f"({short / mib:,.2f} MiB short)")  # fmt: skip
    if not device.outside:
        return f"{whole}: {name} runs out of memory allocating them"
    parts = [f"the {n} ({b / mib:,.2f} MiB)" for n, b in device.outside]
    terms = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    fix = ("; lower --gpu-memory-utilization" if traits(engine).memory_fraction_knob
           else f"; lower {name}'s memory fraction (--gpu-memory-utilization)")  # fmt: skip
    where = "after its KV cache outside the budget it sizes the cache from"
    if device.given_kv:
        fix, where = (
            "; lower --kv-cache-memory",
            "beside the KV cache size given (--kv-cache-memory)",
        )
    return (f"{terms}, which {name} allocates {where}, do not fit: {whole}; it runs out of memory "
            f"at start-up (capturing its CUDA graphs, warming up) or on its first full batch{fix}")  # fmt: skip


def sequences(inputs: PlanInputs) -> int:
    """The sequences a fixed-pool engine allocates up front (llama.cpp's slots, transformers'
    batch), as :func:`kvcalc.planning.request.engine_extra` passes them; 1 when not given."""
    from kvcalc.planning.request import engine_extra

    # the engine has refused a count that is not a whole number from 1 (llama.cpp's n_seq_max,
    # transformers' batch_size) before the verdict is judged
    extra = engine_extra(inputs)
    return int(extra.get("n_seq_max", extra.get("batch_size", 1)))


def _pool_reason(inputs: PlanInputs, kv: KvCachePlan) -> str:
    """A fixed pool (llama.cpp slots, transformers' batch) that does not fit: the whole pool is
    allocated up front, so the cause is every slot's context, not one request's."""
    gib = 1 << 30
    name = traits(kv.engine).name.display
    n = sequences(inputs)
    longest = kv.estimated_max_model_len or 0
    if kv.kv_cache_bytes <= kv.available_kv_bytes and traits(kv.engine).slots_from_target:
        # memory is there: the request is longer than a slot's context (-c / --parallel)
        return (f"a request of {kv.max_model_len:,} tokens is longer than the {longest:,} tokens "
                f"{name}'s context gives each of its {n} slot(s)")  # fmt: skip
    if n <= 1 or kv.kv_cache_bytes <= kv.available_kv_bytes:
        return (f"one request of {kv.max_model_len:,} tokens needs {kv.bytes_per_request / gib:.2f} GiB "
                f"of KV cache but {kv.available_kv_bytes / gib:.2f} GiB are available; the longest "
                f"that fits is {longest:,} tokens")  # fmt: skip
    return (f"{name} allocates its whole cache up front: {n} sequences × {kv.max_model_len:,} tokens "
            f"need {kv.kv_cache_bytes / gib:.2f} GiB ({n} × {kv.bytes_per_request / gib:.2f} GiB) but "
            f"{kv.available_kv_bytes / gib:.2f} GiB are available; with {n} sequences the longest "
            f"context that fits each is {longest:,} tokens")  # fmt: skip


def verdict(
    inputs, kv, weights, budget, available, conc, headroom_fraction, tokens=None,
    device: Device | None = None,
) -> tuple[str, str]:  # fmt: skip
    """The verdict and its reason. ``conc`` is the KV-limited concurrency for requests of
    ``tokens`` tokens (the workload's, else ``max_model_len``); ``device`` the whole GPU, where
    its size is known."""
    gib = 1 << 30
    tokens = tokens or kv.max_model_len
    cap = kv.max_num_seqs
    if inputs.kv_cache_memory_bytes is None and weights.per_gpu_bytes > budget:
        return "weights-dont-fit", (
            f"the weights need {weights.per_gpu_bytes / gib:.2f} GiB per GPU but the engine may use "
            f"{budget / gib:.2f} GiB"
        )
    start = device.startup if device is not None else None
    if start is not None and start.refused and not kv.refusal:
        # vLLM checks the fraction at start-up, before it loads the weights
        return "wont-start", (
            f"{kv.engine} refuses to start: {start.message(start.free_bytes)}; fix: "
            f"--gpu-memory-utilization {start.highest_utilization(start.free_bytes)}"
        )
    if kv.refusal:
        fix = f"; fix: {kv.refusal_fix}" if kv.refusal_fix else ""
        return "wont-start", f"{kv.engine} refuses to start: {kv.refusal}{fix}"
    if available <= 0:
        return "wont-start", no_memory_reason(kv.engine, budget, weights.per_gpu_bytes, available)
    if not kv.fits and traits(kv.engine).fixed_pool:
        return "wont-start", _pool_reason(inputs, kv)
    if not kv.fits:
        longest = kv.estimated_max_model_len or 0
        # what the engine's check compares with: the available memory less part of a block, or
        # (vLLM's num_gpu_blocks_override) the override's blocks, whatever the memory
        checked = max(0, min(kv.fit_budget_bytes, kv.available_kv_bytes))
        return "wont-start", (
            f"one request of {kv.max_model_len:,} tokens needs {kv.bytes_per_request / gib:.2f} GiB of KV "
            f"cache but {checked / gib:.2f} GiB are available; the longest that fits is "
            f"{longest:,} tokens"
        )
    if device is not None and device.free_bytes < device.reserved_bytes:
        return "wont-start", short_reason(kv.engine, device)
    target = inputs.target_concurrency
    if target is not None and runnable(conc, cap) < target:
        if conc >= target:
            return "below-target", (
                f"{traits(kv.engine).max_num_seqs_name} {cap:,} lets the engine run {cap:,} request{'s' if cap != 1 else ''} at once, {target:,} were "
                f"asked for ({conc:.2f} of {tokens:,} tokens would fit in the KV cache)"
            )
        return "below-target", f"{conc:.2f} concurrent requests fit, {target} were asked for"
    if headroom_fraction < inputs.tight_fraction:
        return "tight", (
            f"only {headroom_fraction:.1%} of the KV cache is left beyond "
            f"{target or 1} request(s) (threshold {inputs.tight_fraction:.1%})"
        )
    knob = traits(kv.engine).max_num_seqs_name
    capped = f"; the engine runs {cap:,} at once ({knob})" if cap and conc > cap else ""
    return "ok", f"{conc:.2f} requests of {tokens:,} tokens fit per engine{capped}"


def headroom(
    inputs: PlanInputs, kv: KvCachePlan, available: int
) -> tuple[int | None, float | None, float, int, float]:
    """(workload tokens, workload concurrency, concurrency, headroom bytes, headroom fraction)."""
    workload_tokens, workload_conc = workload(inputs, kv, kv.max_model_len)
    conc = workload_conc if workload_conc is not None else kv.max_concurrency
    need = inputs.target_concurrency or 1
    if traits(kv.engine).fixed_pool:
        # the pool is sized by the settings (slots × context, batch × length): headroom is memory
        headroom = available - kv.kv_cache_bytes
        fraction = headroom / available if available > 0 else -1.0
    else:
        # the engine fills its budget with blocks: headroom is concurrency beyond the target
        fraction = 1.0 - need / conc if conc > 0 else -1.0
        headroom = (
            kv.kv_cache_bytes - round(kv.kv_cache_bytes * need / conc)
            if conc > 0
            else -kv.bytes_per_request
        )
    return workload_tokens, workload_conc, conc, headroom, fraction


def starts(verdict: str) -> bool:
    """The deployment starts (a verdict other than ``wont-start``/``weights-dont-fit``)."""
    return verdict not in ("wont-start", "weights-dont-fit")


def pessimistic(
    inputs, kv, low_kv, weights, budget, kv_budget, workload_tokens, device, central
) -> tuple[str, str]:
    """The verdict at the pessimistic end of the band, worded with the central estimate beside it:
    a deployment that starts at the central estimate and not at the low end "may not start"; two
    "longest that fits" figures each say which end of the estimate they are."""
    central_verdict, reason = central
    available, low = kv_budget.available_bytes, kv_budget.low_bytes
    _, _, low_conc, _, low_fraction = headroom(inputs, low_kv, low)
    low_verdict, low_reason = verdict(
        inputs, low_kv, weights, budget, low, low_conc, low_fraction, workload_tokens,
        device=device,
    )  # fmt: skip
    band = f"{low / GIB:.2f} GiB for KV instead of {available / GIB:.2f}"
    if low_verdict == central_verdict:
        longest, low_longest = kv.estimated_max_model_len, low_kv.estimated_max_model_len
        if (central_verdict == "wont-start" and not kv.fits and longest and low_longest
                and low_longest != longest and reason.endswith(" tokens")):  # fmt: skip
            reason += (f" at the central estimate ({available / GIB:.2f} GiB for KV), {low_longest:,} "
                       f"at its pessimistic end ({low / GIB:.2f} GiB)")  # fmt: skip
        return central_verdict, reason
    if low_verdict == "wont-start" and starts(central_verdict):
        return low_verdict, (
            f"may not start: at the central estimate of the KV memory ({available / GIB:.2f} GiB) "
            f"{traits(kv.engine).name.display} starts and would be {central_verdict} ({reason}); at the "
            f"pessimistic end of the estimate ({low / GIB:.2f} GiB) {low_reason}"
        )
    return low_verdict, f"at the pessimistic end of the estimate ({band}): {low_reason}"


def startup_band(engine: str, device: Device | None, central: tuple[str, str]) -> tuple[str, str]:
    """The verdict with the engine's start-up check at its uncertain end: a deployment that
    starts beside the CUDA context alone but not beside the largest NCCL share recorded on more
    than one GPU "may not start" (:mod:`kvcalc.engines.vllm.startup`)."""
    verdict, reason = central
    start = device.startup if device is not None else None
    if start is None or start.refused or not start.refused_low or not starts(verdict):
        return central
    name = traits(engine).name.display
    held, held_low = start.total_bytes - start.free_bytes, start.total_bytes - start.free_low_bytes
    return "wont-start", (
        f"may not start: with {format_gib(held)} GiB held before its start-up check (the CUDA "
        f"context) {name} finds {format_gib(start.free_bytes)} GiB free, starts and would be "
        f"{verdict} ({reason}); with NCCL's buffers as recorded on more than one GPU "
        f"({format_gib(held_low)} GiB held) it refuses: {start.message(start.free_low_bytes)}; "
        f"--gpu-memory-utilization {start.highest_utilization(start.free_low_bytes)} starts either way"
    )
