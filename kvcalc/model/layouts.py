"""What one layer keeps in its cache, as small frozen dataclasses that own their byte arithmetic.

Every layout answers, for the cache dtype it holds:

- ``bytes_per_token``: bytes one token adds to this layer if the layer held every token;
- ``tokens_held(n)``: how many of ``n`` tokens the layer keeps (windows and chunks cap it);
- ``state_bytes``: constant bytes per sequence (recurrent layers), independent of length;
- ``bytes_for(n)``: one sequence of ``n`` tokens, ``bytes_per_token * tokens_held(n) + state``.

These are the engine-independent figures. Engines (``kvcalc.engines``) add their own paging,
rounding and reservations on top, using the same per-token arithmetic.

Worked example (Llama-3.1-8B, one layer, bf16): 8 KV heads × (128 + 128) values × 2 B = 4,096 B
per token; 32 layers give 131,072 B per token.
"""

from __future__ import annotations

import math
from dataclasses import replace
from enum import Enum
from functools import cached_property
from typing import ClassVar

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CacheDtype


class LayerKind(str, Enum):
    """What a layer caches: the one vocabulary of ``inspect``, ``plan`` (group kinds) and ``verify``.

    Group kinds use the same values: a group holds layers of one kind (vLLM's ``MambaSpec``
    groups are ``recurrent``). ``shared`` and ``compressed`` are layer kinds only: a shared layer
    owns no cache, and vLLM packs DeepSeek-V4's compressed layers into groups of its own kinds.
    """

    NONE = "none"
    FULL = "full"
    SLIDING = "sliding"
    CHUNKED = "chunked"
    MLA = "mla"
    RECURRENT = "recurrent"
    #: reads another layer's cache (Gemma-3n, Gemma 4 KV sharing): charged nothing
    SHARED = "shared"
    #: DeepSeek-V4 compressed sparse attention: a windowed latent plus compressed latents
    COMPRESSED = "compressed"
    #: an encoder-decoder model's cross-attention: K/V of the encoder's output per request
    #: (Whisper), fixed in size whatever the decoded length
    CROSS = "cross"

    def __str__(self) -> str:  # the value, as a plain string would print
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class RecurrentVariant(str, Enum):
    """Which recurrent state a ``recurrent`` layer keeps."""

    MAMBA1 = "mamba1"
    MAMBA2 = "mamba2"
    GATED_DELTANET = "gated_deltanet"
    KIMI_DELTA = "kda"
    SHORT_CONV = "short_conv"
    #: lightning (linear) attention: one ``(H/tp, D, D)`` state (Bailing MoE V2.5)
    LINEAR_ATTENTION = "linear_attention"
    #: attention and a Mamba2 mixer side by side in one layer (Falcon-H1)
    PARALLEL = "attention+mamba2"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


#: kinds whose cache grows with every token (``sliding``/``chunked`` up to their window)
ATTENTION_KINDS = (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED)
#: kinds that keep a bounded number of tokens (a window or a chunk)
WINDOWED_KINDS = (LayerKind.SLIDING, LayerKind.CHUNKED)


@frozen
class Layout:
    """Base class: a layer that caches nothing."""

    kind: ClassVar[LayerKind] = LayerKind.NONE
    dtype: CacheDtype

    @property
    def bytes_per_token(self) -> int:
        return 0

    @property
    def state_bytes(self) -> int:
        return 0

    @property
    def window(self) -> int | None:
        """Tokens kept at most (sliding window or chunk), ``None`` when unbounded."""
        return None

    @property
    def num_kv_heads(self) -> int:
        return 0

    @property
    def head_dim_k(self) -> int:
        return 0

    @property
    def head_dim_v(self) -> int:
        return 0

    @property
    def has_cache(self) -> bool:
        return self.bytes_per_token > 0 or self.state_bytes > 0

    def tokens_held(self, num_tokens: int) -> int:
        return 0

    def bytes_for(self, num_tokens: int) -> int:
        """Bytes one sequence of ``num_tokens`` tokens occupies in this layer."""
        if num_tokens < 0:
            raise InputError(f"token count must be >= 0, got {num_tokens}")
        state = self.state_bytes if num_tokens > 0 else 0
        return self.bytes_per_token * self.tokens_held(num_tokens) + state

    def with_dtype(self, dtype: CacheDtype) -> Layout:
        """The same layer with its KV stored as ``dtype``."""
        return replace(self, dtype=dtype)

    def per_rank(self, tensor_parallel_size: int) -> Layout:
        """One tensor-parallel rank's share of this layer."""
        return self


@frozen
class NoCache(Layout):
    """A layer without attention state (MLP/MoE-only blocks, no-op attention)."""

    def with_dtype(self, dtype: CacheDtype) -> Layout:
        return self


def check_kv_fields(layout: Layout, names: tuple[str, ...]) -> None:
    """A K/V layer's counts are non-negative ints, and its dtype no MLA-only record format."""
    for name in names:
        value = getattr(layout, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"{layout.kind} layer: {name} must be a non-negative int")
    if layout.dtype.mla_record_bytes:
        raise InputError(
            f"cache dtype {layout.dtype.name} applies to MLA models only",
            hint="use fp8 for a compact cache on non-MLA models",
            code="unsupported-dtype",
        )


