"""The cross-attention cache of an encoder-decoder model (Whisper): K and V of the encoder's output.

A decoder layer's cross-attention keeps, per request, one K and one V row per KV head for each
*encoder* token, written once when the encoder runs: it does not grow with the tokens the decoder
generates. Engine-independent figures: ``bytes_per_token`` is 0 (nothing per decoded token) and
``state_bytes`` the ``encoder_tokens`` entries a request holds (Whisper: ``max_source_positions``,
1,500 audio frames). Engines book it their own way: vLLM 0.33 pages it as a ``CrossAttentionSpec``
sized by the scheduler's encoder budget, not by the encoder's length (``engines/vllm/groups.py``).

Whisper-large-v3 (fp16): 20 heads × (64 + 64) × 2 B = 5,120 B per encoder token and layer;
1,500 tokens × 32 layers = 245,760,000 B per request.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import ClassVar

from kvcalc.frozen import frozen
from kvcalc.model.layouts import LayerKind, Layout, check_kv_fields


@frozen
class CrossAttention(Layout):
    """K/V of ``encoder_tokens`` encoder outputs per request, ``kv_heads`` × ``head_dim`` wide."""

    kind: ClassVar[LayerKind] = LayerKind.CROSS
    kv_heads: int
    head_dim: int
    #: encoder tokens one request attends to (the most the encoder emits)
    encoder_tokens: int

    def __post_init__(self) -> None:
        check_kv_fields(self, ("kv_heads", "head_dim", "encoder_tokens"))

    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads

    @property
    def head_dim_k(self) -> int:
        return self.head_dim

    @property
    def head_dim_v(self) -> int:
        return self.head_dim

    @cached_property
    def entry_bytes(self) -> int:
        """Bytes of one encoder token's K and V in this layer (what vLLM pages per slot)."""
        return self.kv_heads * 2 * self.dtype.row_bytes(self.head_dim)

    @cached_property
    def state_bytes(self) -> int:
        return self.encoder_tokens * self.entry_bytes

    def per_rank(self, tensor_parallel_size: int) -> Layout:
        return replace(self, kv_heads=max(1, self.kv_heads // tensor_parallel_size))
