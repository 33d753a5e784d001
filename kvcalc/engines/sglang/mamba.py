"""Mamba and linear-attention hybrids: SGLang reserves the recurrent-state slots first.

``KVCacheConfigurator._handle_max_mamba_cache`` (``mem_cache/kv_cache_configurator.py``, 0.5.23),
the auto-fit path (no ``--max-mamba-cache-size``, radix cache on, no speculative decoding), on the
``rest`` left after the multimodal reservation, in GiB as SGLang computes it (floats):

- one slot (``mamba_cache_per_req``) = Σ over the recurrent layers of conv elements · 2 B
  (``SGLANG_MAMBA_CONV_DTYPE`` bfloat16, whatever the model dtype) + state elements · the SSM dtype
  (the config's ``mamba_ssm_dtype``, top level or ``text_config``; float32 when absent);
- state budget = rest · r / (1 + r), ``mamba_full_memory_ratio`` r = 0.9;
- slots K = ``int((budget − slot) // slot)``; K + 1 are allocated (one padding slot);
- the KV pool is sized from rest − (K + 1) · slot and holds the attention layers only;
- ``max_running_requests`` ≤ K // s, s = 3 + 2 slots per request where SGLang keeps the
  ``extra_buffer`` radix strategy (``_MAMBA_EXTRA_BUFFER_ARCHS``, overlap schedule on), else 3
  (``no_buffer``).

Qwen3-Next-80B, TP 1, 20 GiB: a slot is 36 · (3 · 8,192 · 2 + 32 · 128 · 128 · 4) = 77,266,944 B;
20 · 0.9 / 1.9 GiB holds K = 130; the KV pool gets 20 GiB − 131 · 77,266,944 B = 11,352,866,816 B,
// 24,576 B = 461,949 tokens; at most 130 // 5 = 26 running requests (SGLang's own sizing code,
recorded). The shapes are kvcalc's recurrent layouts; each matched SGLang's recorded slot bytes.

Under speculative decoding (``memory_budget_spec``; D = ``speculative_num_draft_tokens``, n =
``max_running_requests``, 48 unless given): K = ``int((budget − slot · (1 + D)) // (slot · (1 +
D / s)))``, and slot · (min(n, K // s) + 1) · D of intermediate SSM state is taken off rest too;
``--max-mamba-cache-size`` fixes K (same reserve); ``--disable-radix-cache`` makes K = n and the
reserve slot · (K + 1) · D. Qwen3-Next NEXTN (D 4), TP 1, 20 GiB: K = 70, 14 requests, the same
461,949 tokens (recorded).
"""

from __future__ import annotations

from collections.abc import Mapping
from math import prod
from typing import Any

from kvcalc.engines.base import KvCacheGroup
from kvcalc.engines.extra import extra_bool, extra_int
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import BF16, FP16, FP32, CacheDtype
from kvcalc.model.layouts import LayerKind, Layout, RecurrentState
from kvcalc.model.recurrent_layouts import ParallelHybrid
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB

#: hybrid architectures SGLang 0.5.23 serves with a Mamba/linear-attention state pool
SERVED_ARCHS = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "FalconH1ForCausalLM",
    "GraniteMoeHybridForCausalLM", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "KimiLinearForCausalLM",
})  # fmt: skip
#: ``_MAMBA_EXTRA_BUFFER_ARCHS`` (``arg_groups/overrides.py``) among :data:`SERVED_ARCHS`: the
#: ``auto`` radix strategy resolves to ``extra_buffer`` (two tracking slots per request more)
EXTRA_BUFFER_ARCHS = SERVED_ARCHS - {"Lfm2ForCausalLM", "Lfm2MoeForCausalLM"}
#: hybrids SGLang 0.5.23 has no model class for, and why it stops (``model_loader/utils.py``)
NOT_SERVED = {
    "JambaForCausalLM": "Jamba",
    "BambaForCausalLM": "Bamba",
}
MAMBA_FULL_MEMORY_RATIO = 0.9
#: ``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``, and the two ping-pong tracking slots
_BASE_SLOTS, _EXTRA_BUFFER_SLOTS = 3, 2
_SSM_DTYPES = {"float32": FP32, "bfloat16": BF16, "float16": FP16}


@frozen
class MambaSplit:
    """The state pool SGLang reserves before the KV pool, per GPU."""

    #: ``max_mamba_cache_size`` (one more slot is allocated as padding)
    slots: int
    #: ``mamba_cache_per_req``: one slot over all recurrent layers
    slot_bytes: int
    num_layers: int
    #: slots one running request holds (``_calculate_mamba_ratio``)
    slots_per_request: int
    #: what the KV pool is sized from
    kv_budget_bytes: int
    #: SGLang's ``total_rest_memory`` before the split, GiB
    rest_gib: float
    full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO
    #: ``slots`` given (``--max-mamba-cache-size``) rather than fitted
    fixed: bool = False
    #: intermediate SSM state for speculative verification: slot · (capped requests + 1) · D
    spec_state_bytes: int = 0
    #: the requests and draft tokens that reserve is for (0: no speculative decoding)
    spec_requests: int = 0
    spec_draft_tokens: int = 0

    @property
    def state_bytes(self) -> int:
        return (self.slots + 1) * self.slot_bytes

    @property
    def max_running_requests(self) -> int:
        return self.slots // self.slots_per_request


