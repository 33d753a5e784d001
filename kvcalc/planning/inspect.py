"""``kvcalc inspect``: a model's cache layout and its engine-independent KV bytes.

:func:`inspect_model` is pure given a :class:`~kvcalc.model.shape.ModelShape`; it returns an
:class:`InspectResult` that both the rich table and ``--json`` render.
"""

from __future__ import annotations

from dataclasses import asdict, field
from typing import TYPE_CHECKING, Any

from kvcalc.errors import InputError, KvcalcError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CACHE_DTYPES, CacheDtype, parse_cache_dtype
from kvcalc.model.layouts import LayerKind, RecurrentState
from kvcalc.model.shape import ModelShape

if TYPE_CHECKING:
    from kvcalc.sources.loaded import LoadedModel


@frozen
class LayerInfo:
    """One layer's cache layout (in ``layers``) or a group of identical layers (in
    ``layer_groups``, where ``indices`` lists which)."""

    kind: LayerKind
    count: int
    indices: tuple[int, ...]
    num_kv_heads: int
    head_dim_k: int
    head_dim_v: int
    window: int | None
    #: per layer, as if it held every token
    bytes_per_token: int
    #: per layer, constant per sequence (recurrent layers)
    state_bytes: int
    #: the state tensors' shapes, for recurrent layers
    state_shapes: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    #: the recurrent mixer (``mamba1``, ``mamba2``, ``gated_deltanet``, ``short_conv``, ``kda``,
    #: ``linear_attention``, ``attention+mamba2`` for Falcon-H1), None for other layers
    mixer: str | None = None


@frozen
class DtypeRow:
    kv_cache_dtype: str
    kv_bytes_per_token: int
    #: one request at ``max_model_len`` in the layers' own bytes (windows capped, state added)
    layer_kv_bytes_per_request: int


@frozen
class EngineFormatRow:
    """One engine's own 4- or 8-bit cache format, sized by that engine's plan (its own accounting:
    blocks, scales and zero points, residuals) for one sequence at ``max_model_len``, TP 1."""

    engine: str
    #: the engine's own name for it (``--kv-cache-dtype``)
    kv_cache_dtype: str
    bits: int
    kv_bytes_per_token: int | None
    #: one request at ``max_model_len`` in this engine's accounting (its blocks or cells)
    engine_kv_bytes_per_request: int | None
    #: why the engine refuses it for this model ("" when it takes it)
    refused: str = ""


@frozen
class InspectResult:
    """The answer of ``kvcalc inspect``. Field names are the ``--json`` keys."""

    model: str
    #: where the config came from (``bundled config``, ``hub: ORG/NAME``, ``path: ...``)
    model_source: str
    model_type: str
    architectures: tuple[str, ...]
    attention_kind: str
    num_layers: int
    model_dtype: str
    kv_cache_dtype: str
    max_model_len: int
    default_max_model_len: int
    #: one entry per layer, in order
    layers: tuple[LayerInfo, ...]
    #: identical layers grouped, in order of first appearance
    layer_groups: tuple[LayerInfo, ...]
    #: all layers, as if each held every token
    kv_bytes_per_token: int
    #: one request at ``max_model_len`` in the layers' own bytes: windows capped, recurrent state
    #: added, no block rounding (an engine's blocks can hold more: ``kvcalc plan``'s
    #: ``engine_kv_bytes_per_request``)
    layer_kv_bytes_per_request: int
    #: the layers' constant bytes per request (any length): recurrent state, and a cross-attention
    #: layer's K/V of the encoder's tokens (Whisper)
    state_bytes_per_request: int
    by_dtype: tuple[DtypeRow, ...]
    #: every engine's own 4-/8-bit formats (what ``--kv-cache-dtype int4``/``int8`` mean per engine)
    low_bit_by_engine: tuple[EngineFormatRow, ...] = ()
    provenance: dict[str, str] = field(default_factory=dict)
    config_keys: dict[str, Any] = field(default_factory=dict)
    #: exact weights from safetensors metadata, when known (filled by the caller)
    weights: dict[str, Any] | None = None
    #: the registered architecture family that read the layout, if any
    family: str | None = None
    #: False when an unverified config was read as plain attention (``--trust-layout``)
    layout_validated: bool = True
    #: what kept the layout from being verified (model type or config keys)
    unverified_keys: tuple[str, ...] = ()
    #: config keys the cache layout did not read
    ignored_keys: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["layers"] = [_single_layer_dict(layer) for layer in self.layers]
        data["layer_groups"] = [_layer_dict(layer) for layer in self.layer_groups]
        return data


