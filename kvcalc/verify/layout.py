"""Which tensors each engine allocates for its KV cache, and what kvcalc predicts for them. Pure.

:func:`allocation_plan` asks the engine model (``kvcalc.engines``) for a plan at a small, chosen
size and lays out the tensors the engine's own code would allocate for it (``engine-accounting.md``),
in the layout the engine's traits name (``EngineTraits.cache_tensors``; no engine names here):

- ``paged`` (vLLM): see :mod:`kvcalc.verify.layout_vllm` (``num_blocks`` pages per layer or group slot);
- ``per-layer`` (transformers ``DynamicCache``/``StaticCache``): per layer K and V
  ``[batch, kv_heads, tokens, head_dim]``, sliding layers capped at their window (``window − 1``
  dynamic, ``window`` static); transformers 5 caches DeepSeek's latent as K ``[b, 1, t, 512]`` and
  the rope part as V ``[b, 1, t, 64]``; linear-attention layers keep a conv state
  ``[b, conv_dim, conv_kernel]`` (the whole kernel, where vLLM keeps ``kernel − 1``) and a
  recurrent state (float32 for Gated DeltaNet, whatever the model dtype; both measured with
  ``--run`` on transformers 5.24, CPU; the ``hf`` engine model predicts neither yet);
- ``cells`` (llama.cpp): per layer K and V rows of ``heads · head_dim`` values for every cell; quantized
  types as raw ``uint8`` blocks (q8_0: 32 values in 34 bytes); MLA has no V tensor;
- ``token-pool`` (SGLang): the token pool, per layer K and V ``[tokens + page_size, kv_heads, head_dim]``
  (MLA one ``[tokens + page, 1, kv_lora_rank + rope]`` buffer; hybrid SWA layers a smaller pool).
"""

from __future__ import annotations

from typing import cast

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, KvCachePlan
from kvcalc.engines.hf.quantized import NAMED
from kvcalc.engines.llamacpp.recurrent import rows as recurrent_rows
from kvcalc.engines.names import CacheTensors, EngineName, traits
from kvcalc.errors import InputError
from kvcalc.model.dtypes import CACHE_DTYPES, FP16, CacheDtype, parse_cache_dtype
from kvcalc.model.layouts import (
    WINDOWED_KINDS,
    FullAttention,
    LayerKind,
    Layout,
    MLALatent,
    RecurrentState,
)
from kvcalc.model.shape import ModelShape
from kvcalc.verify.spec import (
    DEFAULT_NUM_BLOCKS,
    DEFAULT_TOKENS,
    AllocationPlan,
    BufferSpec,
    PredictedComponent,
    VerifyOptions,
    ViewSpec,
)

#: engines whose cache layout verify knows
ENGINES = tuple(n.value for n in EngineName if traits(n).cache_tensors is not None)
_HUGE = 1 << 50  # "memory is no object": the size is fixed by blocks/tokens instead


def allocation_plan(model: ModelShape, opts: VerifyOptions) -> AllocationPlan:
    """The tensors ``opts.engine`` allocates for ``model`` at a small size, with predictions: laid
    out the way the engine's traits say its cache tensors are (``EngineTraits.cache_tensors``)."""
    layout = traits(opts.engine).cache_tensors
    if layout is None:
        raise InputError(
            f"verify does not know {opts.engine}'s cache layout",
            hint="choose one of: " + ", ".join(ENGINES),
            code="unsupported-engine",
        )
    return _LAYOUTS[layout](model, opts)


def _paged(model: ModelShape, opts: VerifyOptions) -> AllocationPlan:
    from kvcalc.verify.layout_vllm import vllm_allocation

    return vllm_allocation(model, opts, opts.num_blocks or DEFAULT_NUM_BLOCKS)


def _request(
    model: ModelShape, opts: VerifyOptions, max_len: int, available: int, **extra
) -> EngineRequest:
    return EngineRequest(
        model=model, kv_cache_dtype=opts.kv_cache_dtype, engine_version=opts.engine_version,
        max_model_len=max_len, tensor_parallel_size=opts.tensor_parallel_size,
        block_size=opts.block_size, available_kv_bytes=available,
        extra={**dict(opts.engine_options), **extra},
    )  # fmt: skip


