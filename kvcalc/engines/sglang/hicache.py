"""SGLang 0.5.23's hierarchical cache (HiCache): the host KV pool beside the GPU pool.

``--enable-hierarchical-cache`` (``--enable-hicache``) builds, on every TP rank, a host mirror
of that rank's device pool (``mem_cache/pool_host/base.py`` ``HostKVCache.__init__``; the
classes ``MHATokenToKVPoolHost``/``MLATokenToKVPoolHost``, built by
``hybrid_pool_assembler.build_kv_host_pool``). Its token count::

    size = int(hicache_size · 1e9 // size_per_token)     # --hicache-size GB, when > 0
         = int(device_tokens · hicache_ratio)            # else
    size = (size // page_size + 1) · page_size           # page-aligned, plus one padding page

``size_per_token`` is the rank's own cell: MHA ``(k + v) · heads_rank · layers · dtype``, MLA
``(kv_lora_rank + rope) · layers · dtype`` (the latent on every rank, as on the GPU). The device
pool does not change: the host pool is sized after it, from its token count. The layout
(``--hicache-mem-layout``, default ``page_first``) and the I/O backend arrange the same bytes.

``--hicache-ratio`` unset: 2.0 (``handle_hicache_ratio_default``), and SGLang auto-sizes it
(``hicache_auto_size.auto_size_hicache``, ``--hicache-host-memory-fraction`` f, default 0.8):
``ratio = min(2.0, f · ((free host − 10 GiB) // ranks per host) · 0.95 / device pool bytes)``.
kvcalc does not know the host's free memory: it plans the 2.0 pool and says how much free host
memory that takes. A given ratio or size turns auto-sizing off.

SGLang refuses to start when the pool exceeds ``(free host − 10 GiB) // ranks per host`` ("Not
enough host memory available", ``_allocate_host_buffer``); it refuses HiCache with
``--disable-radix-cache`` and ``--hicache-host-memory-mode buffer_only`` without a storage backend.
A ratio ≤ 1 is taken (a warning only). Checked against SGLang's own classes (recorded:
tests/fixtures/sglang_0_5_23/hicache_host_pool.json). **Not modelled** (refused by name):
HiCache on hybrid SWA, Mamba and DSA models (their host pools are split by
``_split_hicache_size``), with speculative decoding (draft layers packed in the host pool), DP
attention and pipeline parallelism (not recorded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.extra import extra_bool, extra_choice
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.layouts import LayerKind
from kvcalc.units import GIB

#: the engine options (``-E``; the ``launch_server`` flags' dests) HiCache reads
KEYS = ("enable_hierarchical_cache", "hicache_ratio", "hicache_size", "hicache_mem_layout",
        "hicache_io_backend", "hicache_host_memory_mode", "hicache_host_memory_fraction",
        "hicache_write_policy")  # fmt: skip
#: ``hicache_mem_layout`` choices (``arg_groups/fields/memory.py``) and the default
LAYOUTS = ("layer_first", "page_first", "page_first_direct", "page_first_kv_split", "page_head")
IO_BACKENDS = ("direct", "kernel", "kernel_ascend")
WRITE_POLICIES = ("write_back", "write_through", "write_through_selective")
DEFAULT_RATIO = 2.0
DEFAULT_FRACTION = 0.8
#: ``HICACHE_HOST_MEMORY_RESERVE_BYTES`` and auto-sizing's ``_ALLOCATION_SLACK_FRACTION``
HOST_RESERVE_BYTES = 10 * GIB
SLACK_FRACTION = 0.05


@frozen
class HiCacheOptions:
    """The HiCache flags as SGLang resolves them (ratio None: unset, auto-sized)."""

    ratio: float | None = None
    #: ``--hicache-size`` in GB (10^9 B); 0: sized by the ratio
    size_gb: int = 0
    mem_layout: str = "page_first"
    io_backend: str = "kernel"
    host_memory_fraction: float = DEFAULT_FRACTION

    @property
    def auto_sized(self) -> bool:
        """Whether SGLang shrinks the default ratio to the host's free memory."""
        return self.ratio is None and self.size_gb <= 0