def is_hybrid(model: ModelShape) -> bool:
    return any(isinstance(x, RecurrentState) for x in model.layers)


def refuse_unserved(model: ModelShape, pipeline_parallel_size: int) -> None:
    """Hybrids SGLang does not serve, and what the state split is not checked for."""
    archs = set(model.architectures)
    for arch, what in NOT_SERVED.items():
        if arch in archs:
            raise InputError(
                f"sglang: {what} ({arch}) is not served by SGLang 0.5.23: it has no SGLang model "
                f'class and stops at load with "{arch} has no SGlang implementation and the '
                'Transformers implementation is not compatible with SGLang."',
                hint="plan it with --engine vllm",
                code="unsupported-model",
            )
    if not archs & SERVED_ARCHS:
        raise InputError(
            f"sglang: the recurrent-state pool of {model.model_type} "
            f"({', '.join(model.architectures) or 'no architectures'}) is not checked against "
            "SGLang's sizing code",
            hint="plan it with --engine vllm",
            code="unsupported-model",
        )
    if pipeline_parallel_size > 1:
        raise InputError(
            "sglang: the Mamba-state split under pipeline parallelism is not checked against "
            "SGLang's sizing code",
            hint="plan it with -pp 1, or with --engine vllm",
            code="unsupported-model",
        )


def ssm_dtype(model: ModelShape) -> CacheDtype:
    """``mamba2_state_dtype``: the config's ``mamba_ssm_dtype`` (text config first), else float32
    (an unknown name too, with SGLang's warning). Every family that declares the key reads it
    (``tests/test_mutants_sglang_mamba.py``), so a config's value is always in ``config_keys``."""
    keys = model.config_keys
    name = keys.get("text_config.mamba_ssm_dtype", keys.get("mamba_ssm_dtype"))
    return _SSM_DTYPES.get(str(name), FP32)


def _recurrent(layer: Layout) -> RecurrentState | None:
    if isinstance(layer, ParallelHybrid):
        return layer.mixer
    return layer if isinstance(layer, RecurrentState) else None


def _split_bytes(model: ModelShape) -> tuple[int, int]:
    """(conv, state) bytes of one slot over all recurrent layers."""
    state = ssm_dtype(model)
    conv = ssm = 0
    for layer in model.layers:
        mixer = _recurrent(layer)
        for t in mixer.state_tensors() if mixer is not None else ():
            if t.name == "conv":
                conv += prod(t.shape) * BF16.block_bytes
            else:
                ssm += prod(t.shape) * state.block_bytes
    return conv, ssm


def log_line(model: ModelShape, s: MambaSplit) -> str:
    """``Mamba Cache is allocated. …`` (``MambaPool``; GB = GiB, K + 1 slots per buffer)."""
    conv, ssm = _split_bytes(model)
    n = s.slots + 1
    return (
        f"Mamba Cache is allocated. max_mamba_cache_size: {s.slots}, conv_state size: "
        f"{n * conv / GIB:.2f}GB, ssm_state size: {n * ssm / GIB:.2f}GB "
    )


def slot_bytes(model: ModelShape) -> tuple[int, int]:
    """``mamba_cache_per_req`` of the per-rank ``model``, and its number of recurrent layers."""
    state = ssm_dtype(model)
    total = layers = 0
    for layer in model.layers:
        mixer = _recurrent(layer)
        if mixer is None:
            continue
        layers += 1
        for t in mixer.state_tensors():
            dtype = BF16 if t.name == "conv" else state
            total += prod(t.shape) * dtype.block_bytes
    return total, layers


@frozen
class MambaOptions:
    """The server arguments that move the split (``-E`` keys of the sglang engine)."""

    #: ``--mamba-full-memory-ratio``: state budget / KV budget (0.9)
    full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO
    #: ``--max-mamba-cache-size``: the slots, instead of the ratio's
    max_slots: int | None = None
    #: ``--disable-radix-cache``: one slot per running request
    disable_radix_cache: bool = False
    #: ``--speculative-num-draft-tokens`` D under speculative decoding: SGLang keeps the
    #: intermediate SSM state of every draft token of every running request (None: off)
    spec_draft_tokens: int | None = None
    #: ``max_running_requests`` before the slots cap it (48 under speculative decoding)
    spec_max_running_requests: int = 48


