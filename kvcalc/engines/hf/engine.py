"""Hugging Face transformers: ``DynamicCache`` grows with the sequence, ``StaticCache`` preallocates.

From ``src/transformers/cache_utils.py`` (layered ``DynamicLayer``/``StaticLayer`` design, doc §4):

- every layer keeps ``[batch, kv_heads, tokens, head_dim]`` for K and for V, in the dtype the
  attention passes in (the model's compute dtype);
- ``StaticCache(max_cache_len=L)`` allocates ``L`` tokens per full layer and
  ``min(window, L)`` per sliding/chunked layer;
- ``DynamicCache(config=…)`` keeps ``window − 1`` tokens in sliding/chunked layers
  (``DynamicSlidingWindowLayer``); built without a config every layer keeps every token;
- MLA (DeepSeek-V3): transformers < 5 caches the expanded per-head K (``qk_nope + rope``) and V
  (``v_head_dim``) for every attention head — 128·(192 + 128)·2 B = 81,920 B per token per layer;
  transformers >= 5 caches the compressed latent (512 + 64 values: 1,152 B; measured with 5.24).

The cache dtype under ``auto`` is the dtype transformers loads the model in: the config's
``torch_dtype``/``dtype`` as written (float32 included), and **float32 when the config names none**
(``from_config`` and torch's default; ``from_pretrained(dtype="auto")`` then takes the checkpoint
weights' dtype, which for GPT-2 and SantaCoder is float32 too). Measured with transformers 5.24 on
the CPU: GPT-2 at 4,096 tokens, static cache, 301,989,888 B.

``cache_implementation="quantized"`` (``QuantizedCache``: quanto, HQQ, fp8 backends) is modelled in
:mod:`kvcalc.engines.hf.quantized`; the version, the cache dtype and a quantized cache's setup are
resolved in :mod:`kvcalc.engines.hf.setup`.

The version modelled is ``engine_version`` (a transformers version such as ``"4.57.1"`` or ``"5"``),
else the installed transformers (read with ``importlib.metadata``, without importing it).
**Unconfirmed**: the release where the MLA latent cache arrived (5.0 assumed), which model forwards
build ``DynamicCache`` without a config, recurrent-state dtypes, transformers 4's quantized caches.
"""

from __future__ import annotations

from typing import cast

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan, MemoryInputs
from kvcalc.engines.common import binary_search_max_len
from kvcalc.engines.extra import (
    check_extra,
    extra_bool,
    extra_choice,
    extra_int,
)
from kvcalc.engines.hf.quantized import (
    GROUP_KEYS,
    plan_quantized,
)
from kvcalc.engines.hf.setup import (
    VERSIONS,
    cache_dtype,
    major,
    quantized_name,
    quantized_setup,
)
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import FP32, CacheDtype
from kvcalc.model.layouts import LayerKind, Layout, MLALatent, RecurrentState, StateTensor
from kvcalc.model.recurrent_layouts import GatedDeltaNetState
from kvcalc.model.shape import ModelShape

EXTRA_KEYS = (
    "batch_size", "cache_implementation", "dynamic_cache_with_config", "backend", "nbits",
    "q_group_size", "residual_length", "axis_key", "axis_value", "residual_tokens",
)  # fmt: skip
#: the ``QuantizedCache`` options (``-E``), valid only with ``cache_implementation=quantized``
QUANTIZED_KEYS = ("backend", *GROUP_KEYS, "residual_tokens")


@frozen
class _Layer:
    index: int
    kind: LayerKind
    bytes_per_token: int
    window: int | None
    state_bytes: int


