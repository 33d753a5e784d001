"""vLLM's KV-cache tensors (V1 ``gpu_model_runner``: ``_allocate_kv_cache_tensors`` and
``_reshape_kv_cache_tensors``), as :class:`~kvcalc.verify.spec.BufferSpec` lists. Pure: no torch.

- one KV-cache group (all layers alike, or one UniformType group): one tensor per layer of
  ``page_bytes × num_blocks``; FlashAttention views it as ``(2, num_blocks, block_size, kv_heads,
  head_size)``, MLA as ``(num_blocks, block_size, kv_lora_rank + rope)``, a Mamba/GDN layer as one
  strided view per state tensor (``(num_blocks, *state_shape)`` with the page as block stride);
- several groups (hybrid models): ``group_size`` raw tensors of ``page_bytes × num_blocks``; tensor
  *i* is shared by the *i*-th layer of every group, each layer viewing the whole tensor;
- fp8 is stored as ``uint8``; formats with per-row scales or packed values (int8/fp8 per token-head,
  int4, nvfp4, ``fp8_ds_mla``) are raw ``uint8`` rows of ``CacheDtype.row_bytes`` per head.

Worked example (Gemma-3-1B, bf16, 4 blocks): 22 sliding + 4 full layers; 22 ≥ 1.5·4, so group_size
4 → 6 sliding groups (2 padding layers) + 1 full group = 7 groups sharing 4 tensors of
2·16·1·256·2 B × 4 blocks = 65,536 B each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan
from kvcalc.engines.vllm.engine import VllmEngine
from kvcalc.engines.vllm.setup import resolve_setup
from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import CompressedSparseAttention, SparseMLA
from kvcalc.model.layouts import FullAttention, Layout, MLALatent, RecurrentState
from kvcalc.model.shape import ModelShape
from kvcalc.verify.spec import (
    ITEMSIZE,
    AllocationPlan,
    BufferSpec,
    PredictedComponent,
    VerifyOptions,
    ViewSpec,
    contiguous_strides,
)

if TYPE_CHECKING:
    from kvcalc.planning.result import CapacityPlan

LAYOUT = "vLLM V1: per-layer (or per shared group slot) tensors of num_blocks pages"


def vllm_allocation(model: ModelShape, opts: VerifyOptions, num_blocks: int) -> AllocationPlan:
    request = EngineRequest(
        model=model,
        kv_cache_dtype=opts.kv_cache_dtype,
        engine_version=opts.engine_version,
        max_model_len=opts.max_model_len or model.max_model_len,
        tensor_parallel_size=opts.tensor_parallel_size,
        block_size=opts.block_size,
        available_kv_bytes=0,
        extra={**dict(opts.engine_options), "num_gpu_blocks_override": num_blocks},
    )
    plan = VllmEngine().plan_kv_cache(request)
    if not plan.groups:
        raise InputError(
            f"{model.name} has no KV cache in vLLM (attention-free)", code="nothing-to-verify"
        )
    layers = resolve_setup(request).model.layers  # per rank, cache dtype applied
    _refuse_unbuilt(plan, layers)
    return build_from_plan(plan, layers)


def _refuse_unbuilt(plan: KvCachePlan, layers: tuple[Layout, ...]) -> None:
    """Layouts whose vLLM tensors are not built here: the sparse-attention indexer beside the MLA
    latent, DeepSeek-V4's caches, and attention pages padded to a larger group page."""
    if any(isinstance(x, (SparseMLA, CompressedSparseAttention)) for x in layers):
        raise InputError(
            "verify does not build vLLM's sparse-attention caches (indexer keys, compressed "
            "latents) yet", code="unsupported-model",
        )  # fmt: skip
    for group in plan.groups:
        if group.uniform_type:
            continue
        real = {layers[i].bytes_per_token * group.block_size for i in group.layer_indices}
        if real != {group.page_bytes} and all(
            isinstance(layers[i], FullAttention) for i in group.layer_indices
        ):
            raise InputError(
                "verify does not build attention pages padded to a larger group page yet",
                code="unsupported-model",
            )


