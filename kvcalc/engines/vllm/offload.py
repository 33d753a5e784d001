"""vLLM 0.33's host tiers: KV offloading to CPU memory and weight offloading (``--cpu-offload-gb``).

**Native KV offloading** (``--kv-offloading-size GiB``, ``--kv-offloading-backend native``):
``config/vllm.py`` ``_post_init_kv_transfer_config`` sets the ``OffloadingConnector`` with
``cpu_bytes_to_use = size · 2^30`` ("when TP > 1, the total summed across TP ranks"). Its capacity
(``distributed/kv_transfer/kv_connector/v1/offloading/config.py`` ``build_offloading_config``, then
``v1/kv_offload/cpu/spec.py`` ``CPUOffloadingSpec.__init__``)::

    worker_kv_bytes_per_block = GPU KV tensor bytes // num_blocks   # 0 without blocks: no chunk
    copies = 1 if replicated_layout else world_size   # world_size = TP · PP · PCP
    chunk  = round_up(worker_kv_bytes_per_block · copies · blocks_per_chunk, 4096)
    num_chunks = cpu_bytes_to_use // chunk ;  tokens = num_chunks · blocks_per_chunk · block_size · DCP

``replicated_layout``: an MLA latent every TP rank holds whole (``kv_tp_replicas`` = TP), with TP
alone (PP, PCP and DCP 1: DCP shards the latent over its ranks). Under DCP a block spans
``block_size · DCP`` tokens (``resolve_dcp_kv_block_size``).

Offload keys are ``(block_hash, group_idx)`` (``v1/kv_offload/base.py`` ``make_offload_key``): a
model with several KV-cache groups spends a chunk per group for every token range, so its token
capacity is the above divided by the groups. The chunks live in pinned host memory only
(``v1/kv_offload/cpu/gpu_worker.py``): the GPU budget is unchanged. ``lmcache`` as backend starts
``LMCacheMPConnector``, whose capacity lives in the LMCache server ("kv_offloading_size is not
propagated"): unknown to kvcalc, and said.

**``--kv-transfer-config``**: ``OffloadingConnector`` with ``cpu_bytes_to_use`` in its extra config
as above; ``NixlConnector`` with ``kv_buffer_device: cpu`` mirrors every layer's KV view in host
memory (``nixl/base_worker.py`` ``initialize_host_xfer_buffer``: a host tensor of each view's shape;
each layer of a hybrid's groups views all the blocks of the one allocation the groups share, so its
buffers add up to the groups × the GPU cache), ``cuda`` registers the GPU cache itself; the LMCache connectors keep their host pool in LMCache's own configuration,
which kvcalc does not read (said as unknown). Any other connector is refused (``offload-not-modelled``).

**Weight offloading** (``--cpu-offload-gb``, per GPU; ``config/offload.py``,
``model_executor/offloader/uva.py`` ``UVAOffloader._maybe_offload_to_cpu``): ``make_layers`` hands
every decoder layer to the offloader in order, which moves its parameters to pinned host memory
until the moved bytes reach ``cpu_offload_gb · 2^30``; the parameter that crosses the budget is
moved whole. The GPU weights shrink by the moved bytes, one for one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kvcalc.engines.base import KvCacheGroup
from kvcalc.engines.host_options import OffloadOptions as HostOptions
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.units import GIB

#: ``CPUOffloadingSpec.BLOCK_SIZE_ALIGNMENT`` (``SharedOffloadRegion``): chunks are 4 KiB aligned
CHUNK_ALIGNMENT = 4096
#: the connectors whose host memory kvcalc sizes (or says it cannot)
NATIVE = "OffloadingConnector"
NIXL = "NixlConnector"
LMCACHE = ("LMCacheConnectorV1", "LMCacheMPConnector")


@frozen
class KvTransfer:
    """``--kv-transfer-config`` as vLLM reads the keys kvcalc models."""

    #: None: no connector (vLLM then runs none, unless --kv-offloading-size sets its own)
    connector: str | None
    buffer_device: str = "cuda"
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def extra_config(self) -> dict[str, Any]:
        return dict(self.extra)


def parse_kv_transfer_config(text: str, *, what: str = "--kv-transfer-config") -> KvTransfer:
    """The connector, buffer device and extra config of a ``--kv-transfer-config`` JSON."""
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as exc:
        raise InputError(f"{what}: not JSON ({exc.msg})", hint='e.g. \'{"kv_connector":"NixlConnector"}\'',
                         code="invalid-input") from None  # fmt: skip
    connector = data.get("kv_connector") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(connector, (str, type(None))):
        raise InputError(f"{what}: needs a JSON object (with kv_connector a name)",
                         hint='e.g. \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'',
                         code="invalid-input")  # fmt: skip
    if connector is not None and connector not in (NATIVE, NIXL, *LMCACHE):
        raise InputError(f"{what}: the {connector} connector's memory is not modelled",
                         hint=f"kvcalc models {NATIVE}, {NIXL} and the LMCache connectors",
                         code="offload-not-modelled")  # fmt: skip
    extra = data.get("kv_connector_extra_config") or {}
    if not isinstance(extra, dict):
        raise InputError(f"{what}: kv_connector_extra_config must be an object", code="invalid-input",
                         hint="write it as a JSON object")  # fmt: skip
    device = str(data.get("kv_buffer_device", "cuda"))
    return KvTransfer(connector=connector, buffer_device=device, extra=tuple(sorted(extra.items())))


@frozen
class HostKv:
    """The host KV tier of one engine (all its GPUs)."""

    #: tokens the host tier holds (None: no host KV, or its size is not known)
    tokens: int | None
    #: host bytes it takes (None: not known)
    host_bytes: int | None
    #: offload chunks (native offloading), 0 otherwise
    num_chunks: int = 0
    chunk_bytes: int = 0
    note: str = ""


def _blocks_per_chunk(extra: dict[str, Any], block_size: int) -> int:
    """``build_offloading_config``: ``blocks_per_chunk``, or ``block_size`` tokens per chunk (a
    multiple of the GPU block), not both."""
    per_chunk, tokens = extra.get("blocks_per_chunk"), extra.get("block_size")
    if per_chunk is not None and tokens is not None:
        raise InputError("Specify only one of 'block_size' or 'blocks_per_chunk' in "
                         "kv_connector_extra_config (vLLM refuses both)",
                         hint="keep one of them", code="invalid-input")  # fmt: skip
    if per_chunk is not None:
        if int(per_chunk) <= 0:
            raise InputError("'blocks_per_chunk' must be greater than 0 (vLLM)",
                             hint="give a positive number", code="invalid-input")  # fmt: skip
        return int(per_chunk)
    if tokens is not None:
        if int(tokens) % block_size:
            raise InputError(f"'block_size'={tokens} in kv_connector_extra_config must be a "
                             f"multiple of the GPU KV cache block size ({block_size} tokens)",
                             hint="use a multiple, or 'blocks_per_chunk'", code="invalid-input")  # fmt: skip
        return int(tokens) // block_size
    return 1


def native_host_kv(
    cpu_bytes: int,
    *,
    gpu_kv_bytes: int,
    num_blocks: int,
    block_size: int,
    num_groups: int,
    world_size: int,
    replicated: bool,
    extra: dict[str, Any] | None = None,
    decode_context_parallel_size: int = 1,
) -> HostKv:
    """The ``OffloadingConnector``'s CPU capacity for ``cpu_bytes`` of host memory (all ranks).

    ``replicated``: vLLM's ``replicated_layout`` (MLA at TP > 1, PP 1: one copy for all ranks).
    Under DCP a block spans ``block_size × dcp`` tokens (``resolve_dcp_kv_block_size``), each
    rank holding its share: so does a chunk.

    >>> native_host_kv(64 * GIB, gpu_kv_bytes=10240 * 2**21, num_blocks=10240, block_size=16,
    ...                num_groups=1, world_size=1, replicated=False).tokens   # Llama-3.1-8B
    524288
    """
    block_tokens = block_size * decode_context_parallel_size
    per_chunk = _blocks_per_chunk(extra or {}, block_tokens)
    # build_offloading_config: worker_kv_bytes_per_block is 0 without GPU blocks, and
    # CPUOffloadingSpec then sizes no chunk (num_chunks = kv_bytes_per_chunk = 0)
    per_block = gpu_kv_bytes // num_blocks if num_blocks > 0 else 0
    if per_block <= 0:
        return HostKv(tokens=0, host_bytes=0, note="KV offloading: no GPU blocks to offload")
    copies = 1 if replicated else world_size
    chunk = -(-(per_block * copies * per_chunk) // CHUNK_ALIGNMENT) * CHUNK_ALIGNMENT
    chunks = cpu_bytes // chunk
    tokens = chunks * per_chunk * block_tokens
    note = (f"KV offloading (native): {cpu_bytes / GIB:g} GiB of host memory in {chunks:,} chunks of "
            f"{chunk:,} B ({per_block:,} B per GPU block × "
            + ("1 copy: the MLA latent is replicated on every TP rank" if replicated
               else f"{copies} rank(s)")
            + (f" × {per_chunk} blocks" if per_chunk > 1 else "")
            + (f", blocks of {block_tokens} tokens over DCP {decode_context_parallel_size}"
               if decode_context_parallel_size > 1 else "")
            + f", 4 KiB aligned) = {tokens:,} tokens")  # fmt: skip
    if num_groups > 1:
        tokens //= num_groups
        note += (f"; ÷ {num_groups} KV-cache groups (vLLM keys each group's chunks apart) = "
                 f"{tokens:,} tokens of every layer")  # fmt: skip
    return HostKv(tokens=tokens, host_bytes=chunks * chunk, num_chunks=chunks, chunk_bytes=chunk,
                  note=note)  # fmt: skip


def layer_view_bytes(num_blocks: int, groups: Sequence[KvCacheGroup]) -> int:
    """The bytes of the per-layer views ``allocate_kv_cache`` makes of one rank's cache: every
    layer of every group sees all ``num_blocks`` blocks (groups overlay one allocation), so a
    hybrid's views add up to more than the allocation."""
    return num_blocks * sum(
        g.page_bytes * (1 if g.uniform_type else g.num_layers - g.padding_layers) for g in groups
    )