class HfEngine:
    name = "hf"
    versions = VERSIONS

    def default_gpu_memory_utilization(self, memory: MemoryInputs) -> float | None:
        return None

    def available_kv_bytes(self, memory: MemoryInputs) -> int:
        """Whatever the weights, activations and CUDA context leave (``gpu_memory_utilization`` scales the total)."""
        total = memory.total_memory_bytes
        if memory.gpu_memory_utilization is not None:
            total = int(total * memory.gpu_memory_utilization)
        return total - memory.non_kv_bytes

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        if request.model.gguf:
            # from_pretrained(..., gguf_file=...) dequantizes every tensor on load
            # (modeling_gguf_pytorch_utils.load_gguf_checkpoint): the weights are not the file's bytes
            raise InputError(
                "transformers dequantizes a GGUF file when it loads it: its weights and dtype are "
                "not the file's, which kvcalc does not model",
                hint="plan the GGUF with --engine llamacpp, or the checkpoint it came from",
                code="unsupported-model",
            )
        refuse_unmodelled(self.name, request.model)
        _check_state_layouts(request.model)
        profile, version_note = major(request.engine_version)
        notes = [version_note]
        named = quantized_name(request.kv_cache_dtype, notes)
        cache = extra_choice(
            request.extra,
            "cache_implementation",
            "quantized" if named else "dynamic",
            ("dynamic", "static", "quantized"),
        )
        if cache == "quantized" or named:
            return _plan_quantized(request, profile, named, notes)
        given = sorted(k for k in QUANTIZED_KEYS if k in request.extra)
        if given:
            raise InputError(
                f"{', '.join(given)} configure transformers' QuantizedCache only",
                hint="add -E cache_implementation=quantized", code="invalid-input",
            )  # fmt: skip
        dtype = cache_dtype(request, profile, notes)
        with_config = extra_bool(request.extra, "dynamic_cache_with_config", True)
        model = request.model.with_cache_dtype(dtype)
        layers = _layers(model, request.tensor_parallel_size, profile)
        windows = cache == "static" or with_config
        if any(x.window for x in layers) and not windows:
            notes.append("DynamicCache built without a config: sliding layers keep every token")
        notes.append(_cache_note(cache))
        return _plan(request, profile, dtype, layers, cache, windows, notes)


#: recurrent layouts whose transformers cache was measured (``verify --engine hf --run``), by the
#: model types it was measured for; every other recurrent layer is refused by name
_MEASURED_STATE = {
    "Mamba2State": ("nemotron_h",),
    "GatedDeltaNetState": ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"),
}


def _check_state_layouts(model: ModelShape) -> None:
    for layout in {type(x) for x in model.layers if isinstance(x, RecurrentState)}:
        if model.model_type not in _MEASURED_STATE.get(layout.__name__, ()):
            raise InputError(
                f"transformers' cache for the {layout.__name__} layers of model_type "
                f"{model.model_type!r} is not modelled",
                hint="kvcalc sizes transformers' recurrent caches only where measured "
                "(Nemotron-H, Qwen3-Next, Qwen3.5); use --engine vllm",
                code="unsupported-model",
            )


def _plan_quantized(
    request: EngineRequest, profile: str, named: str | None, notes: list[str]
) -> KvCachePlan:
    setup = quantized_setup(request, profile, named, notes)
    return plan_quantized(request, profile, setup, notes)


def _cache_note(cache: str) -> str:
    if cache == "static":
        return "StaticCache: K and V preallocated at max_cache_len = max_model_len"
    return "DynamicCache: grows by torch.cat; figures are at max_model_len tokens (the concatenation briefly holds both copies)"


def _layers(model: ModelShape, tp: int, profile: str) -> list[_Layer]:
    out = []
    for index, layout in enumerate(model.layers):
        per_token = _bytes_per_token(layout, tp, profile)
        state = _state_bytes(layout, tp) if isinstance(layout, RecurrentState) else 0
        if per_token or state:
            out.append(_Layer(index=index, kind=layout.kind, bytes_per_token=per_token,
                              window=layout.window, state_bytes=state))  # fmt: skip
    return out


