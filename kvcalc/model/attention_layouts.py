"""Layouts of the 2026 attention families: KV sharing and sparse attention with an indexer cache.

- :class:`SharedKV`: a layer that reads another layer's cache (Gemma-3n, Gemma 4
  ``num_kv_shared_layers``). It owns no cache: vLLM gives it no KV-cache spec, transformers no cache
  layer.
- :class:`SparseMLA`: DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the MLA latent plus the
  "lightning indexer" key cache of the same layer. vLLM stores the indexer keys as fp8 with one
  float32 scale per 128 values (``DeepseekV32IndexerCache``: ``index_head_dim +
  index_head_dim // 128 · 4`` bytes per token, whatever the KV-cache dtype).

GLM-5 (bf16 latent): (512 + 64) · 2 = 1,152 B + indexer 128 + 128 // 128 · 4 = 132 B →
1,284 B per token per layer.
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import LayerKind, Layout, MLALatent

#: values per float32 scale in the fp8 indexer key cache (vLLM ``Indexer.quant_block_size``)
INDEXER_QUANT_BLOCK = 128


@frozen
class SharedKV(Layout):
    """A layer that reuses the cache of layer ``source_layer``; it is charged nothing."""

    kind: ClassVar[LayerKind] = LayerKind.SHARED
    source_layer: int

    def with_dtype(self, dtype: CacheDtype) -> Layout:
        return self


@frozen
class SparseMLA(MLALatent):
    """MLA latent + the sparse-attention indexer's fp8 key cache, both kept for every token."""

    index_head_dim: int

    @property
    def indexer_bytes_per_token(self) -> int:
        # fp8 values + one float32 scale per 128 values (vLLM deepseek_v2.py Indexer)
        return self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * 4

    @property
    def latent_bytes_per_token(self) -> int:
        if self.dtype.mla_record_bytes:
            return self.dtype.mla_record_bytes
        return self.dtype.row_bytes(self.latent_dim)

    @cached_property
    def bytes_per_token(self) -> int:
        return self.latent_bytes_per_token + self.indexer_bytes_per_token


#: DeepSeek-V4 ``fp8_ds_mla`` record: 448 fp8 NoPE values + 64 bf16 RoPE values + 8 B of UE8M0 scales
DSV4_RECORD_BYTES = 584


@frozen
class CompressedSparseAttention(Layout):
    """One DeepSeek-V4 layer: a sliding-window latent cache, and for ``compress_ratio`` > 0 a cache of
    compressed latents (one per ``compress_ratio`` tokens) fed by a compressor whose float32 state
    covers the last ``(1 + overlap) · compress_ratio`` tokens; ratio-4 layers add an indexer with
    its own compressed fp8 keys and compressor (``vllm/models/deepseek_v4``, vLLM 0.33.0).

    Engine-independent figures: ``bytes_per_token`` is the growth of the compressed caches,
    ``ceil((latent + indexer key) / ratio)`` (the sliding-window latent for a ratio-0 layer, bounded by
    the window); ``state_bytes`` holds what does not grow: the window of latents (compressed layers)
    and the compressor states.
    """

    kind: ClassVar[LayerKind] = LayerKind.COMPRESSED
    head_dim: int
    sliding_window: int
    compress_ratio: int
    index_head_dim: int

    @property
    def num_kv_heads(self) -> int:
        return 1

    @property
    def head_dim_k(self) -> int:
        return self.head_dim

    @property
    def overlap(self) -> bool:
        return self.compress_ratio == 4

    @property
    def latent_bytes(self) -> int:
        """One latent record (the sliding-window and compressed caches store the same record)."""
        if self.dtype.name == "fp8_ds_mla":
            return DSV4_RECORD_BYTES
        return self.dtype.row_bytes(self.head_dim)

    @property
    def indexer_key_bytes(self) -> int:
        """One compressed indexer key (ratio-4 layers): fp8 + a float32 scale per 128 values."""
        if not self.overlap:
            return 0
        return self.index_head_dim + self.index_head_dim // INDEXER_QUANT_BLOCK * 4

    @property
    def compressor_state_dims(self) -> tuple[int, ...]:
        """float32 values per state token of each compressor: KV + score, doubled with overlap."""
        if not self.compress_ratio:
            return ()
        coff = 2 if self.overlap else 1
        dims = [2 * coff * self.head_dim]
        if self.overlap:
            dims.append(2 * coff * self.index_head_dim)
        return tuple(dims)

    @property
    def compressor_window(self) -> int:
        return (2 if self.overlap else 1) * self.compress_ratio

    @property
    def window(self) -> int | None:
        return None if self.compress_ratio else self.sliding_window

    @cached_property
    def bytes_per_token(self) -> int:
        if not self.compress_ratio:
            return self.latent_bytes
        per_state = self.latent_bytes + self.indexer_key_bytes
        return -(-per_state // self.compress_ratio)

    @cached_property
    def state_bytes(self) -> int:
        if not self.compress_ratio:
            return 0
        states = sum(self.compressor_window * dim * 4 for dim in self.compressor_state_dims)
        return self.sliding_window * self.latent_bytes + states

    def tokens_held(self, num_tokens: int) -> int:
        if not self.compress_ratio:
            return min(num_tokens, self.sliding_window)
        return num_tokens