@frozen
class FullAttention(Layout):
    """K and V per KV head for every token. K and V widths may differ."""

    kind: ClassVar[LayerKind] = LayerKind.FULL
    kv_heads: int
    k_dim: int
    v_dim: int

    def __post_init__(self) -> None:
        check_kv_fields(self, ("kv_heads", "k_dim", "v_dim"))

    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads

    @property
    def head_dim_k(self) -> int:
        return self.k_dim

    @property
    def head_dim_v(self) -> int:
        return self.v_dim

    @cached_property
    def bytes_per_token(self) -> int:
        # 2·heads·head_dim·dtype when K and V are as wide; per-token-head scales add 4 B per row.
        return self.kv_heads * (self.dtype.row_bytes(self.k_dim) + self.dtype.row_bytes(self.v_dim))

    def tokens_held(self, num_tokens: int) -> int:
        return num_tokens if self.window is None else min(num_tokens, self.window)

    def per_rank(self, tensor_parallel_size: int) -> Layout:
        # vLLM/SGLang: max(1, total // tp); below one head per rank the head is replicated.
        return replace(self, kv_heads=max(1, self.kv_heads // tensor_parallel_size))


@frozen
class SlidingWindow(FullAttention):
    """Attention over the last ``sliding_window`` tokens (Mistral, Gemma, gpt-oss)."""

    kind: ClassVar[LayerKind] = LayerKind.SLIDING
    sliding_window: int

    @property
    def window(self) -> int | None:
        return self.sliding_window


@frozen
class ChunkedLocal(FullAttention):
    """Attention within fixed chunks of ``chunk_size`` tokens (Llama 4 local layers)."""

    kind: ClassVar[LayerKind] = LayerKind.CHUNKED
    chunk_size: int

    @property
    def window(self) -> int | None:
        return self.chunk_size


@frozen
class MLALatent(Layout):
    """DeepSeek-style multi-head latent attention: one ``kv_lora_rank + rope_dim`` vector per token.

    No separate K and V, and not split by tensor parallelism: every rank stores the whole latent.
    DeepSeek-V3: (512 + 64) values × 2 B = 1,152 B per token per layer; 61 layers → 70,272 B.
    """

    kind: ClassVar[LayerKind] = LayerKind.MLA
    kv_lora_rank: int
    rope_dim: int
    #: attention heads and per-head widths, for engines that cache the expanded K/V instead
    num_heads: int = 0
    qk_nope_dim: int = 0
    v_head_dim: int = 0

    @property
    def latent_dim(self) -> int:
        return self.kv_lora_rank + self.rope_dim

    @property
    def num_kv_heads(self) -> int:
        return 1

    @property
    def head_dim_k(self) -> int:
        return self.latent_dim

    @cached_property
    def bytes_per_token(self) -> int:
        if self.dtype.mla_record_bytes:
            return self.dtype.mla_record_bytes
        return self.dtype.row_bytes(self.latent_dim)

    def tokens_held(self, num_tokens: int) -> int:
        return num_tokens


@frozen
class StateTensor:
    """One per-sequence state tensor of a recurrent layer."""

    name: str
    shape: tuple[int, ...]
    dtype: CacheDtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape[:-1]) * self.dtype.row_bytes(self.shape[-1])


@frozen
class RecurrentState(Layout):
    """A linear-attention or SSM layer: constant state per sequence, nothing per token.

    ``dtype`` is the conv-state dtype, ``ssm_dtype`` the temporal-state dtype; neither follows the
    KV-cache dtype (vLLM has separate ``mamba_cache_dtype`` / ``mamba_ssm_cache_dtype``).
    """

    kind: ClassVar[LayerKind] = LayerKind.RECURRENT
    #: the conv state keeps a row per speculative token too (vLLM's ``conv_kernel - 1 + num_spec``
    #: in ``MambaStateShapeCalculator``: Mamba2, Gated DeltaNet, short conv, KDA; not Mamba1)
    spec_conv_rows: ClassVar[bool] = True
    ssm_dtype: CacheDtype
    conv_kernel: int
    tp: int = 1
    #: speculative tokens the conv state holds beside its ``conv_kernel - 1`` rows
    speculative_tokens: int = 0

    @property
    def conv_rows(self) -> int:
        """Rows of the conv state: ``conv_kernel - 1``, plus the speculative tokens where vLLM adds them."""
        return self.conv_kernel - 1 + (self.speculative_tokens if self.spec_conv_rows else 0)

    def with_speculative_tokens(self, tokens: int) -> Layout:
        """The state vLLM allocates with ``num_speculative_tokens = tokens``."""
        return replace(self, speculative_tokens=tokens)

    def state_tensors(self) -> tuple[StateTensor, ...]:  # pragma: no cover - abstract
        raise NotImplementedError

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        """The dimensions vLLM splits over ``tensor_parallel_size`` ranks (each must divide)."""
        raise NotImplementedError  # pragma: no cover - abstract

    @cached_property
    def state_bytes(self) -> int:
        return sum(t.nbytes for t in self.state_tensors())

    def with_dtype(self, dtype: CacheDtype) -> Layout:
        return self

    def per_rank(self, tensor_parallel_size: int) -> Layout:
        return replace(self, tp=self.tp * tensor_parallel_size)