def state_tensors(layout: RecurrentState, tp: int) -> tuple[StateTensor, StateTensor]:
    """(conv, ssm) as transformers keeps them, per sequence: the whole conv window (``conv_kernel``
    columns, not vLLM's kernel − 1) and Gated DeltaNet's recurrent state in float32 (what its torch
    kernel returns). Measured with transformers 5.24 on the CPU by ``kvcalc verify --engine hf
    --run``; the state dtype with the flash-linear-attention kernels installed is **unconfirmed**."""
    ranked = cast(RecurrentState, layout.per_rank(tp))  # per_rank keeps the layout's class
    conv, ssm = ranked.state_tensors()
    conv = StateTensor(name="conv", shape=(conv.shape[0] + 1, *conv.shape[1:]), dtype=conv.dtype)
    if isinstance(layout, GatedDeltaNetState):
        ssm = StateTensor(name="ssm", shape=ssm.shape, dtype=FP32)
    return conv, ssm


def _state_bytes(layout: RecurrentState, tp: int) -> int:
    return sum(t.nbytes for t in state_tensors(layout, tp))


def _bytes_per_token(layout: Layout, tp: int, profile: str) -> int:
    if isinstance(layout, MLALatent) and profile == "4":
        heads = max(1, layout.num_heads // tp)
        k = layout.dtype.row_bytes(layout.qk_nope_dim + layout.rope_dim)
        return heads * (k + layout.dtype.row_bytes(layout.v_head_dim))
    if isinstance(layout, RecurrentState):
        return 0
    return layout.per_rank(tp).bytes_per_token


def _tokens_held(layer: _Layer, length: int, cache: str, windows: bool) -> int:
    if not layer.window or not windows:
        return length
    if cache == "static":
        return min(layer.window, length)
    return min(layer.window - 1, length)


def _sequence_bytes(layers: list[_Layer], length: int, cache: str, windows: bool) -> int:
    return sum(
        x.bytes_per_token * _tokens_held(x, length, cache, windows) + x.state_bytes for x in layers
    )


def _plan(
    request: EngineRequest, profile: str, dtype: CacheDtype, layers: list[_Layer], cache: str,
    windows: bool, notes: list[str],
) -> KvCachePlan:  # fmt: skip
    """The cache at ``max_model_len`` for ``batch_size`` sequences. ``generate()`` has no chunked
    prefill: the first forward runs every prompt token of the batch at once
    (``GenerationMixin._sample`` → ``model_forward`` on the whole ``input_ids``), so the tokens the
    activation is sized for (``max_num_batched_tokens``) are ``batch × max_model_len``, not vLLM's
    2,048-token chunk."""
    L = request.max_model_len
    batch = extra_int(request.extra, "batch_size", 1)
    per_request = _sequence_bytes(layers, L, cache, windows)
    total = batch * per_request
    available = request.available_kv_bytes
    fits = total <= available
    estimate = None
    if not fits:
        estimate = binary_search_max_len(
            L, lambda n: batch * _sequence_bytes(layers, n, cache, windows) <= available
        )
    groups = tuple(
        KvCacheGroup(kind=kind, num_layers=len(members), page_bytes=members[0].bytes_per_token,
                     block_size=1, blocks_per_request=_tokens_held(members[0], L, cache, windows),
                     num_blocks=batch * _tokens_held(members[0], L, cache, windows),
                     layer_indices=tuple(x.index for x in members))
        for kind, members in _by_kind(layers).items()
    )  # fmt: skip
    return KvCachePlan(
        engine="hf", engine_version=profile, kv_cache_dtype=dtype.name, block_size=1,
        num_blocks=batch * L, kv_cache_bytes=total, kv_cache_tokens=batch * L,
        max_concurrency=max(0, available) / per_request if per_request else 0.0,
        kv_bytes_per_token=sum(x.bytes_per_token for x in layers), bytes_per_request=per_request,
        fits=fits, estimated_max_model_len=estimate, groups=groups, log_lines=(), notes=tuple(notes),
        max_model_len=L, available_kv_bytes=available, fit_budget_bytes=available // batch,
        max_num_seqs=batch, max_num_batched_tokens=batch * L,
    )  # fmt: skip


def _by_kind(layers: list[_Layer]) -> dict[LayerKind, list[_Layer]]:
    found: dict[LayerKind, list[_Layer]] = {}
    for layer in layers:
        found.setdefault(layer.kind, []).append(layer)
    return found
