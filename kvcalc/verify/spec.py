"""What ``kvcalc verify`` allocates, as plain data (no torch): buffers, the views an engine makes of
them, and the bytes the engine model predicts for each component.

A :class:`BufferSpec` is one allocation exactly as the engine makes it (vLLM: one tensor per layer,
or one raw tensor shared by the i-th layer of every KV-cache group; transformers: one K and one V
tensor per layer; llama.cpp: one K and one V tensor per layer). A :class:`ViewSpec` is how the
engine reads part of it (K, V, the MLA latent, a recurrent state), as ``torch.as_strided``
arguments, so torch itself checks that every view fits the allocation it belongs to.

Worked example (Llama-3.1-8B, vLLM, bf16, 4 blocks of 16 tokens): each of the 32 layers allocates
``(2, 4, 16, 8, 128)`` bf16 = 262,144 B; its K view is ``[0]`` (131,072 B) and V ``[1]``.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from kvcalc.frozen import frozen

#: bytes per element of the torch dtypes verify allocates (names as ``torch.<name>``)
ITEMSIZE: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "uint8": 1,
    "int8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides: ``(2, 3, 4)`` → ``(12, 4, 1)``."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


@frozen
class ViewSpec:
    """One engine view of a buffer: ``as_strided(shape, stride, offset)`` over ``torch_dtype``."""

    #: the report row it counts towards, e.g. ``"full K"``, ``"mla latent"``, ``"gdn ssm"``
    component: str
    layer: int
    torch_dtype: str
    shape: tuple[int, ...]
    #: element strides; ``None`` = contiguous
    stride: tuple[int, ...] | None = None
    #: element offset into the buffer reinterpreted as ``torch_dtype``
    offset: int = 0
    #: the layer's views must cover the whole buffer (vLLM reshapes attention buffers with ``.view``)
    exact: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE[self.torch_dtype]

    @property
    def strides(self) -> tuple[int, ...]:
        return self.stride if self.stride is not None else contiguous_strides(self.shape)


@frozen
class BufferSpec:
    """One allocation: ``torch.empty(shape, dtype=torch_dtype)``."""

    name: str
    shape: tuple[int, ...]
    torch_dtype: str
    views: tuple[ViewSpec, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.torch_dtype]


@frozen
class PredictedComponent:
    """Bytes the engine model predicts for one component (all its layers together)."""

    name: str
    predicted_bytes: int
    num_layers: int


@frozen
class AllocationPlan:
    """Everything an engine allocates for its KV cache at a chosen size, and what kvcalc predicts."""

    engine: str
    engine_version: str
    kv_cache_dtype: str
    #: one line saying which engine layout the buffers follow
    layout: str
    block_size: int
    num_blocks: int
    #: tokens the cache holds per sequence (hf, llama.cpp, SGLang); blocks × block size for vLLM
    tokens: int
    #: the engine model's own total (``KvCachePlan.kv_cache_bytes``)
    predicted_bytes: int
    components: tuple[PredictedComponent, ...]
    buffers: tuple[BufferSpec, ...]
    notes: tuple[str, ...] = ()
    #: the engine plan this was derived from (``KvCachePlan.to_dict()``)
    plan: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def allocated_bytes(self) -> int:
        """What the buffers take by their shapes (torch measures the same from storage)."""
        return sum(b.nbytes for b in self.buffers)


@frozen
class VerifyOptions:
    """What to verify. ``None`` = the engine's default or a small CPU-friendly size."""

    engine: str = "vllm"
    engine_version: str | None = None
    kv_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1
    block_size: int | None = None
    #: vLLM/SGLang pool size in blocks (default :data:`DEFAULT_NUM_BLOCKS`)
    num_blocks: int | None = None
    #: tokens per sequence for hf/llama.cpp/SGLang (default :data:`DEFAULT_TOKENS`)
    tokens: int | None = None
    batch_size: int = 1
    max_model_len: int | None = None
    engine_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        from kvcalc.errors import InputError
        from kvcalc.planning.inputs import MAX_COUNT
        from kvcalc.units import short_int

        for name in (
            "tensor_parallel_size",
            "block_size",
            "num_blocks",
            "tokens",
            "batch_size",
            "max_model_len",
        ):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
                shown = short_int(value) if isinstance(value, int) else repr(value)
                raise InputError(f"{name} must be an integer from 1 to {MAX_COUNT:,}, got {shown}",
                                 code="invalid-input")  # fmt: skip


#: small defaults so a CPU check of any bundled model takes well under a second
DEFAULT_NUM_BLOCKS = 4
DEFAULT_TOKENS = 64