def nixl_host_mirror(view_bytes: int, world_size: int) -> HostKv:
    """``NixlConnector`` with ``kv_buffer_device: cpu``: ``initialize_host_xfer_buffer`` allocates a
    host tensor of each layer's view shape (``view_bytes`` per rank: :func:`layer_view_bytes`)."""
    total = view_bytes * world_size
    return HostKv(tokens=None, host_bytes=total,
                  note=f"NixlConnector kv_buffer_device=cpu: the GPU KV cache mirrored in host memory "
                  f"({view_bytes:,} B × {world_size} GPU(s)); a transfer buffer, no extra capacity")  # fmt: skip


def lmcache_unknown(connector: str) -> HostKv:
    return HostKv(tokens=None, host_bytes=None,
                  note=f"{connector}: the host KV pool is LMCache's (its own configuration or server), "
                  "not vLLM's: its size is not known to kvcalc")  # fmt: skip


@frozen
class HostTier:
    """What one vLLM engine (its TP × PP GPUs) keeps in host memory."""

    #: CPU-resident KV capacity in tokens (None: none, or not known)
    kv_tokens: int | None
    #: host bytes for KV (None: not known, e.g. LMCache's own pool)
    kv_bytes: int | None
    #: host bytes of offloaded weights, all GPUs
    weights_bytes: int = 0
    notes: tuple[str, ...] = ()

    @property
    def host_bytes(self) -> int | None:
        """Host memory the tiers need in all (None when a part is not known)."""
        return None if self.kv_bytes is None else self.kv_bytes + self.weights_bytes