def options(extra: Mapping[str, Any]) -> HiCacheOptions | None:
    """The HiCache options in ``extra``; None without ``enable_hierarchical_cache`` (the other
    HiCache keys alone build no host pool: :func:`check` says so)."""
    if not extra_bool(extra, "enable_hierarchical_cache", False):
        return None
    mode = extra_choice(extra, "hicache_host_memory_mode", "cache", ("cache", "buffer_only"))
    if mode == "buffer_only":
        raise InputError("SGLang refuses it: --hicache-host-memory-mode buffer_only requires a "
                         "storage backend (--hicache-storage-backend): host memory is only a "
                         "staging buffer and all cached data lives in storage.",
                         hint="use the cache mode; kvcalc does not model HiCache storage backends",
                         code="invalid-input")  # fmt: skip
    if extra_bool(extra, "disable_radix_cache", False):
        raise InputError("SGLang refuses it: The arguments enable-hierarchical-cache and "
                         "disable-radix-cache are mutually exclusive and cannot be used at the "
                         "same time. Please use only one of them.",
                         hint="drop one of them", code="invalid-input")  # fmt: skip
    ratio = extra.get("hicache_ratio")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                              or ratio <= 0):  # fmt: skip
        raise InputError(f"hicache_ratio must be a positive number, got {ratio!r}",
                         code="invalid-input")  # fmt: skip
    size = extra.get("hicache_size", 0)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InputError(f"hicache_size must be a whole number of GB (10^9 B), got {size!r}",
                         hint="SGLang reads --hicache-size as an integer", code="invalid-input")  # fmt: skip
    fraction = extra.get("hicache_host_memory_fraction", DEFAULT_FRACTION)
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, (int, float))
        or not 0 < fraction <= 1
    ):
        raise InputError("SGLang refuses it: --hicache-host-memory-fraction must be in (0, 1].",
                         hint="give a fraction in (0, 1]", code="invalid-input")  # fmt: skip
    extra_choice(extra, "hicache_write_policy", "write_through", WRITE_POLICIES)
    layout = extra_choice(extra, "hicache_mem_layout", "page_first", LAYOUTS)
    io = extra_choice(extra, "hicache_io_backend", "kernel", IO_BACKENDS)
    # resolve_layout_io_compatibility: the two pairs SGLang rewrites (the bytes are the same)
    if layout == "page_first_direct" and io == "kernel":
        io = "direct"
    elif layout == "page_first" and io == "direct":
        layout = "page_first_direct"
    return HiCacheOptions(ratio=None if ratio is None else float(ratio), size_gb=size,
                          mem_layout=layout, io_backend=io,
                          host_memory_fraction=float(fraction))  # fmt: skip


def check(opts: HiCacheOptions | None, request: EngineRequest, profile: str,
          notes: list[str]) -> None:  # fmt: skip
    """Refuse the HiCache deployments kvcalc has not recorded; say when the HiCache keys are
    given without ``enable_hierarchical_cache``."""
    from kvcalc.engines.sglang import layers, mamba

    if opts is None:
        given = sorted(k for k in KEYS[1:] if k in request.extra)
        if given:
            notes.append(f"{', '.join(given)} without --enable-hierarchical-cache: SGLang builds "
                         "no host pool")  # fmt: skip
        return
    model = request.model
    what = None
    if profile != "latest":
        what = f"SGLang {profile} (modelled for SGLang 0.5.23 only)"
    elif mamba.is_hybrid(model):
        what = "a Mamba/linear-attention hybrid (its state has a host pool of its own)"
    elif any(x.kind is LayerKind.SLIDING for x in model.layers):
        what = "a sliding-window model (full and SWA host pools split --hicache-size)"
    elif layers.is_dsa(model):
        what = "a DSA model (the indexer has a host pool of its own)"
    elif request.speculative is not None:
        what = "speculative decoding (draft layers packed into the host pool)"
    elif request.attention_data_parallel_size > 1:
        what = "DP attention"
    elif request.pipeline_parallel_size > 1:
        what = "pipeline parallelism (a host pool per stage, synced to the smallest)"
    elif request.decode_context_parallel_size > 1:
        what = "decode context parallelism"
    if what is not None:
        raise InputError(f"SGLang HiCache with {what} is not modelled (not recorded against "
                         "SGLang's host-pool classes)",
                         hint="plan it without --enable-hierarchical-cache (the GPU pool is the "
                         "same)", code="offload-not-modelled")  # fmt: skip