def build_from_plan(plan: KvCachePlan | CapacityPlan, layers: tuple[Layout, ...]) -> AllocationPlan:
    """Buffers and predicted components for ``plan`` (its ``num_blocks``), layers per rank: the
    engine's plan, or ``verify --fill``'s whole capacity plan (its ``to_dict`` is recorded)."""
    nb = plan.num_blocks
    buffers: list[BufferSpec] = []
    predicted: dict[str, list[int]] = {}
    for group in plan.groups:
        for name, share in _group_prediction(group, layers, nb).items():
            entry = predicted.setdefault(name, [0, 0])
            entry[0] += share
            entry[1] += len(group.layer_indices)
    if len(plan.groups) == 1:
        group = plan.groups[0]
        for i in group.layer_indices:
            page = _layer_page(group, layers, i)
            buffers.append(_own_buffer(i, layers[i], _kind(group), group.block_size, nb, page))
    else:
        buffers += _shared_buffers(plan.groups, layers, nb)
    components = tuple(
        PredictedComponent(name=k, predicted_bytes=v[0], num_layers=v[1])
        for k, v in predicted.items()
    )
    num_layers = sum(len(g.layer_indices) for g in plan.groups)
    notes = [
        f"{len(buffers)} tensors for {num_layers} layers, {len(plan.groups)} KV-cache group(s)"
    ]
    return AllocationPlan(
        engine="vllm", engine_version=plan.engine_version, kv_cache_dtype=plan.kv_cache_dtype,
        layout=LAYOUT, block_size=plan.block_size, num_blocks=nb, tokens=nb * plan.block_size,
        predicted_bytes=plan.kv_cache_bytes, components=components, buffers=tuple(buffers),
        notes=tuple(notes), plan=plan.to_dict(),
    )  # fmt: skip


# -- predictions (the engine's pages, split by the layer's widths) ------------------------------
def _kind(group: KvCacheGroup) -> str:
    return group.kind


def _layer_page(group: KvCacheGroup, layers: tuple[Layout, ...], index: int) -> int:
    """One layer's page: the group page, or its share of a UniformType group's summed page."""
    if not group.uniform_type:
        return group.page_bytes
    total = sum(layers[i].bytes_per_token for i in group.layer_indices)
    return group.page_bytes * layers[index].bytes_per_token // total


def _group_prediction(group: KvCacheGroup, layers: tuple[Layout, ...], nb: int) -> dict[str, int]:
    kind = _kind(group)
    out: dict[str, int] = {}
    for i in group.layer_indices:
        page = _layer_page(group, layers, i)
        for part, share in _page_split(layers[i], page).items():
            name = f"{kind} {part}"
            out[name] = out.get(name, 0) + share * nb
    return out


