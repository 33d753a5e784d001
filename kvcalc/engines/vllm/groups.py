"""vLLM's per-layer KV specs and how it groups them (``kv_cache_interface.py``, ``kv_cache_planning.py``).

Each layer reports one :class:`LayerSpec` (page = bytes of one block in one layer). The specs of the
whole model are grouped once (:func:`group_layers`); pipeline stages then size their own share.

Confirmed from vLLM 0.33.0 (``vllm/v1/kv_cache_interface.py``, ``vllm/v1/core/kv_cache_planning.py``,
``vllm/platforms/interface.py``): the sliding reserve ``cdiv(min(W − 1 + in_flight, L), block) + 1``,
the chunked reserve ``cdiv(min(C + in_flight, L), block)``, mamba ``align`` = 2 pages and ``none`` = 1,
the grouping (uniform → one group; same type → one UniformType group; else unify pages by raising
block sizes or padding, bucket, ``group_size`` = min, or max when max < 1.5·min, stride split,
padding layers), bytes per block = max over groups of the pages of their layers, needed memory =
bytes per block × Σ blocks per request, and ``_align_hybrid_block_size`` (may override a user block
size). Not modelled: the block-outermost *packed* layout for mixed page sizes (only with a
non-default KV layout), hidden-state caches, DeepSeek-V4 and HiSparse paths, and the older
``mamba_cache_mode="all"`` (before 0.33, for models supporting mamba prefix caching).
"""

from __future__ import annotations

import math
from dataclasses import replace
from enum import Enum
from functools import cached_property, lru_cache

from kvcalc.engines.common import pp_stages  # noqa: F401  (vLLM's get_pp_indices)
from kvcalc.errors import InputError, KvcalcError
from kvcalc.frozen import frozen
from kvcalc.model.layouts import (
    ChunkedLocal,
    FullAttention,
    LayerKind,
    Layout,
    MLALatent,
    RecurrentState,
    SlidingWindow,
)
from kvcalc.units import cdiv

#: layer kinds vLLM pages per token (attention specs); recurrent layers take one state per request
ATTENTION_KINDS = (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA)


class SpecKind(str, Enum):
    """The type of one layer's vLLM ``KVCacheSpec``, which is also its group's kind.

    ``FullAttentionSpec``, ``SlidingWindowSpec``, ``ChunkedLocalAttentionSpec``, ``MLAAttentionSpec``
    and ``MambaSpec`` (the one for every recurrent layer, whatever its mixer). Plans report the
    :class:`~kvcalc.model.layouts.LayerKind` of a group (:attr:`layer_kind`).
    """

    FULL = "full"
    SLIDING = "sliding"
    CHUNKED = "chunked"
    MLA = "mla"
    MAMBA = "mamba"
    #: ``CrossAttentionSpec``: an encoder-decoder model's cross-attention (Whisper)
    CROSS = "cross"

    @property
    def layer_kind(self) -> LayerKind:
        """The kind of the layers this spec's group holds: ``mamba`` specs hold recurrent ones."""
        return LayerKind.RECURRENT if self is SpecKind.MAMBA else LayerKind(self.value)

    def __str__(self) -> str:  # the value, as a plain string would print
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


@frozen
class Sizing:
    """What per-request block counts depend on."""

    max_model_len: int
    #: tokens scheduled but not yet freed (sliding/chunked reserve)
    in_flight_tokens: int
    mamba_cache_mode: str = "none"
    #: decode context parallel ranks sharding each request's attention tokens (1: off)
    dcp: int = 1
    #: the scheduler's encoder budget, ``max_num_encoder_input_tokens`` (= max_num_batched_tokens),
    #: which sizes a cross-attention layer's blocks (``CrossAttentionSpec.max_memory_usage_bytes``)
    encoder_budget_tokens: int = 0


