"""Models side by side: KV bytes per token and per request, weights, and how many requests fit.

:func:`compare` is pure: model shapes in, a frozen :class:`Comparison` out. With a GPU every model
is planned (:func:`kvcalc.planning.core.plan`, suggestions off) and the engine's own figures are shown;
without one, the layout's bytes (per tensor-parallel rank) and the config-estimated weights. A
model that does not fit is a row that says so, not an error.

:func:`attention_variants` builds, from one model's dimensions, the same model with MHA
(``kv_heads = heads``), its own GQA, MQA (``kv_heads = 1``) and MLA (one latent of
``kv_lora_rank 512 + rope 64`` per token per layer) as :class:`~kvcalc.model.shape.ModelShape` copies with
replaced layouts and attention weights. Worked example (Llama-3.1-8B, bf16, per token):
MHA 2·32·32·128·2 = 524,288 B; GQA 2·32·8·128·2 = 131,072 B; MQA 2·32·1·128·2 = 16,384 B;
MLA 32·(512 + 64)·2 = 36,864 B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, field, replace
from typing import TYPE_CHECKING, Any

from kvcalc.errors import InputError, KvcalcError
from kvcalc.frozen import frozen
from kvcalc.model.layouts import ATTENTION_KINDS, FullAttention, MLALatent
from kvcalc.model.shape import ModelShape
from kvcalc.planning.inputs import MAX_COUNT, PlanInputs
from kvcalc.units import short_int

if TYPE_CHECKING:
    from kvcalc.sources.safetensors_meta import SafetensorsWeights

#: the MLA variant's latent: DeepSeek-V2/V3's sizes
MLA_KV_LORA_RANK = 512
MLA_ROPE_DIM = 64
_FAILED = ("wont-start", "weights-dont-fit")


@frozen
class CompareEntry:
    """One column of the comparison: a label, a model, and its checkpoint's exact bytes if known."""

    label: str
    model: ModelShape
    exact_weights: SafetensorsWeights | None = None


@frozen
class CompareRow:
    """One model (or attention variant) of ``kvcalc compare``."""

    label: str
    model: str
    #: the engine this row is planned (or, without a GPU, sized) for
    engine: str
    attention_kind: str
    num_layers: int
    #: KV heads of the attention layers (``"8"``, ``"8/4"`` when they differ, ``"latent 576"``)
    kv_heads: str
    #: the cache format, resolved (``auto`` → the model's dtype, or what the engine picks)
    kv_cache_dtype: str
    #: per GPU (per tensor-parallel rank), as the engine stores it when planned
    kv_bytes_per_token: int
    #: one request of ``max_model_len`` tokens in the layers' own bytes per tensor-parallel rank
    #: (windows capped, state added, no block rounding); None for a format only the engine sizes
    layer_kv_bytes_per_request: int | None
    #: the same request in the engine's blocks per GPU (what its concurrency divides by); None
    #: without a GPU, except for a format only the engine sizes
    engine_kv_bytes_per_request: int | None
    #: per GPU; None when the weights cannot be counted from the config
    weights_bytes: int | None
    num_parameters: int | None
    #: None without a GPU
    max_concurrency: float | None
    kv_cache_tokens: int | None
    fits: bool | None
    verdict: str | None
    #: "fits", "doesn't fit" or "no GPU given"
    status: str
    reason: str = ""


@frozen
class Comparison:
    """The answer of ``kvcalc compare``. Field names are the ``--json`` keys."""

    max_model_len: int
    #: the catalog's name for the GPU (``H100-SXM`` for ``--gpu H100``)
    gpu: str | None
    gpu_memory_bytes: int | None
    #: the first of ``engines``
    engine: str
    #: every engine compared (``--engine`` repeated): one row per model and engine
    engines: tuple[str, ...]
    tensor_parallel_size: int
    rows: tuple[CompareRow, ...]
    notes: tuple[str, ...] = ()
    #: the request as given (``kv_cache_dtype`` as typed, e.g. ``auto``; each row has the resolved one)
    inputs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _engine_row(entry: CompareEntry, length: int, name: str, tp: int, engine: str) -> CompareRow:
    """A no-GPU row for a format only the engine sizes: its per-token and per-request bytes."""
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    p = get_engine(engine).plan_kv_cache(EngineRequest(model=entry.model, kv_cache_dtype=name, max_model_len=length,
                                                       tensor_parallel_size=tp, available_kv_bytes=1 << 50))  # fmt: skip
    model = entry.model
    return CompareRow(
        label=entry.label, model=model.name, engine=str(engine), attention_kind=model.attention_kind,
        num_layers=model.num_layers, kv_heads=kv_heads_text(model), kv_cache_dtype=p.kv_cache_dtype, kv_bytes_per_token=p.kv_bytes_per_token,
        layer_kv_bytes_per_request=None, engine_kv_bytes_per_request=p.bytes_per_request,
        weights_bytes=None, num_parameters=None,
        max_concurrency=None, kv_cache_tokens=None, fits=None, verdict=None, status=f"no GPU given ({engine})",
    )  # fmt: skip