def host_tier(
    options: HostOptions,
    *,
    gpu_kv_bytes: int,
    num_blocks: int,
    block_size: int,
    num_groups: int,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
    mla: bool,
    offloaded_weight_bytes: int,
    decode_context_parallel_size: int = 1,
    prefill_context_parallel_size: int = 1,
    view_bytes: int | None = None,
) -> HostTier:
    """The host tiers of ``options`` for a plan of ``num_blocks`` GPU blocks (see the module doc)."""
    # ParallelConfig.world_size: PP × TP × PCP (DCP reuses the TP ranks)
    world = tensor_parallel_size * pipeline_parallel_size * prefill_context_parallel_size
    dcp = decode_context_parallel_size
    # build_offloading_config's replicated_layout: an MLA latent at TP > 1 that every TP rank
    # holds whole (kv_tp_replicas == TP: not under DCP, which shards it), TP alone (PP, PCP, DCP 1)
    replicated = (mla and tensor_parallel_size > 1 and pipeline_parallel_size == 1
                  and prefill_context_parallel_size == 1 and dcp == 1)  # fmt: skip
    transfer = (
        parse_kv_transfer_config(options.kv_transfer_config) if options.kv_transfer_config else None
    )
    notes: list[str] = []
    kv: HostKv | None = None
    if options.kv_offloading_bytes is not None:
        if transfer is not None and transfer.connector not in (NATIVE, None):
            notes.append(f"--kv-offloading-size replaces the {transfer.connector} of --kv-transfer-config "
                         "(vLLM's _post_init_kv_transfer_config sets its own connector)")  # fmt: skip
        if options.kv_offloading_backend == "lmcache":
            kv = lmcache_unknown("LMCacheMPConnector (--kv-offloading-backend lmcache)")
        else:
            kv = native_host_kv(options.kv_offloading_bytes, gpu_kv_bytes=gpu_kv_bytes,
                                num_blocks=num_blocks, block_size=block_size, num_groups=num_groups,
                                world_size=world, replicated=replicated,
                                extra=transfer.extra_config if transfer else None,
                                decode_context_parallel_size=dcp)  # fmt: skip
    elif transfer is not None:
        if transfer.connector == NATIVE:
            cpu = transfer.extra_config.get("cpu_bytes_to_use")
            if not cpu:
                raise InputError("OffloadingConnector: cpu_bytes_to_use must be specified in "
                                 "kv_connector_extra_config (vLLM refuses to start)",
                                 hint="add cpu_bytes_to_use, or use --kv-offloading-size GiB",
                                 code="invalid-input")  # fmt: skip
            kv = native_host_kv(int(cpu), gpu_kv_bytes=gpu_kv_bytes, num_blocks=num_blocks,
                                block_size=block_size, num_groups=num_groups, world_size=world,
                                replicated=replicated, extra=transfer.extra_config,
                                decode_context_parallel_size=dcp)  # fmt: skip
        elif transfer.connector is None:
            notes.append("--kv-transfer-config names no kv_connector: vLLM runs no connector")
        elif transfer.connector == NIXL:
            if transfer.buffer_device == "cpu":
                kv = nixl_host_mirror(gpu_kv_bytes if view_bytes is None else view_bytes, world)
            else:
                kv = HostKv(tokens=None, host_bytes=0,
                            note=f"NixlConnector kv_buffer_device={transfer.buffer_device}: registers "
                            "the GPU KV cache itself, no host copy")  # fmt: skip
        else:
            kv = lmcache_unknown(transfer.connector)
    if kv is not None and kv.note:
        notes.append(kv.note)
    weights = offloaded_weight_bytes * world
    if weights:
        notes.append(f"weights offloaded to host memory: {offloaded_weight_bytes:,} B per GPU × "
                     f"{world} GPU(s) = {weights:,} B of pinned host memory")  # fmt: skip
    return HostTier(kv_tokens=kv.tokens if kv else None,
                    kv_bytes=(kv.host_bytes if kv else 0), weights_bytes=weights, notes=tuple(notes))  # fmt: skip