def _page_split(layer: Layout, page: int) -> dict[str, int]:
    """The page's bytes by part: K/V in proportion to their row bytes, states, padding."""
    if isinstance(layer, RecurrentState):
        parts = {t.name: t.nbytes for t in layer.state_tensors()}
        parts["padding"] = page - sum(parts.values())
        return {k: v for k, v in parts.items() if v}
    if isinstance(layer, MLALatent):
        return {"latent": page}
    if isinstance(layer, FullAttention):
        k, v = layer.dtype.row_bytes(layer.k_dim), layer.dtype.row_bytes(layer.v_dim)
        return {"K": page * k // (k + v), "V": page * v // (k + v)}
    raise InputError(
        f"layer kind {layer.kind!r} has no vLLM cache layout", code="unsupported-model"
    )


# -- buffers and views --------------------------------------------------------------------------
def _element_dtype(layer: Layout) -> str | None:
    """The torch dtype holding one value, or None for raw rows (scales, packed values)."""
    d = layer.dtype
    if d.block_values == 1 and not d.row_scale_bytes and not d.mla_record_bytes:
        return d.torch_name
    return None


def _attention_views(
    index: int, layer: FullAttention, kind: str, bs: int, nb: int, exact: bool
) -> list[ViewSpec]:
    h = layer.kv_heads
    dtype = _element_dtype(layer)
    if dtype is not None and layer.k_dim == layer.v_dim:  # (2, nb, bs, h, d): K = [0], V = [1]
        shape = (nb, bs, h, layer.k_dim)
        size = nb * bs * h * layer.k_dim
        return [ViewSpec(component=f"{kind} K", layer=index, torch_dtype=dtype, shape=shape, exact=exact),
                ViewSpec(component=f"{kind} V", layer=index, torch_dtype=dtype, shape=shape,
                         offset=size, exact=exact)]  # fmt: skip
    # raw rows: per token and head, K's row bytes then V's (scales / packing included)
    k, v = layer.dtype.row_bytes(layer.k_dim), layer.dtype.row_bytes(layer.v_dim)
    stride = (bs * h * (k + v), h * (k + v), k + v, 1)
    return [ViewSpec(component=f"{kind} K", layer=index, torch_dtype="uint8", shape=(nb, bs, h, k),
                     stride=stride, exact=exact),
            ViewSpec(component=f"{kind} V", layer=index, torch_dtype="uint8", shape=(nb, bs, h, v),
                     stride=stride, offset=k, exact=exact)]  # fmt: skip


def _mla_view(index: int, layer: MLALatent, bs: int, nb: int, exact: bool) -> ViewSpec:
    dtype = _element_dtype(layer)
    width = layer.latent_dim if dtype else layer.bytes_per_token  # 656-byte records, raw rows
    return ViewSpec(component="mla latent", layer=index, torch_dtype=dtype or "uint8",
                    shape=(nb, bs, width), exact=exact)  # fmt: skip


def _state_views(
    index: int, layer: RecurrentState, kind: str, nb: int, page: int
) -> list[ViewSpec]:
    """vLLM's mamba views: each state tensor strided by the (padded) page, one after the other."""
    views, pos = [], 0
    for t in layer.state_tensors():
        dtype = t.dtype.torch_name
        size = ITEMSIZE[dtype]
        if page % size or pos % size:
            raise InputError(
                f"layer {index}: state {t.name} is not aligned in its page",
                code="unsupported-model",
            )
        views.append(ViewSpec(component=f"{kind} {t.name}", layer=index, torch_dtype=dtype,
                              shape=(nb, *t.shape), stride=(page // size, *contiguous_strides(t.shape)),
                              offset=pos // size))  # fmt: skip
        pos += t.nbytes
    if page > pos:
        views.append(ViewSpec(component=f"{kind} padding", layer=index, torch_dtype="uint8",
                              shape=(nb, page - pos), stride=(page, 1), offset=pos))  # fmt: skip
    return views


def _views(
    index: int, layer: Layout, kind: str, bs: int, nb: int, page: int, exact: bool
) -> list[ViewSpec]:
    if isinstance(layer, RecurrentState):
        return _state_views(index, layer, kind, nb, page)
    if isinstance(layer, MLALatent):
        return [_mla_view(index, layer, bs, nb, exact)]
    if isinstance(layer, FullAttention):
        return _attention_views(index, layer, kind, bs, nb, exact)
    raise InputError(
        f"layer kind {layer.kind!r} has no vLLM cache layout", code="unsupported-model"
    )


def _own_buffer(index: int, layer: Layout, kind: str, bs: int, nb: int, page: int) -> BufferSpec:
    """A layer's own tensor, in the shape and dtype the attention backend gives it."""
    views = tuple(_views(index, layer, kind, bs, nb, page, exact=True))
    first = views[0]
    if (
        isinstance(layer, FullAttention) and first.stride is None
    ):  # FlashAttention (2, nb, bs, h, d)
        return BufferSpec(
            name=f"layer {index}",
            shape=(2, *first.shape),
            torch_dtype=first.torch_dtype,
            views=views,
        )
    if isinstance(layer, MLALatent):
        return BufferSpec(
            name=f"layer {index}", shape=first.shape, torch_dtype=first.torch_dtype, views=views
        )
    return BufferSpec(name=f"layer {index}", shape=(nb * page,), torch_dtype="uint8", views=views)


def _shared_buffers(
    groups: tuple[KvCacheGroup, ...], layers: tuple[Layout, ...], nb: int
) -> list[BufferSpec]:
    pages = {g.page_bytes for g in groups}
    if len(pages) != 1:
        raise InputError(f"hybrid groups with different pages {sorted(pages)}: vLLM unifies them",
                         code="unsupported-model")  # fmt: skip
    page = pages.pop()
    group_size = max(g.num_layers for g in groups)
    buffers = []
    for slot in range(group_size):
        views: list[ViewSpec] = []
        for g in groups:
            if slot < len(g.layer_indices):
                i = g.layer_indices[slot]
                views += _views(i, layers[i], _kind(g), g.block_size, nb, page, exact=True)
        buffers.append(BufferSpec(name=f"shared tensor {slot}", shape=(nb * page,), torch_dtype="uint8",
                                  views=tuple(views)))  # fmt: skip
    return buffers