def _single_layer_dict(layer: LayerInfo) -> dict[str, Any]:
    data = {"index": layer.indices[0]}
    data.update(_layer_dict(layer))
    del data["count"], data["indices"]
    return data


def _layer_dict(layer: LayerInfo) -> dict[str, Any]:
    data = asdict(layer)
    data["indices"] = list(layer.indices)
    data["state_shapes"] = [
        {"name": n, "shape": list(s), "dtype": d} for n, s, d in layer.state_shapes
    ]
    return data


def _layer_infos(model: ModelShape, *, grouped: bool) -> tuple[LayerInfo, ...]:
    from kvcalc.model.shape import LayerGroup

    infos = []
    if grouped:
        groups = model.groups()
    else:
        groups = tuple(LayerGroup(layout=lay, indices=(i,)) for i, lay in enumerate(model.layers))
    for group in groups:
        layout = group.layout
        shapes: tuple[tuple[str, tuple[int, ...], str], ...] = ()
        if isinstance(layout, RecurrentState):  # the layouts of kind "recurrent"
            shapes = tuple((t.name, t.shape, t.dtype.name) for t in layout.state_tensors())
        infos.append(
            LayerInfo(
                kind=layout.kind,
                count=group.count,
                indices=group.indices,
                num_kv_heads=layout.num_kv_heads,
                head_dim_k=layout.head_dim_k,
                head_dim_v=layout.head_dim_v,
                window=layout.window,
                bytes_per_token=layout.bytes_per_token,
                state_bytes=layout.state_bytes,
                state_shapes=shapes,
                mixer=getattr(layout, "variant", None)
                if layout.kind is LayerKind.RECURRENT
                else None,
            )
        )
    return tuple(infos)


def applicable_dtypes(model: ModelShape) -> tuple[CacheDtype, ...]:
    """Cache formats this model's layers can be stored in (block formats need whole blocks)."""
    found = []
    for dtype in CACHE_DTYPES.values():
        if dtype.mla_record_bytes and not model.is_mla:
            continue
        try:
            _ = model.with_cache_dtype(dtype).bytes_per_token
        except KvcalcError:
            continue
        found.append(dtype)
    return tuple(found)


def low_bit_rows(model: ModelShape, length: int) -> tuple[EngineFormatRow, ...]:
    """Each engine's 4-/8-bit formats, planned by that engine for one sequence of ``length``."""
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest
    from kvcalc.engines.formats import GENERIC_BITS, LOW_BIT
    from kvcalc.planning.inputs import MAX_COUNT

    if (
        length > MAX_COUNT
    ):  # engines plan lengths up to kvcalc's limit; the layer bytes above are exact
        return ()
    rows = []
    for engine, table in LOW_BIT.items():
        for generic, entry in table.items():
            for name in entry.formats:
                request = EngineRequest(model=model, kv_cache_dtype=name, max_model_len=length,
                                        available_kv_bytes=1 << 50, gpu_compute_capability=(10, 0))  # fmt: skip
                try:
                    p = get_engine(engine).plan_kv_cache(request)
                except KvcalcError as exc:
                    rows.append(EngineFormatRow(engine=engine, kv_cache_dtype=name, bits=GENERIC_BITS[generic],
                                                kv_bytes_per_token=None, engine_kv_bytes_per_request=None,
                                                refused=exc.message))  # fmt: skip
                    continue
                rows.append(EngineFormatRow(engine=engine, kv_cache_dtype=name, bits=GENERIC_BITS[generic],
                                            kv_bytes_per_token=p.kv_bytes_per_token,
                                            engine_kv_bytes_per_request=p.bytes_per_request))  # fmt: skip
    return tuple(rows)