def _cache_dtype(name: str) -> CacheDtype:
    dtype = parse_cache_dtype(name)
    return dtype if dtype is not None else CACHE_DTYPES[name]


def _finish(plan: KvCachePlan, layout: str, tokens: int, buffers: list[BufferSpec],
            predicted: dict[str, list[int]], notes: list[str]) -> AllocationPlan:  # fmt: skip
    components = tuple(PredictedComponent(name=k, predicted_bytes=v[0], num_layers=v[1])
                       for k, v in predicted.items())  # fmt: skip
    if sum(c.predicted_bytes for c in components) != plan.kv_cache_bytes:
        notes.append("the components do not add up to the engine total (a kvcalc inconsistency)")
    return AllocationPlan(
        engine=plan.engine, engine_version=plan.engine_version, kv_cache_dtype=plan.kv_cache_dtype,
        layout=layout, block_size=plan.block_size, num_blocks=plan.num_blocks, tokens=tokens,
        predicted_bytes=plan.kv_cache_bytes, components=components, buffers=tuple(buffers),
        notes=tuple(notes), plan=plan.to_dict(),
    )  # fmt: skip


def _add(predicted: dict[str, list[int]], name: str, nbytes: int, new_layer: bool = True) -> None:
    entry = predicted.setdefault(name, [0, 0])
    entry[0] += nbytes
    entry[1] += int(new_layer)


def _tensor(
    name: str, component: str, layer: int, dtype: str, shape: tuple[int, ...]
) -> BufferSpec:
    view = ViewSpec(component=component, layer=layer, torch_dtype=dtype, shape=shape, exact=True)
    return BufferSpec(name=name, shape=shape, torch_dtype=dtype, views=(view,))


# -- transformers -------------------------------------------------------------------------------
def _per_layer(model: ModelShape, opts: VerifyOptions) -> AllocationPlan:
    tokens = opts.tokens or DEFAULT_TOKENS
    b = opts.batch_size
    plan = get_engine(opts.engine).plan_kv_cache(_request(model, opts, tokens, 0, batch_size=b))
    if plan.kv_cache_dtype in NAMED:  # QuantizedCache
        return _hf_quantized(model, opts, tokens, plan)
    layers = model.with_cache_dtype(_cache_dtype(plan.kv_cache_dtype)).layers
    held = {i: g.blocks_per_request for g in plan.groups for i in g.layer_indices}
    buffers: list[BufferSpec] = []
    predicted: dict[str, list[int]] = {}
    tp = opts.tensor_parallel_size
    for i, t in held.items():
        for part, dtype, shape, row in _hf_tensors(layers[i], plan.engine_version, tp, b, t):
            name = f"{_hf_kind(layers[i])} {part}"
            buffers.append(_tensor(f"layer {i} {part}", name, i, dtype, shape))
            _add(predicted, name, row, new_layer=part in ("K", "latent", "conv"))
    return _finish(plan, "transformers cache: per layer K and V [batch, kv_heads, tokens, head_dim]",
                   tokens, buffers, predicted, [])  # fmt: skip


def _hf_quantized(
    model: ModelShape, opts: VerifyOptions, tokens: int, plan: KvCachePlan
) -> AllocationPlan:
    """transformers ``QuantizedCache``: per layer and side the packed codes, scales and zero points
    (raw bytes here: ``--run`` measures the backends' real tensors) and the model-dtype residual."""
    from kvcalc.engines.hf.quantized import layer_shapes, parts_at, residual_at
    from kvcalc.engines.hf.setup import quantized_name, quantized_setup

    request = _request(model, opts, tokens, 0, batch_size=opts.batch_size)
    setup = quantized_setup(
        request, plan.engine_version, quantized_name(opts.kv_cache_dtype, []), []
    )
    shapes = layer_shapes(model, opts.tensor_parallel_size, opts.batch_size)
    buffers: list[BufferSpec] = []
    predicted: dict[str, list[int]] = {}
    for i, parts in parts_at(setup, shapes, tokens, residual_at(setup, tokens)):
        for part, nbytes in parts.items():
            name = f"full {part}"
            if nbytes:
                buffers.append(
                    _tensor(f"layer {i} {part.replace(' ', '')}", name, i, "uint8", (nbytes,))
                )
            _add(predicted, name, nbytes)
    return _finish(plan, f"transformers QuantizedCache {plan.kv_cache_dtype}: per layer K and V codes, "
                   "scales, zero points and the residual", tokens, buffers, predicted, [])  # fmt: skip