def kv_heads_text(model: ModelShape) -> str:
    mla = [layer for layer in model.layers if isinstance(layer, MLALatent)]  # kind "mla"
    if mla:
        return f"latent {mla[0].latent_dim}"
    heads = sorted({layer.num_kv_heads for layer in model.layers if layer.kind in ATTENTION_KINDS},
                   reverse=True)  # fmt: skip
    return "/".join(str(h) for h in heads) or "-"


def _no_gpu_row(
    entry: CompareEntry, length: int, kv_cache_dtype: str, tp: int, engine: str = "vllm"
) -> CompareRow:
    from kvcalc.engines.formats import resolve_generic
    from kvcalc.estimate.weights import weight_bytes
    from kvcalc.model.dtypes import parse_cache_dtype

    model = entry.model
    name = resolve_generic(engine, kv_cache_dtype)  # int4 → the engine's own format
    try:
        layout = parse_cache_dtype(name)
    except InputError:  # an engine's own format (QuantizedCache, quant_policy): the engine sizes it
        return _engine_row(entry, length, name, tp, engine)
    rank = model.with_cache_dtype(layout).per_rank(tp)
    weights: int | None
    params: int | None
    try:
        w = weight_bytes(model, tensor_parallel_size=tp)
        weights, params = w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu, w.num_parameters
    except KvcalcError:
        weights = params = None
    return CompareRow(
        label=entry.label, model=model.name, engine=str(engine), attention_kind=model.attention_kind,
        num_layers=model.num_layers, kv_heads=kv_heads_text(model), kv_cache_dtype=(layout or model.dtype).name,
        kv_bytes_per_token=rank.bytes_per_token, layer_kv_bytes_per_request=rank.bytes_for(length),
        engine_kv_bytes_per_request=None, weights_bytes=weights, num_parameters=params,
        max_concurrency=None, kv_cache_tokens=None, fits=None, verdict=None, status="no GPU given",
    )  # fmt: skip


def _planned_row(entry: CompareEntry, inputs: PlanInputs) -> CompareRow:
    from kvcalc.planning.core import plan

    model = entry.model
    r = plan(model, inputs, exact_weights=entry.exact_weights, with_suggestions=False)
    fits = r.verdict not in _FAILED
    return CompareRow(
        label=entry.label, model=model.name, engine=str(r.engine), attention_kind=model.attention_kind,
        num_layers=model.num_layers, kv_heads=kv_heads_text(model), kv_cache_dtype=r.kv_cache_dtype, kv_bytes_per_token=r.kv_bytes_per_token,
        layer_kv_bytes_per_request=r.layer_kv_bytes_per_request,
        engine_kv_bytes_per_request=r.engine_kv_bytes_per_request, weights_bytes=r.weights_bytes,
        num_parameters=r.num_parameters,
        max_concurrency=r.max_concurrency if r.verdict != "weights-dont-fit" and r.available_kv_bytes > 0 else 0.0,
        kv_cache_tokens=r.kv_cache_tokens if fits else 0, fits=fits, verdict=r.verdict,
        status="fits" if fits else "doesn't fit", reason="" if fits else r.verdict_reason,
    )  # fmt: skip