def weight_offload(options: HostOptions, *, layer_bytes: int, pipeline_parallel_size: int,
                   has_vision: bool) -> tuple[int, str]:  # fmt: skip
    """(bytes moved per GPU, note) for ``--cpu-offload-gb``."""
    budget = options.cpu_offload_bytes
    if pipeline_parallel_size > 1:
        raise InputError("--cpu-offload-gb with pipeline parallelism is not modelled",
                         hint="plan with -pp 1", code="offload-not-modelled")  # fmt: skip
    if layer_bytes <= 0:
        raise InputError("--cpu-offload-gb needs the decoder layers' bytes, which this plan lacks",
                         hint="plan without --cpu-offload-gb and lower --weights-memory by hand",
                         code="offload-not-modelled")  # fmt: skip
    if has_vision and budget > layer_bytes:
        raise InputError("--cpu-offload-gb above the decoder layers reaches the vision tower, "
                         "whose offloading is not modelled",
                         hint="use a budget below the decoder layers' bytes", code="offload-not-modelled")  # fmt: skip
    # UVAOffloader: parameters move until the budget is reached, at most every decoder layer (the
    # crossing parameter's overshoot is said, not counted)
    moved = min(budget, layer_bytes)
    note = (f"--cpu-offload-gb: {moved:,} B of parameters per GPU (the vision tower first where it has one, "
            "then the decoder layers) moved to pinned host "
            "memory in module order (model_executor/offloader/uva.py); vLLM moves the parameter that "
            "crosses the budget whole, so up to one parameter more leaves the GPU (not counted: "
            "the plan is that much pessimistic)")  # fmt: skip
    if moved < budget:
        note += f"; the budget exceeds the decoder layers ({layer_bytes:,} B): all of them moved"
    return moved, note