def _hf_kind(layer: Layout) -> str:
    return layer.kind  # one vocabulary: "recurrent conv", as vLLM's layout names it


def _hf_tensors(
    layer: Layout, profile: str, tp: int, b: int, t: int
) -> list[tuple[str, str, tuple, int]]:
    """(part, torch dtype, shape, predicted bytes) for one layer holding ``t`` tokens."""
    name = layer.dtype.torch_name
    if isinstance(layer, RecurrentState):
        from kvcalc.engines.hf.engine import state_tensors

        # transformers keeps conv_kernel columns and Gated DeltaNet's state in float32
        conv, ssm = state_tensors(layer, tp)
        return [("conv", conv.dtype.torch_name, (b, conv.shape[1], conv.shape[0]), b * conv.nbytes),
                ("ssm", ssm.dtype.torch_name, (b, *ssm.shape), b * ssm.nbytes)]  # fmt: skip
    if isinstance(layer, MLALatent) and profile != "4":  # transformers 5: the compressed latent
        return [("latent", name, (b, 1, t, layer.kv_lora_rank), b * t * layer.dtype.row_bytes(layer.kv_lora_rank)),
                ("rope", name, (b, 1, t, layer.rope_dim), b * t * layer.dtype.row_bytes(layer.rope_dim))]  # fmt: skip
    if isinstance(layer, MLALatent):  # transformers 4: expanded per-head K and V
        h = max(1, layer.num_heads // tp)
        k, v = layer.qk_nope_dim + layer.rope_dim, layer.v_head_dim
        return [("K", name, (b, h, t, k), b * t * h * layer.dtype.row_bytes(k)),
                ("V", name, (b, h, t, v), b * t * h * layer.dtype.row_bytes(v))]  # fmt: skip
    if isinstance(layer, FullAttention):
        x = cast(FullAttention, layer.per_rank(tp))  # per_rank keeps the layout's class
        return [("K", name, (b, x.kv_heads, t, x.k_dim), b * t * x.kv_heads * x.dtype.row_bytes(x.k_dim)),
                ("V", name, (b, x.kv_heads, t, x.v_dim), b * t * x.kv_heads * x.dtype.row_bytes(x.v_dim))]  # fmt: skip
    return []


# -- llama.cpp ----------------------------------------------------------------------------------
_GGML_FLOAT = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _ggml_shape(dtype: CacheDtype, cells: int, width: int) -> tuple[str, tuple[int, ...]]:
    """A ggml row tensor: floats as themselves, quantized types as their blocks' raw bytes."""
    if dtype.name in _GGML_FLOAT:
        return _GGML_FLOAT[dtype.name], (cells, width)
    if width % dtype.block_values:
        raise InputError(f"{dtype.name} rows need a multiple of {dtype.block_values} values, got {width}",
                         code="unsupported-dtype")  # fmt: skip
    return "uint8", (cells, width // dtype.block_values, dtype.block_bytes)


def _cells(model: ModelShape, opts: VerifyOptions) -> AllocationPlan:
    tokens = opts.tokens or 256
    extra = dict(opts.engine_options)
    extra.setdefault("n_ctx", tokens)
    plan = get_engine(opts.engine).plan_kv_cache(_request(model, opts, tokens, _HUGE, **extra))
    type_k = _cache_dtype(plan.kv_cache_dtype)
    v_name = str(extra.get("type_v", opts.kv_cache_dtype))
    type_v = FP16 if v_name.strip().lower() == "auto" else _cache_dtype(v_name)
    buffers: list[BufferSpec] = []
    predicted: dict[str, list[int]] = {}
    for group in plan.groups:
        cells = group.num_blocks
        for i in group.layer_indices:
            layer = model.layers[i]
            # llama.cpp's R and S rows, float32, one cell a sequence
            if group.kind is LayerKind.RECURRENT:
                assert isinstance(layer, RecurrentState)
                for part, nbytes in zip("RS", recurrent_rows(layer), strict=True):
                    name = f"recurrent {part}"
                    buffers.append(
                        _tensor(f"layer {i} {part}", name, i, "float32", (cells, nbytes // 4))
                    )
                    _add(predicted, name, cells * nbytes, new_layer=part == "R")
                continue
            if isinstance(layer, MLALatent):
                widths = {"K": layer.latent_dim}
                if plan.engine_version == "b5452":
                    widths["V"] = layer.kv_lora_rank
            else:
                widths = {
                    "K": layer.num_kv_heads * layer.head_dim_k,
                    "V": layer.num_kv_heads * layer.head_dim_v,
                }
            for part, width in widths.items():
                dtype = type_k if part == "K" else type_v
                torch_dtype, shape = _ggml_shape(dtype, cells, width)
                name = f"{group.kind} {part}"
                buffers.append(_tensor(f"layer {i} {part}", name, i, torch_dtype, shape))
                _add(predicted, name, cells * dtype.row_bytes(width), new_layer=part == "K")
    cells_note = ", ".join(f"{g.kind} {g.num_blocks:,} cells" for g in plan.groups)
    return _finish(plan, "llama.cpp: per layer K and V rows (ggml row size) for every cell", plan.num_blocks,
                   buffers, predicted, [cells_note])  # fmt: skip


# -- SGLang -------------------------------------------------------------------------------------
def _token_pool(model: ModelShape, opts: VerifyOptions) -> AllocationPlan:
    if any(isinstance(x, RecurrentState) for x in model.layers):
        raise InputError(
            "verify does not lay out SGLang's Mamba-state pool (plan sizes it; see docs/engines.md)",
            hint="verify this model with --engine vllm",
            code="unsupported-model",
        )
    tokens = opts.tokens or DEFAULT_TOKENS
    request = _request(
        model, opts, opts.max_model_len or model.max_model_len, _HUGE, max_total_tokens=tokens
    )
    plan = get_engine(opts.engine).plan_kv_cache(request)
    page = plan.block_size
    layers = (
        model.with_cache_dtype(_cache_dtype(plan.kv_cache_dtype))
        .per_rank(opts.tensor_parallel_size)
        .layers
    )
    pools = {g.kind: g.num_blocks * page for g in plan.groups}  # full (and sliding) token pools
    buffers: list[BufferSpec] = []
    predicted: dict[str, list[int]] = {}
    for i, layer in enumerate(layers):
        if not layer.bytes_per_token:
            continue
        windowed = layer.kind in WINDOWED_KINDS and LayerKind.SLIDING in pools
        pool = LayerKind.SLIDING if windowed else LayerKind.FULL
        rows = pools[pool] + page  # the pool keeps page_size padding slots
        kind = LayerKind.MLA if isinstance(layer, MLALatent) else pool
        dtype = layer.dtype.torch_name
        if isinstance(layer, MLALatent):
            parts = [("latent", (rows, 1, layer.latent_dim), rows * layer.bytes_per_token)]
        else:
            parts = [("K", (rows, layer.num_kv_heads, layer.head_dim_k), rows * layer.num_kv_heads * layer.dtype.row_bytes(layer.head_dim_k)),
                     ("V", (rows, layer.num_kv_heads, layer.head_dim_v), rows * layer.num_kv_heads * layer.dtype.row_bytes(layer.head_dim_v))]  # fmt: skip
        for part, shape, nbytes in parts:
            buffers.append(_tensor(f"layer {i} {part}", f"{kind} {part}", i, dtype, shape))
            _add(predicted, f"{kind} {part}", nbytes, new_layer=part in ("K", "latent"))
    return _finish(plan, "SGLang token pool: per layer K and V [tokens + page_size, kv_heads, head_dim]",
                   plan.kv_cache_tokens, buffers, predicted, [])  # fmt: skip


_LAYOUTS = {
    CacheTensors.PAGED: _paged,
    CacheTensors.PER_LAYER: _per_layer,
    CacheTensors.CELLS: _cells,
    CacheTensors.TOKEN_POOL: _token_pool,
}