def host_tokens(
    opts: HiCacheOptions, *, device_tokens: int, bytes_per_token: int, page: int
) -> int:
    """``HostKVCache.__init__``: the host pool's tokens on one rank (the padding page included).

    >>> host_tokens(HiCacheOptions(ratio=2.0), device_tokens=163_840, bytes_per_token=131_072, page=1)
    327681
    >>> host_tokens(HiCacheOptions(size_gb=100), device_tokens=163_840, bytes_per_token=131_072, page=1)
    762940
    """
    if opts.size_gb > 0:
        size = int(opts.size_gb * 1e9 // bytes_per_token)
    else:
        size = int(device_tokens * (DEFAULT_RATIO if opts.ratio is None else opts.ratio))
    return (size // page + 1) * page


def auto_ratio(opts: HiCacheOptions, *, device_pool_bytes: int, host_free_bytes: int,
               ranks_per_host: int = 1) -> float:  # fmt: skip
    """``auto_size_hicache``: the ratio SGLang uses when none is given, for a host with
    ``host_free_bytes`` available (≤ 0: SGLang stops, "No host memory is left for HiCache")."""
    budget = int(
        (host_free_bytes - HOST_RESERVE_BYTES) // ranks_per_host * opts.host_memory_fraction
    )
    return min(DEFAULT_RATIO, budget * (1 - SLACK_FRACTION) / device_pool_bytes)


def full_ratio_host_free_bytes(opts: HiCacheOptions, *, device_pool_bytes: int,
                               ranks_per_host: int) -> int:  # fmt: skip
    """The free host memory at which auto-sizing keeps the full 2.0 ratio (inverting
    :func:`auto_ratio`)."""
    per_rank = DEFAULT_RATIO * device_pool_bytes / (1 - SLACK_FRACTION) / opts.host_memory_fraction
    return int(HOST_RESERVE_BYTES + per_rank * ranks_per_host) + 1


@frozen
class HiCacheTier:
    """The host pool of one SGLang server (its TP ranks), for the plan's host fields."""

    #: tokens one rank's host pool holds (every rank holds the same tokens)
    kv_tokens: int
    #: host bytes of all ranks' pools
    host_bytes: int
    notes: tuple[str, ...] = ()


def host_tier(opts: HiCacheOptions, *, device_tokens: int, device_pool_bytes: int,
              bytes_per_token: int, page: int, ranks: int, mla: bool) -> HiCacheTier:  # fmt: skip
    """The host pools of ``ranks`` TP ranks, each the mirror of a device pool of
    ``device_tokens`` (``device_pool_bytes`` with its padding page)."""
    tokens = host_tokens(
        opts, device_tokens=device_tokens, bytes_per_token=bytes_per_token, page=page
    )
    per_rank = tokens * bytes_per_token
    cls = "MLATokenToKVPoolHost" if mla else "MHATokenToKVPoolHost"
    if opts.size_gb > 0:
        how = f"--hicache-size {opts.size_gb} GB: int({opts.size_gb}e9 // {bytes_per_token:,} B)"
    else:
        ratio = DEFAULT_RATIO if opts.ratio is None else opts.ratio
        how = f"int({device_tokens:,} device tokens × hicache_ratio {ratio:g})"
    notes = [f"HiCache host pool ({cls}, layout {opts.mem_layout}): {how}, page-aligned plus one "
             f"page = {tokens:,} tokens × {bytes_per_token:,} B = {per_rank / GIB:.2f} GiB per rank"
             + (f", × {ranks} TP ranks = {per_rank * ranks / GIB:.2f} GiB of host memory"
                if ranks > 1 else "")
             + "; pinned host memory, the GPU pool unchanged"]  # fmt: skip
    if opts.auto_sized:
        need = full_ratio_host_free_bytes(
            opts, device_pool_bytes=device_pool_bytes, ranks_per_host=ranks
        )
        notes.append(f"hicache_ratio unset: SGLang auto-sizes it to min(2.0, "
                     f"{opts.host_memory_fraction:g} · ((free host memory − 10 GiB) // ranks per "
                     f"host) · 0.95 / {device_pool_bytes:,} B device pool); the 2.0 pool planned "
                     f"here needs {need / GIB:.1f} GiB of free host memory with the {ranks} "
                     "rank(s) on one host (less free memory: a smaller host pool; give "
                     "--hicache-ratio or --hicache-size to fix it)")  # fmt: skip
    else:
        notes.append(f"SGLang refuses to start when a rank's pool ({per_rank / 1e9:.2f} GB) exceeds "
                     "(free host memory − 10 GiB) // ranks per host: Not enough host memory "
                     "available")  # fmt: skip
    if tokens <= device_tokens:
        notes.append(f"the host pool ({tokens:,} tokens) is no larger than the device pool "
                     f"({device_tokens:,}): SGLang warns that L2 cache effectiveness is reduced")  # fmt: skip
    return HiCacheTier(kv_tokens=tokens, host_bytes=per_rank * ranks, notes=tuple(notes))