def inspect_model(
    model: ModelShape,
    *,
    kv_cache_dtype: str = "auto",
    max_model_len: int | None = None,
    source: str = "",
) -> InspectResult:
    """Layout and KV bytes of ``model`` stored as ``kv_cache_dtype``, per sequence at ``max_model_len``."""
    length = model.max_model_len if max_model_len is None else max_model_len
    if length < 1:
        raise InputError(f"--max-model-len must be at least 1, got {length}", code="invalid-length")
    from kvcalc.engines.formats import require_engine

    require_engine(kv_cache_dtype)
    cached = model.with_cache_dtype(parse_cache_dtype(kv_cache_dtype))
    rows = tuple(
        DtypeRow(
            kv_cache_dtype=d.name,
            kv_bytes_per_token=(m := model.with_cache_dtype(d)).bytes_per_token,
            layer_kv_bytes_per_request=m.bytes_for(length),
        )
        for d in applicable_dtypes(model)
    )
    return InspectResult(
        model=model.name,
        model_source=source,
        model_type=model.model_type,
        architectures=model.architectures,
        attention_kind=model.attention_kind,
        num_layers=model.num_layers,
        model_dtype=model.dtype.name,
        kv_cache_dtype=cached.kv_cache_dtype.name,
        max_model_len=length,
        default_max_model_len=model.max_model_len,
        layers=_layer_infos(cached, grouped=False),
        layer_groups=_layer_infos(cached, grouped=True),
        kv_bytes_per_token=cached.bytes_per_token,
        layer_kv_bytes_per_request=cached.bytes_for(length),
        state_bytes_per_request=cached.state_bytes_per_sequence,
        by_dtype=rows,
        low_bit_by_engine=low_bit_rows(model, length),
        provenance=dict(model.provenance),
        config_keys={k: v for k, v in model.config_keys.items()},
        family=model.family,
        layout_validated=model.layout_validated,
        unverified_keys=model.unverified_keys,
        ignored_keys=model.ignored_keys,
    )


def inspect_loaded(
    loaded: LoadedModel,
    *,
    kv_cache_dtype: str = "auto",
    max_model_len: int | None = None,
    with_weights: bool = True,
) -> InspectResult:
    """:func:`inspect_model` for a resolved model reference, with exact weights when known."""
    from dataclasses import replace

    result = inspect_model(
        loaded.shape,
        kv_cache_dtype=kv_cache_dtype,
        max_model_len=max_model_len,
        source="bundled config"
        if loaded.source == "bundled"
        else f"{loaded.source}: {loaded.location}",
    )
    if not with_weights:
        return result
    meta = loaded.weights_metadata()
    if meta is not None:
        return replace(result, weights=meta.to_dict())
    return replace(result, weights=estimated_weights(loaded.shape))


def estimated_weights(model: ModelShape) -> dict[str, Any] | None:
    """The config-based weight estimate in the same shape as the safetensors summary."""
    from kvcalc.estimate.weights import weight_bytes

    try:
        est = weight_bytes(model)
    except KvcalcError:
        return None
    return {
        "total_bytes": est.weights_bytes,
        "num_parameters": est.num_parameters,
        "by_dtype": {
            k: {"num_parameters": None, "total_bytes": v} for k, v in est.by_dtype.items()
        },
        "experts_bytes": est.experts_bytes,
        "non_expert_bytes": est.weights_bytes - est.experts_bytes,
        "num_tensors": None,
        "files": [],
        "source": "config estimate",
    }