def compare(entries: Sequence[CompareEntry], inputs: PlanInputs | None, *, max_model_len: int,
            kv_cache_dtype: str = "auto", engine: str = "vllm", tensor_parallel_size: int = 1,
            engines: Sequence[str] = ()) -> Comparison:  # fmt: skip
    """Every entry at ``max_model_len`` tokens per request; planned on ``inputs``' GPU if given (pure).

    ``engines`` (several): one row per entry and engine, labelled ``"entry (engine)"``; without
    them, the one engine of ``inputs`` (or ``engine`` without a GPU)."""
    from kvcalc.engines.names import engine_name

    if not entries:
        raise InputError("no models to compare", hint="kvcalc compare MODEL MODEL ... (see `kvcalc models`)",
                         code="missing-model")  # fmt: skip
    if (
        isinstance(max_model_len, bool)
        or not isinstance(max_model_len, int)
        or not 1 <= max_model_len <= MAX_COUNT
    ):
        raise InputError(f"max_model_len must be an integer from 1 to {MAX_COUNT:,}, got "
                         f"{short_int(max_model_len) if isinstance(max_model_len, int) else repr(max_model_len)}",
                         code="invalid-input")  # fmt: skip
    base = replace(inputs, max_model_len=max_model_len) if inputs is not None else None
    names = tuple(dict.fromkeys(str(e) for e in engines)) or (str(base.engine if base else engine),)
    several = len(names) > 1
    rows, notes = [], []
    for entry in entries:
        for name in names:
            if base is None:
                row = _no_gpu_row(entry, max_model_len, kv_cache_dtype, tensor_parallel_size, name)
            else:
                row = _planned_row(
                    entry, replace(base, engine=engine_name(name)) if several else base
                )
            rows.append(replace(row, label=f"{entry.label} ({name})") if several else row)
        if max_model_len > entry.model.max_model_len:
            notes.append(f"{entry.label}: {max_model_len:,} tokens exceed its max_model_len "
                         f"{entry.model.max_model_len:,} (vLLM refuses unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)")  # fmt: skip
    from kvcalc.model.gpus import get_gpu

    src = base
    asked: dict[str, Any] = {"max_model_len": max_model_len, "gpu": src.gpu if src else None,
             "gpu_memory_bytes": src.gpu_memory_bytes if src else None,
             "engine": names[0],
             "kv_cache_dtype": src.kv_cache_dtype if src else kv_cache_dtype,
             "tensor_parallel_size": src.tensor_parallel_size if src else tensor_parallel_size}  # fmt: skip
    return Comparison(
        max_model_len=max_model_len, gpu=get_gpu(src.gpu).name if src and src.gpu else None,
        gpu_memory_bytes=asked["gpu_memory_bytes"], engine=names[0], engines=names,
        tensor_parallel_size=asked["tensor_parallel_size"],
        rows=tuple(rows), notes=tuple(notes), inputs=asked,
    )  # fmt: skip


# -- attention variants ---------------------------------------------------------------------------
def _with_kv_heads(model: ModelShape, kv_heads: int, tag: str) -> ModelShape:
    layers = tuple(replace(layer, kv_heads=kv_heads) if isinstance(layer, FullAttention) else layer
                   for layer in model.layers)  # fmt: skip
    weights = model.weights
    if weights is not None and getattr(weights, "attention", None) is not None:
        weights = replace(weights, attention=replace(weights.attention, num_kv_heads=kv_heads))
    return replace(model, name=f"{model.name} [{tag}]", layers=layers, weights=weights)


def _with_mla(model: ModelShape, head_dim: int) -> ModelShape:
    from kvcalc.hfconfig.weight_shape_extra import MlaWeights

    heads = model.num_attention_heads

    def latent(layer):
        return MLALatent(dtype=layer.dtype, kv_lora_rank=MLA_KV_LORA_RANK, rope_dim=MLA_ROPE_DIM,
                         num_heads=heads, qk_nope_dim=head_dim, v_head_dim=head_dim)  # fmt: skip

    layers = tuple(
        latent(layer) if isinstance(layer, FullAttention) else layer for layer in model.layers
    )
    weights = model.weights
    if weights is not None and getattr(weights, "attention", None) is not None:
        mla = MlaWeights(num_heads=heads, q_lora_rank=0, kv_lora_rank=MLA_KV_LORA_RANK,
                         qk_nope_head_dim=head_dim, qk_rope_head_dim=MLA_ROPE_DIM, v_head_dim=head_dim)  # fmt: skip
        mixers = tuple("mla" if m == "attention" else m for m in weights.mixers)
        weights = replace(weights, mixers=mixers, attention=None, mla=mla, rotary_dim=MLA_ROPE_DIM)
    return replace(model, name=f"{model.name} [MLA]", layers=layers, weights=weights)


def attention_variants(model: ModelShape) -> tuple[CompareEntry, ...]:
    """MHA, the model's own GQA, MQA and MLA from one model's dimensions (pure)."""
    attn = [layer for layer in model.layers if isinstance(layer, FullAttention)]
    if not attn or model.is_mla:
        raise InputError(f"{model.name} has no standard attention layers to vary ({model.attention_kind})",
                         hint="--attention-variants takes an MHA/GQA/MQA model such as llama-3.1-8b",
                         code="unsupported-model")  # fmt: skip
    heads = model.num_attention_heads
    own = kv_heads_text(model)
    head_dim = max(layer.head_dim_k for layer in attn)
    sliding = any(layer.window is not None for layer in attn)
    mla_note = " (windows dropped)" if sliding else ""
    return (
        CompareEntry(label=f"MHA (kv={heads})", model=_with_kv_heads(model, heads, "MHA")),
        CompareEntry(
            label=f"{model.attention_kind.split(',')[0]} (kv={own}, as published)", model=model
        ),
        CompareEntry(label="MQA (kv=1)", model=_with_kv_heads(model, 1, "MQA")),
        CompareEntry(
            label=f"MLA ({MLA_KV_LORA_RANK}+{MLA_ROPE_DIM}){mla_note}",
            model=_with_mla(model, head_dim),
        ),
    )