@frozen
class LayerSpec:
    """One layer's ``KVCacheSpec``: equal specs group together."""

    kind: SpecKind
    block_size: int
    real_page_bytes: int
    page_padded_bytes: int | None = None
    #: sliding window / chunk size; on a ``full`` spec a window booked as full
    window: int | None = None
    #: identity: heads, widths and dtype, so equal pages of different shapes stay apart
    shape: tuple[object, ...] = ()
    #: mamba: prefill-checkpoint blocks held in align mode (vLLM 0.33 ``num_prefill_checkpoint_blocks``)
    checkpoint_blocks: int = 0
    #: mamba: state blocks for the draft tokens (``MambaSpec.num_speculative_blocks`` =
    #: ``num_speculative_tokens``, any speculative method; 0 without speculation)
    speculative_blocks: int = 0
    #: cross-attention: the encoder tokens a request writes (what the scheduler allocates for it)
    encoder_tokens: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", SpecKind(self.kind))  # "full" in, SpecKind.FULL kept

    @property
    def page_bytes(self) -> int:
        return self.page_padded_bytes or self.real_page_bytes

    def max_blocks(self, s: Sizing) -> int:
        """Blocks one request at ``s.max_model_len`` holds in this layer at most."""
        if self.kind is SpecKind.SLIDING:
            # +1: the window need not start on a block boundary
            return (
                cdiv(min(self._window() - 1 + s.in_flight_tokens, s.max_model_len), self.block_size)
                + 1
            )
        if self.kind is SpecKind.CHUNKED:
            return cdiv(min(self._window() + s.in_flight_tokens, s.max_model_len), self.block_size)
        if self.kind is SpecKind.CROSS:
            # CrossAttentionSpec.max_memory_usage_bytes: cdiv(max_num_encoder_input_tokens, block)
            # pages, whatever the encoder's length (Whisper's 1,500 frames: 512 blocks of 16 at
            # the H100's 8,192-token budget, recorded)
            return cdiv(s.encoder_budget_tokens, self.block_size)
        if self.kind is SpecKind.MAMBA:  # MambaSpec.max_memory_usage_bytes / page
            k = self.speculative_blocks
            return 2 + k + self.checkpoint_blocks if s.mamba_cache_mode == "align" else 1 + k
        # AttentionSpec.max_num_blocks_per_req (v1/kv_cache_interface.py): a DCP-sharded spec
        # holds cdiv(L, block × dcp) blocks, cdiv(cdiv(L, dcp), block)
        return cdiv(s.max_model_len, self.block_size * s.dcp)

    def _window(self) -> int:
        if self.window is None:
            raise KvcalcError(
                f"a {self.kind} layer spec without a window",
                hint="please report this with the command line",
                code="internal",
            )
        return self.window

    def with_block_size(self, block_size: int) -> LayerSpec:
        """Attention pages scale with the block; a padded page is dropped (recomputed by callers)."""
        real = self.real_page_bytes * block_size // self.block_size
        return replace(self, block_size=block_size, real_page_bytes=real, page_padded_bytes=None)


@lru_cache(maxsize=4096)
def layer_spec(
    layout: Layout,
    block_size: int,
    mamba_page_padded: int | None,
    checkpoint_blocks: int = 0,
    speculative_blocks: int = 0,
) -> LayerSpec | None:
    """The spec a (per-rank) layer reports, or None for a layer without cache."""
    if isinstance(layout, RecurrentState):
        page = layout.state_bytes
        padded = mamba_page_padded if mamba_page_padded and mamba_page_padded > page else None
        shape: tuple[object, ...] = (
            type(layout).__name__,
            tuple(t.shape for t in layout.state_tensors()),
        )
        return LayerSpec(kind=SpecKind.MAMBA, block_size=block_size, real_page_bytes=page,
                         page_padded_bytes=padded, shape=shape, checkpoint_blocks=checkpoint_blocks,
                         speculative_blocks=speculative_blocks)  # fmt: skip
    if isinstance(layout, MLALatent):
        shape = ("mla", layout.latent_dim, layout.dtype.name)
        return LayerSpec(kind=SpecKind.MLA, block_size=block_size,
                         real_page_bytes=block_size * layout.bytes_per_token, shape=shape)  # fmt: skip
    if layout.kind is LayerKind.CROSS:
        from kvcalc.model.cross_attention import CrossAttention  # loaded with Whisper's family

        assert isinstance(layout, CrossAttention)
        shape = ("cross", layout.kv_heads, layout.head_dim, layout.dtype.name)
        return LayerSpec(kind=SpecKind.CROSS, block_size=block_size,
                         real_page_bytes=block_size * layout.entry_bytes, shape=shape,
                         encoder_tokens=layout.encoder_tokens)  # fmt: skip
    if isinstance(layout, FullAttention):
        kind, window = SpecKind.FULL, None
        if isinstance(layout, SlidingWindow):
            kind, window = SpecKind.SLIDING, layout.sliding_window
        elif isinstance(layout, ChunkedLocal):
            kind, window = SpecKind.CHUNKED, layout.chunk_size
        shape = ("kv", layout.kv_heads, layout.k_dim, layout.v_dim, layout.dtype.name)
        return LayerSpec(kind=kind, block_size=block_size, window=window,
                         real_page_bytes=block_size * layout.bytes_per_token, shape=shape)  # fmt: skip
    return None


