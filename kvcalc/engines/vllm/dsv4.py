"""vLLM 0.33 for DeepSeek-V4: the seven caches of its layers and the block-outermost packed grouping.

Read in the vLLM 0.33.0 wheel (``vllm/models/deepseek_v4/attention.py``, ``compressor.py``,
``v1/attention/backends/mla/sparse_swa.py``, ``indexer.py``; ``v1/core/kv_cache_planning.py``
``_get_packed_kv_cache_groups``) and checked with its own sizing code on an H100 and a B200:

- every layer has a sliding-window latent cache (``DeepseekV4SWACache``: block 64, 584 B per token
  in the ``fp8_ds_mla`` layout, window ``sliding_window``);
- a ratio-r layer (r = 4 or 128) adds the compressed latents (``MLAAttentionSpec``, block 256 tokens
  = 256 / r states of 584 B) and a compressor state (``SlidingWindowMLASpec``, float32, KV + score
  values, doubled for the overlapping ratio-4 compressor; block 4 for r = 4, 8 for r = 128; window
  (1 + overlap)·r); ratio-4 layers add the indexer's compressed keys (132 B per state, block 256)
  and its own compressor state;
- every page is rounded up to a multiple of 576 B (the ``fp8_ds_mla`` alignment);
- the KV layout is block-outermost, so layers are packed: buckets of one spec type, buckets with
  one layer per page size split into groups of ``_approximate_gcd`` repeats.

DeepSeek-V4-Flash (43 layers: 2 sliding-only, 21 ratio-4, 20 ratio-128): 167 cache layers in 5
groups; one block takes max(group pages) = 1,002,240 B; at 32,768 tokens a request needs
259 + 259 + 128 + 4,099 + 2,065 = 6,810 blocks with 16,384 tokens in flight (H100), 13,444 with
32,768 (B200): 20 GiB → 21,426 blocks → 103,096 tokens on an H100, 52,223 on a B200.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcalc.engines.vllm.groups import Group, LayerSpec, SpecKind
from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import CompressedSparseAttention
from kvcalc.model.layouts import LayerKind
from kvcalc.model.shape import ModelShape
from kvcalc.units import cdiv

#: ``fp8_ds_mla`` page alignment (``alignment=576`` in the DeepSeek-V4 specs)
PAGE_ALIGNMENT = 576
MAIN_BLOCK_SIZE = 256  # DEEPSEEK_V4_INDEXER / FLASHMLA_SPARSE_DSV4 kernel block
SWA_BLOCK_SIZE = 64  # DeepseekV4SWACache
#: the KV-cache dtypes served with the fp8_ds_mla layout (checked: auto and fp8 give the same pages)
SUPPORTED_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla")


def is_deepseek_v4(model: ModelShape) -> bool:
    return LayerKind.COMPRESSED in model.kinds


def check_dtype(requested: str) -> None:
    if requested.strip().lower() not in SUPPORTED_DTYPES:
        raise InputError(
            f"cache dtype {requested!r} is not modelled for DeepSeek-V4 in vLLM (kvcalc knows the "
            "fp8_ds_mla layout it uses for auto and fp8)",
            hint="use --kv-cache-dtype auto or fp8",
            code="unsupported-dtype",
        )


def _aligned(nbytes: int) -> int:
    return cdiv(nbytes, PAGE_ALIGNMENT) * PAGE_ALIGNMENT


def _spec(kind: SpecKind, block: int, real: int, window: int | None, shape: tuple) -> LayerSpec:
    padded = _aligned(real)
    return LayerSpec(
        kind=kind, block_size=block, real_page_bytes=real,
        page_padded_bytes=padded if padded != real else None, window=window, shape=shape,
    )  # fmt: skip


def layer_specs(index: int, layer: CompressedSparseAttention) -> list[tuple[int, LayerSpec]]:
    """The (layer, spec) pairs one DeepSeek-V4 layer registers, in vLLM's order."""
    record = layer.latent_bytes
    out = [
        (index, _spec(SpecKind.SLIDING, SWA_BLOCK_SIZE, SWA_BLOCK_SIZE * record, layer.sliding_window,
                      ("swa", record)))
    ]  # fmt: skip
    ratio = layer.compress_ratio
    if not ratio:
        return out
    states = MAIN_BLOCK_SIZE // ratio
    state_block = 4 if ratio == 4 else 8
    dims = layer.compressor_state_dims
    if layer.overlap:
        out.append((index, _spec(SpecKind.MLA, MAIN_BLOCK_SIZE, states * layer.indexer_key_bytes, None,
                                 ("indexer", ratio))))  # fmt: skip
        out.append((index, _spec(SpecKind.SLIDING, state_block, state_block * dims[1] * 4,
                                 layer.compressor_window, ("compressor", dims[1]))))  # fmt: skip
    out.append(
        (index, _spec(SpecKind.MLA, MAIN_BLOCK_SIZE, states * record, None, ("compressed", ratio)))
    )
    out.append((index, _spec(SpecKind.SLIDING, state_block, state_block * dims[0] * 4,
                             layer.compressor_window, ("compressor", dims[0]))))  # fmt: skip
    return out


def _bucket_key(spec: LayerSpec) -> tuple:
    # UniformTypeKVCacheSpecs.is_uniform_type: one block size, one base type (and one window for
    # sliding-window specs)
    return (spec.kind, spec.block_size, spec.window if spec.kind is SpecKind.SLIDING else None)


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """``_approximate_gcd``: the chunk size in [lower_bound, max] with least upward padding."""
    best, best_pad = lower_bound, None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


@dataclass(frozen=True)
class _Bucket:
    members: list[tuple[int, LayerSpec]]

    def by_page(self) -> dict[int, list[tuple[int, LayerSpec]]]:
        out: dict[int, list[tuple[int, LayerSpec]]] = {}
        for member in self.members:
            out.setdefault(member[1].page_bytes, []).append(member)
        return out

    @property
    def balanced(self) -> bool:
        return len({len(v) for v in self.by_page().values()}) == 1

    @property
    def max_per_page(self) -> int:
        return max(len(v) for v in self.by_page().values())


def packed_groups(model: ModelShape) -> list[Group]:
    """``_get_packed_kv_cache_groups`` over the DeepSeek-V4 caches (no mamba or ring buffers)."""
    specs: list[tuple[int, LayerSpec]] = []
    for index, layer in enumerate(model.layers):
        if isinstance(layer, CompressedSparseAttention):
            specs += layer_specs(index, layer)
    buckets: dict[tuple, _Bucket] = {}
    for member in specs:
        buckets.setdefault(_bucket_key(member[1]), _Bucket([])).members.append(member)
    mixed = [b.max_per_page for b in buckets.values() if b.balanced and len(b.by_page()) > 1]
    repeats = None
    if mixed:
        balanced = [b.max_per_page for b in buckets.values() if b.balanced]
        repeats = approximate_gcd(balanced, lower_bound=max(mixed))
    groups: list[Group] = []
    for bucket in buckets.values():
        n = cdiv(bucket.max_per_page, repeats) if bucket.balanced and repeats else 1
        if n == 1:
            groups.append(_group(bucket.members))
            continue
        pattern = list(zip(*bucket.by_page().values(), strict=True))
        for i in range(n):
            groups.append(_group([m for repeat in pattern[i::n] for m in repeat]))
    return groups


def _group(members: list[tuple[int, LayerSpec]]) -> Group:
    return Group(
        layers=tuple(i for i, _ in members), specs=tuple(s for _, s in members), uniform_type=True
    )