def options(
    extra: Mapping[str, Any], max_running_requests: int | None = None,
    spec_draft_tokens: int | None = None,
) -> MambaOptions:  # fmt: skip
    """The ``-E`` keys; with the radix cache off and ``max_running_requests`` set (given, or 48
    under speculative decoding), SGLang allocates that many slots
    (``mamba_pool.from_max_running_requests``). ``spec_draft_tokens``: the resolved
    ``speculative_num_draft_tokens`` under speculative decoding, whose intermediate state is
    reserved for ``min(max_running_requests, slots // ratio) + 1`` requests."""
    ratio = extra.get("mamba_full_memory_ratio", MAMBA_FULL_MEMORY_RATIO)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 1e6:
        raise InputError(
            f"mamba_full_memory_ratio must be a positive number, got {ratio!r}",
            code="invalid-input",
        )
    slots = extra_int(extra, "max_mamba_cache_size", None)
    no_radix = extra_bool(extra, "disable_radix_cache", False)
    if slots is None and no_radix and max_running_requests is not None:
        slots = max_running_requests
    spec_cap = 48 if max_running_requests is None else max(1, max_running_requests)
    return MambaOptions(
        full_memory_ratio=float(ratio), max_slots=slots, disable_radix_cache=no_radix,
        spec_draft_tokens=spec_draft_tokens, spec_max_running_requests=spec_cap,
    )  # fmt: skip


def split(model: ModelShape, rest_gib: float, opts: MambaOptions | None = None) -> MambaSplit:
    """The state slots SGLang reserves from ``rest_gib`` and the bytes left for the KV pool
    (``slots`` ≤ 0: SGLang stops, :func:`refusal`)."""
    opts = opts or MambaOptions()
    per_slot, layers = slot_bytes(model)
    archs = set(model.architectures)
    if opts.disable_radix_cache:
        per_request = 1
    else:
        per_request = _BASE_SLOTS + (_EXTRA_BUFFER_SLOTS if archs & EXTRA_BUFFER_ARCHS else 0)
    d = opts.spec_draft_tokens
    budget_bytes = rest_gib * opts.full_memory_ratio / (1 + opts.full_memory_ratio) * GIB
    if opts.max_slots is not None:
        slots = opts.max_slots
    elif d is not None and per_slot:
        # memory_budget_spec: main state + intermediate state = the state budget
        slots = int((budget_bytes - per_slot * (1 + d)) // (per_slot * (1 + d / per_request)))
    else:
        slots = int((budget_bytes - per_slot) // per_slot) if per_slot else 0
    reserve = capped = 0
    if d is not None:
        capped = min(max(1, opts.spec_max_running_requests), slots // per_request)
        reserve = per_slot * (capped + 1) * d
    rest_kv = rest_gib - reserve / GIB - (slots + 1) * per_slot / GIB
    return MambaSplit(
        slots=slots, slot_bytes=per_slot, num_layers=layers, slots_per_request=per_request,
        kv_budget_bytes=max(0, int(rest_kv * GIB)) if slots > 0 else 0, rest_gib=rest_gib,
        full_memory_ratio=opts.full_memory_ratio, fixed=opts.max_slots is not None,
        spec_state_bytes=reserve, spec_requests=capped, spec_draft_tokens=d or 0,
    )  # fmt: skip


def refusal(s: MambaSplit) -> str | None:
    """SGLang's error when no state slot fits (``_handle_max_mamba_cache``) or too few for one
    request (``resolve_max_num_reqs``), else None."""
    if s.slots > 0 and s.max_running_requests > 0:
        return None
    if s.slots > 0:
        return (
            "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            f"max_mamba_cache_size={s.slots}, mamba_ratio={s.slots_per_request}, "
            f"resulting max_num_reqs={s.max_running_requests}."
        )
    return (
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
        f"max_mamba_cache_size={s.slots} (total_rest_memory={s.rest_gib:.2f} GB, "
        f"mamba_cache_per_req={s.slot_bytes / (1 << 20):.2f} MB)."
    )


def notes(s: MambaSplit) -> list[str]:
    return [
        f"Mamba-state pool first: {s.slots:,} slots (+1 padding) of {s.slot_bytes:,} B over "
        f"{s.num_layers} recurrent layers = {s.state_bytes / GIB:.2f} GiB "
        + (
            "(max_mamba_cache_size)"
            if s.fixed
            else f"(mamba_full_memory_ratio {s.full_memory_ratio})"
        )
        + "; the KV pool gets the rest",
        f"max_running_requests ≤ {s.slots:,} // {s.slots_per_request} state slots per request "
        f"= {s.max_running_requests:,}",
    ] + ([
        f"speculative decoding: the intermediate SSM state of {s.spec_draft_tokens} draft "
        f"token(s) for min(max_running_requests, {s.slots:,} // {s.slots_per_request}) + 1 = "
        f"{s.spec_requests + 1:,} requests, {s.slot_bytes:,} B · {s.spec_requests + 1:,} · "
        f"{s.spec_draft_tokens} = {s.spec_state_bytes / GIB:.2f} GiB, is reserved before the KV "
        "pool (_handle_max_mamba_cache)"
    ] if s.spec_draft_tokens else [])  # fmt: skip


def group(s: MambaSplit) -> KvCacheGroup:
    """The state pool as a cache group: ``num_blocks`` slots of one request's state per layer."""
    return KvCacheGroup(
        kind=LayerKind.RECURRENT, num_layers=s.num_layers,
        page_bytes=s.slot_bytes // max(1, s.num_layers), block_size=1,
        blocks_per_request=s.slots_per_request, num_blocks=max(0, s.slots),
    )  # fmt: skip