# -- groups -----------------------------------------------------------------------------------
@frozen
class Group:
    """One KV-cache group: layers sharing a block table."""

    layers: tuple[int, ...]
    specs: tuple[LayerSpec, ...]
    padding_layers: int = 0
    #: a UniformType group: one type, per-layer pages (its page is their sum)
    uniform_type: bool = False

    @property
    def kind(self) -> SpecKind:
        return self.specs[0].kind

    @property
    def block_size(self) -> int:
        return self.specs[0].block_size

    @property
    def page_bytes(self) -> int:
        if self.uniform_type:
            return self.total_page_bytes
        return self.specs[0].page_bytes

    @cached_property
    def total_page_bytes(self) -> int:
        """Bytes one block takes in all this group's layers (frozen: computed once)."""
        return sum(s.page_bytes for s in self.specs)

    @cached_property
    def layer_span(self) -> tuple[int, int] | None:
        """(first, last) cache-layer key of the group; None without layers."""
        return (min(self.layers), max(self.layers)) if self.layers else None

    @cached_property
    def distinct_specs(self) -> tuple[LayerSpec, ...]:
        return tuple(set(self.specs))

    def max_blocks(self, s: Sizing) -> int:
        return max(spec.max_blocks(s) for spec in self.distinct_specs)

    def layer_positions(self, num_layers: int) -> tuple[int, ...]:
        """The transformer layer of each cache-layer key (Falcon-H1's mixer keys ``n + i`` → ``i``),
        computed once per layer count."""
        kept: dict[int, tuple[int, ...]] = self.__dict__.setdefault("_positions", {})
        if num_layers not in kept:
            kept[num_layers] = tuple(i % num_layers for i in self.layers)
        return kept[num_layers]

    def stage_page_bytes(self, stage_layers: range) -> int:
        """Bytes one block takes in this group's layers on one pipeline stage."""
        span = self.layer_span
        if span and stage_layers.step == 1 and stage_layers.start <= span[0] \
                and span[1] < stage_layers.stop:  # fmt: skip
            return self.total_page_bytes
        return sum(
            sp.page_bytes
            for i, sp in zip(self.layers, self.specs, strict=False)
            if i in stage_layers
        )


def promote_local_specs(specs: dict[int, LayerSpec]) -> dict[int, LayerSpec]:
    """``--disable-hybrid-kv-cache-manager``: sliding/chunked layers booked as full (window kept)."""
    kinds = {s.kind for s in specs.values()}
    local = {SpecKind.SLIDING, SpecKind.CHUNKED}
    if SpecKind.FULL not in kinds or not kinds & local:
        return specs
    return {i: replace(s, kind=SpecKind.FULL) if s.kind in local else s for i, s in specs.items()}


def _mergeable(specs: list[LayerSpec]) -> bool:
    """``is_kv_cache_spec_uniform``: one spec, full specs with and without a window merging."""
    unique = set(specs)  # a model has a handful of distinct specs; compare those only
    keys = {replace(s, window=None) if s.kind is SpecKind.FULL else s for s in unique}
    windows = {s.window for s in unique if s.kind is SpecKind.FULL and s.window is not None}
    return len(keys) == 1 and len(windows) <= 1


def _same_type(specs: list[LayerSpec]) -> bool:
    """``UniformTypeKVCacheSpecs.is_uniform_type``: same block size, same kind and window."""
    first = specs[0]
    return (
        all(
            s.block_size == first.block_size and s.kind == first.kind and s.window == first.window
            for s in specs
        )
        and first.kind is not SpecKind.MAMBA
    )


def group_layers(specs: dict[int, LayerSpec]) -> tuple[list[Group], list[str]]:
    """vLLM's ``get_kv_cache_groups`` on the whole model's per-layer specs; returns (groups, logs)."""
    if not specs:
        return [], []
    values = list(specs.values())
    layers = tuple(specs)
    if _mergeable(values):
        return [Group(layers=layers, specs=tuple(values))], []
    if _same_type(values):
        return [Group(layers=layers, specs=tuple(values), uniform_type=True)], []
    unified = unify_page_sizes(specs)
    return _split_buckets(unified)


def unify_page_sizes(specs: dict[int, LayerSpec]) -> dict[int, LayerSpec]:
    """Raise smaller attention pages to the largest by multiplying the block size; pad otherwise."""
    largest = max(s.page_bytes for s in specs.values())
    out: dict[int, LayerSpec] = {}
    for index, spec in specs.items():
        page = spec.page_bytes
        if page == largest:
            out[index] = spec
        elif spec.kind is SpecKind.MAMBA:
            out[index] = replace(spec, page_padded_bytes=largest)
        elif largest % page == 0:
            out[index] = spec.with_block_size(spec.block_size * (largest // page))
        elif spec.kind is not SpecKind.MLA:
            out[index] = replace(spec, page_padded_bytes=largest)
        else:
            raise InputError(
                f"layer {index}: page size is not divisible by the maximum page size and cannot "
                "be padded (vLLM raises NotImplementedError)",
                code="unsupported-model",
            )
    return out


def _split_buckets(specs: dict[int, LayerSpec]) -> tuple[list[Group], list[str]]:
    buckets: dict[LayerSpec, list[int]] = {}
    for index, spec in specs.items():
        buckets.setdefault(spec, []).append(index)
    sizes = [len(v) for v in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.5:
        group_size = max(sizes)  # e.g. 12 sliding + 13 full → 13, not 12
    groups: list[Group] = []
    logs: list[str] = []
    for spec, members in buckets.items():
        padding = group_size - len(members) % group_size
        if padding != group_size:
            logs.append(
                f"Add {padding} padding layers, may waste at most "
                f"{padding / len(members) * 100:.2f}% KV cache memory"
            )
        num_groups = cdiv(len(members), group_size)
        for i in range(num_groups):
            part = tuple(members[i::num_groups])  # stride split keeps PP stages balanced
            groups.append(
                Group(layers=part, specs=(spec,) * len(part), padding_layers=group_size - len(part))
            )
    return groups, logs


# -- pipeline parallel ------------------------------------------------------------------------
# -- hybrid attention + mamba block alignment ------------------------------------------------
@frozen
class HybridAlignment:
    block_size: int
    mamba_page_padded: int | None
    logs: tuple[str, ...]


def align_hybrid_block_size(
    layers: tuple[Layout, ...],
    block_size: int,
    *,
    mla_align_128: bool,
    checkpoint_alignment: int = 1,
) -> HybridAlignment | None:
    """``Platform._align_hybrid_block_size`` (per-rank layers); None for non-hybrid models.

    Qwen3-Next (TP 1): mamba page 1,097,728 B, attention 2·2·256·2 = 2,048 B per token, so
    block = 16·cdiv(1,097,728, 16·2,048) = 16·34 = 544 and the mamba page is padded to 544·2,048.
    In align mode the block is also a multiple of the layers' prefill-checkpoint alignment
    (0.33, FlashInfer GDN prefill: 64 → 64·cdiv(1,097,728, 64·2,048) = 576).
    """
    mamba = [x for x in layers if isinstance(x, RecurrentState)]
    attention = [x for x in layers if x.kind in ATTENTION_KINDS]
    if not mamba or not attention:
        return None
    mamba_page = max(x.state_bytes for x in mamba)
    attn_1tok = attention[0].bytes_per_token
    kernel_align = max(16, block_size)  # FLASH_ATTN's MultipleOf(16), or a larger block
    if mla_align_128 and isinstance(attention[0], MLALatent):
        kernel_align = max(kernel_align, 128)
    kernel_align = math.lcm(kernel_align, checkpoint_alignment)
    attn_block = kernel_align * cdiv(mamba_page, kernel_align * attn_1tok)
    attn_block = 16 * cdiv(attn_block, 16)  # lcm of the backends' smallest kernel blocks
    logs: list[str] = []
    if block_size < attn_block:
        block_size = attn_block
        logs.append(
            f"Setting attention block size to {attn_block} tokens to ensure that attention page "
            "size is >= mamba page size."
        )
    attn_page = block_size * attn_1tok
    padded = attn_page if attn_page > mamba_page else None
    if padded:
        pct = 100 * (attn_page - mamba_page) / mamba_page
        logs.append(
            f"Padding mamba page size by {pct:.2f}% to ensure that mamba page size and attention "
            "page size are exactly equal."
        )
    return HybridAlignment(block_size=block_size, mamba_page_padded=padded, logs=tuple(logs))
