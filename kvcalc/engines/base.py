"""The interface every serving-engine model shares: one request in, one frozen plan out.

An engine module turns an :class:`EngineRequest` (a parsed :class:`~kvcalc.model.shape.ModelShape` plus
plain serving numbers) into a :class:`KvCachePlan`: the block/page size, the number of blocks, the
token capacity and concurrency *exactly as that engine computes and prints them*, whether one
request at ``max_model_len`` fits, and the engine's own log or error text for those numbers.

Everything here is pure: no I/O, no torch, no config dicts. Bad inputs raise
:class:`~kvcalc.errors.InputError` with a kebab-case ``code``; nothing validates with ``assert``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kvcalc.engines.extra import is_int, positive
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.layouts import LayerKind
from kvcalc.model.shape import ModelShape
from kvcalc.units import cdiv

if TYPE_CHECKING:  # built only by deployments that ask for them: kept off start-up
    from kvcalc.engines.host_options import OffloadOptions
    from kvcalc.engines.lora_options import LoraOptions
    from kvcalc.engines.speculative import SpeculativeDraft


@frozen
class RunMemory:
    """What the planner estimated of one worker's memory, per GPU, for the lines the engine prints
    about it (vLLM's "Model loading took", its start-up usage line)."""

    weights_bytes: int
    non_torch_bytes: int
    activation_bytes: int
    #: the CUDA graphs' capture, whether or not the release subtracts it from the budget
    cudagraph_bytes: int
    #: free on the GPU when the engine starts (vLLM's start-up snapshot); None: not known
    startup_free_bytes: int | None = None
    #: ``--kv-cache-memory`` as given: vLLM skips its memory profile
    kv_cache_memory_bytes: int | None = None


@frozen
class EngineRequest:
    """What a plan needs to know. Per-GPU figures are per device (per TP/PP rank).

    ``extra`` carries engine-specific knobs; each engine lists the keys it accepts in its
    ``EXTRA_KEYS`` and rejects others with ``unknown-engine-option``:

    - vllm: ``usage_context`` (``"api_server"`` default, ``"llm"``, or ``"engine"`` for
      ``AsyncLLMEngine.from_engine_args``), ``mamba_cache_mode``
      (``"none"``/``"align"``), ``max_concurrent_batches`` (int), ``pp_layer_partition``
      (tuple of ints, ``VLLM_PP_LAYER_PARTITION``), ``swap_space_bytes`` (V0 CPU blocks, 4 GiB),
      ``num_gpu_blocks_override`` (int);
    - sglang: ``page_size`` (1), ``max_total_tokens``, ``swa_full_tokens_ratio`` (0.8),
      ``hybrid_swa`` (bool), ``mem_fraction_static`` (only quoted in the "Not enough memory" text),
      for Mamba/linear-attention hybrids ``mamba_full_memory_ratio`` (0.9), ``max_mamba_cache_size``
      (slots), ``disable_radix_cache`` (bool: one state slot per request); HiCache's
      ``enable_hierarchical_cache`` (bool), ``hicache_ratio``, ``hicache_size`` (GB),
      ``hicache_mem_layout``, ``hicache_io_backend``, ``hicache_host_memory_mode``,
      ``hicache_host_memory_fraction``, ``hicache_write_policy`` (:mod:`kvcalc.engines.sglang.hicache`);
    - llamacpp: ``n_ctx`` (default ``max_model_len``), ``n_seq_max`` (1), ``n_ubatch`` (512),
      ``n_batch`` (2048), ``kv_unified`` (False), ``swa_full`` (False), ``flash_attn`` (True),
      ``type_v`` (V cache type; default: the K type), ``buffer_name`` ("CUDA0", for the log line);
    - hf: ``batch_size`` (1), ``cache_implementation`` (``"dynamic"``/``"static"``),
      ``dynamic_cache_with_config`` (True); the transformers version is ``engine_version``;
    - trtllm: ``tokens_per_block`` (32), ``max_tokens``.
    """

    #: the model as parsed (model dtype); the engine applies the cache dtype and TP itself
    model: ModelShape
    #: the engine's ``--kv-cache-dtype`` / ``-ctk`` value; vLLM and llama.cpp spellings accepted
    kv_cache_dtype: str = "auto"
    #: the weight dtype asked for (vLLM ``--dtype``: ``bfloat16``, ``float16``, ``float32``...);
    #: None = ``auto``
    dtype: str | None = None
    #: an engine version or profile name (``"0.33"``, ``"0.31.0"``, ``"b5452"``); None = newest
    engine_version: str | None = None
    #: tokens per request (vLLM ``--max-model-len``, SGLang ``context_length``)
    max_model_len: int
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    #: the memory fraction as given (vLLM ``--gpu-memory-utilization``, SGLang
    #: ``--mem-fraction-static``); None = the engine's default. The budget is already in
    #: ``available_kv_bytes``; engines quote it in their messages
    gpu_memory_utilization: float | None = None
    #: the CUDA-graph memory the engine's own profiler estimates before sizing the pool (vLLM
    #: ``profile_cudagraph_memory``), for the line it logs about it; 0: none estimated
    cudagraph_memory_bytes: int = 0
    #: vLLM ``--decode-context-parallel-size``: each request's tokens sharded over this many of
    #: the TP ranks (1: off); ``cp_kv_cache_interleave_size``: tokens per rank before the next
    decode_context_parallel_size: int = 1
    cp_kv_cache_interleave_size: int = 1
    #: vLLM ``--prefill-context-parallel-size`` (1: off): its ranks are part of the engine's world
    #: (``ParallelConfig.world_size`` = PP × TP × PCP), as its KV offloading counts them
    prefill_context_parallel_size: int = 1
    #: SGLang ``--enable-dp-attention --dp N``: N attention ranks inside the TP group, each with
    #: its own requests and pool (attention TP = TP / N); 1: off
    attention_data_parallel_size: int = 1
    #: the ranks the routed experts are split over (vLLM: TP × DP × PCP; None: TP) and whether
    #: each holds whole experts (``--enable-expert-parallel``)
    moe_ranks: int | None = None
    expert_parallel: bool = False
    #: tokens per block/page; None = the engine default (vLLM 16, FlashMLA 64, hybrid alignment)
    block_size: int | None = None
    #: None = the engine default (vLLM's table from GPU memory and name, §1.11)
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    #: per-GPU bytes the engine has for KV (vLLM "Available KV cache memory", SGLang rest_memory)
    available_kv_bytes: int
    #: per pipeline stage, first to last, where the stages differ (vLLM profiles each stage);
    #: empty: every stage has ``available_kv_bytes``
    stage_available_kv_bytes: tuple[int, ...] = ()
    #: total device memory, for defaults that depend on it
    gpu_memory_bytes: int | None = None
    gpu_name: str | None = None
    gpu_compute_capability: tuple[int, int] | None = None
    disable_hybrid_kv_cache_manager: bool = False
    #: None = the engine default (vLLM: on)
    enable_prefix_caching: bool | None = None
    #: vLLM ``--enforce-eager``: no CUDA graphs
    enforce_eager: bool = False
    #: vLLM ``--async-scheduling`` / ``--no-async-scheduling`` (None: vLLM's default, on)
    async_scheduling: bool | None = None
    #: vLLM ``--cudagraph-capture-sizes`` / ``--max-cudagraph-capture-size`` /
    #: ``-cc.cudagraph_mode`` (None: vLLM's default)
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    max_cudagraph_capture_size: int | None = None
    cudagraph_mode: str | None = None
    #: speculative decoding: the draft the engine builds (None: none)
    speculative: SpeculativeDraft | None = None
    #: ``--enable-lora`` and its slots (None: no LoRA)
    lora: LoraOptions | None = None
    #: host tiers (KV offloading, ``--kv-transfer-config``, weight offloading); None: none
    offload: OffloadOptions | None = None
    #: vLLM's ``--limit-mm-per-prompt`` (as given), ``--mm-encoder-tp-mode``,
    #: ``--mm-ipc-gpu-memory-gb`` (bytes); None: the engine's defaults
    limit_mm_per_prompt: str | None = None
    mm_encoder_tp_mode: str | None = None
    mm_ipc_gpu_memory_bytes: int | None = None
    #: ``--dtype`` as given (None: the model's), where an engine sizes something in it (LoRA slots)
    weight_dtype: str | None = None
    #: the planner's memory terms, for the engine's own lines about them (None: not planned)
    run_memory: RunMemory | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        positive("max_model_len", self.max_model_len)
        positive("tensor_parallel_size", self.tensor_parallel_size)
        positive("pipeline_parallel_size", self.pipeline_parallel_size)
        positive("decode_context_parallel_size", self.decode_context_parallel_size)
        positive("prefill_context_parallel_size", self.prefill_context_parallel_size)
        positive("cp_kv_cache_interleave_size", self.cp_kv_cache_interleave_size)
        positive("attention_data_parallel_size", self.attention_data_parallel_size)
        for name in ("block_size", "max_num_batched_tokens", "max_num_seqs", "gpu_memory_bytes"):
            value = getattr(self, name)
            if value is not None:
                positive(name, value)
        if not is_int(self.available_kv_bytes):
            raise InputError(
                f"available_kv_bytes must be an integer number of bytes, got {self.available_kv_bytes!r}",
                code="invalid-input",
            )
        cc = self.gpu_compute_capability
        if cc is not None and (len(cc) != 2 or not all(is_int(v) and v >= 0 for v in cc)):
            raise InputError(
                f"gpu_compute_capability must be (major, minor), got {cc!r}", code="invalid-input"
            )
        if self.pipeline_parallel_size > self.model.num_layers:
            raise InputError(
                f"pipeline_parallel_size {self.pipeline_parallel_size} exceeds the model's "
                f"{self.model.num_layers} layers",
                code="invalid-parallelism",
            )

    #: the fields :meth:`with_budget` changes: the KV budget and the planner's memory terms
    BUDGET_FIELDS = frozenset(
        {"available_kv_bytes", "stage_available_kv_bytes", "run_memory", "cudagraph_memory_bytes"}
    )

    def with_budget(self, **changes: Any) -> EngineRequest:
        """This request with only budget fields changed (:attr:`BUDGET_FIELDS`), the rest as
        checked when it was built, and what :meth:`memo` holds kept: a plan sizes one request at
        both ends of its band, and its suggestions at several budgets."""
        unknown = set(changes) - self.BUDGET_FIELDS
        if unknown:
            raise TypeError(f"with_budget changes budget fields only, not {sorted(unknown)}")
        available = changes.get("available_kv_bytes", self.available_kv_bytes)
        if not is_int(available):
            raise InputError(
                f"available_kv_bytes must be an integer number of bytes, got {available!r}",
                code="invalid-input",
            )
        copy = object.__new__(EngineRequest)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    def memo(self, key: tuple, make: Any) -> Any:
        """Memoise something derived from the fields that are not budget fields (an engine's
        setup key) under ``key``; :meth:`with_budget` copies keep it."""
        cache = self.__dict__.setdefault("_derived_cache", {})
        if key not in cache:
            cache[key] = make()
        return cache[key]


@frozen
class KvCacheGroup:
    """One vLLM KV-cache group, or one pool/cache of another engine.

    ``page_bytes`` is what one block of ``block_size`` tokens takes in **one layer** of the group
    (for a vLLM UniformType group, the sum over its layers). ``num_blocks`` is the pool the group
    draws from: in vLLM every group shares one pool of ``num_blocks`` blocks.
    """

    #: the kind of layers the group holds (:class:`~kvcalc.model.layouts.LayerKind`; vLLM's
    #: ``MambaSpec`` groups are ``recurrent``; never ``shared`` or ``compressed``)
    kind: LayerKind
    #: layers in the group, padding layers included
    num_layers: int
    page_bytes: int
    block_size: int
    #: blocks one request at ``max_model_len`` needs from this group
    blocks_per_request: int
    num_blocks: int = 0
    #: model layer indices (0-based) in the group
    layer_indices: tuple[int, ...] = ()
    padding_layers: int = 0
    #: a vLLM ``UniformTypeKVCacheSpecs`` group: ``page_bytes`` sums its layers' pages
    uniform_type: bool = False
    #: a ``cross`` group: the encoder tokens one request writes (Whisper's 1,500), which its blocks
    #: at run time follow; ``blocks_per_request`` is the engine's sizing bound (0 for other kinds)
    encoder_tokens: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LayerKind(self.kind))  # "full" in, LayerKind.FULL kept

    def blocks_for(self, tokens: int, max_model_len: int) -> int:
        """Blocks one request of ``tokens`` tokens takes from this group, for a pool sized at
        ``max_model_len``: full and MLA layers a block per ``block_size`` tokens; windows and
        chunks as many as the tokens need, up to their cap (a sliding window need not start on a
        block boundary: one more); recurrent state a constant number per request."""
        kind = self.kind
        if kind in (LayerKind.FULL, LayerKind.MLA):
            return cdiv(tokens, self.block_size)
        if kind is LayerKind.CROSS and self.encoder_tokens:
            # the scheduler allocates cross-attention blocks for the request's encoder tokens
            return min(self.blocks_per_request, cdiv(self.encoder_tokens, self.block_size))
        if tokens >= max_model_len or kind is LayerKind.RECURRENT:
            return self.blocks_per_request
        if kind is LayerKind.SLIDING:
            return min(self.blocks_per_request, cdiv(tokens, self.block_size) + 1)
        if kind is LayerKind.CHUNKED:
            return min(self.blocks_per_request, cdiv(tokens, self.block_size))
        return self.blocks_per_request


@frozen
class KvCachePlan:
    """What an engine does with the KV memory it has. Field names are the ``--json`` keys."""

    engine: str
    #: the modelled version profile (``"0.33"``...); the notes say when a given version mapped to it
    engine_version: str
    #: resolved storage format, e.g. ``"bf16"``, ``"fp8"``, ``"q8_0"``
    kv_cache_dtype: str
    #: tokens per block/page (1 for SGLang page_size 1 and for llama.cpp cells)
    block_size: int
    num_blocks: int
    #: bytes the engine allocates for KV per GPU
    kv_cache_bytes: int
    #: token capacity exactly as the engine prints it
    kv_cache_tokens: int
    #: as the engine computes it (vLLM ``num_blocks / blocks_per_request``)
    max_concurrency: float
    #: per GPU (rank): all layers on that rank, as this engine stores them
    kv_bytes_per_token: int
    #: memory one request at ``max_model_len`` needs (vLLM: the fit check's needed bytes)
    bytes_per_request: int
    #: one request at ``max_model_len`` fits, and the engine starts (False with a ``refusal``)
    fits: bool
    #: the longest request that would fit (vLLM's binary search), None when it fits
    estimated_max_model_len: int | None
    groups: tuple[KvCacheGroup, ...]
    #: the engine's own log/error lines for these numbers, in the engine's formats
    log_lines: tuple[str, ...]
    #: assumptions, unconfirmed points, what was defaulted
    notes: tuple[str, ...]
    max_model_len: int
    available_kv_bytes: int
    #: what the fit check compares ``bytes_per_request`` with (vLLM >= 0.33 holds one block back)
    fit_budget_bytes: int
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    #: the engine refuses to start with these settings: its reason, and the fix to paste
    refusal: str | None = None
    refusal_fix: str | None = None
    #: the lines of ``log_lines`` the engine prints while building its configuration, before it
    #: loads the weights (vLLM's dtype fallback warning): shown even where the weights do not load
    config_log_lines: tuple[str, ...] = ()
    #: KV slots a running request holds past its tokens (vLLM speculative decoding: k)
    lookahead_tokens: int = 0
    #: per GPU: bytes per token of the speculative draft's layers (in ``kv_bytes_per_token`` too)
    draft_kv_bytes_per_token: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (tuples become lists)."""
        return dataclasses.asdict(self)


@frozen
class MemoryInputs:
    """What an engine's memory rules read, per GPU (per TP/PP rank).

    The planner builds one for the deployment (:meth:`Engine.default_gpu_memory_utilization` reads
    its device side) and, for each pipeline stage, a copy with that stage's weights and overhead
    (:meth:`Engine.available_kv_bytes`).
    """

    #: an engine version or profile name; None = newest
    engine_version: str | None = None
    #: the memory one GPU reports (None: not known, as with ``--kv-cache-memory`` alone)
    gpu_memory_bytes: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    #: SGLang DP attention's ranks (1: off), for its graph reserve
    attention_data_parallel_size: int = 1
    #: decode context parallelism (1: off; SGLang keeps no prefill-graph reserve under it)
    decode_context_parallel_size: int = 1
    #: the request cap as given (SGLang ``--max-running-requests`` caps its decode graphs)
    max_num_seqs: int | None = None
    #: the model as parsed, where the engine's default fraction depends on it
    model: ModelShape | None = None
    #: the memory fraction (vLLM ``--gpu-memory-utilization``...); None = the engine's default
    gpu_memory_utilization: float | None = None
    #: the engine options (``-E``) where its default fraction reads them (SGLang's chunked
    #: prefill and CUDA-graph settings)
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: one stage's weights and overhead terms, per GPU
    weights_bytes: int = 0
    activation_bytes: int = 0
    non_torch_bytes: int = 0
    cudagraph_bytes: int = 0

    def with_terms(self, **changes: Any) -> MemoryInputs:
        """This record with ``changes`` made, copied without ``dataclasses.replace``'s re-run of
        ``__init__`` (the class checks nothing on construction): a plan builds one copy per
        pipeline stage and per term it asks the engine's rule about."""
        unknown = changes.keys() - _MEMORY_FIELDS
        if unknown:
            raise TypeError(f"MemoryInputs has no fields {sorted(unknown)}")
        copy = object.__new__(MemoryInputs)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    @property
    def total_memory_bytes(self) -> int:
        """``gpu_memory_bytes``, which every budget rule starts from."""
        if self.gpu_memory_bytes is None:
            raise InputError(
                "no GPU given",
                hint="pass --gpu NAME (see `kvcalc gpus`), --gpu-memory GiB, or --kv-cache-memory",
                code="missing-gpu",
            )
        return self.gpu_memory_bytes

    def fraction_or(self, default: float) -> float:
        """``gpu_memory_utilization``, or the engine's ``default`` where none was given."""
        return default if self.gpu_memory_utilization is None else self.gpu_memory_utilization

    @property
    def non_kv_bytes(self) -> int:
        """The stage's weights, activation peak, non-torch and CUDA-graph memory together."""
        return (
            self.weights_bytes + self.activation_bytes + self.non_torch_bytes + self.cudagraph_bytes
        )


#: what :meth:`MemoryInputs.with_terms` may change
_MEMORY_FIELDS = frozenset(f.name for f in dataclasses.fields(MemoryInputs))


@runtime_checkable
class Engine(Protocol):
    """A serving engine's KV-cache accounting.

    Optional methods, asked for by name where an engine has them: ``scheduler_defaults(request)``
    (the batch defaults the activation estimate needs), ``subtracts_cudagraph(version)`` (the KV
    budget is net of CUDA graphs), ``flashinfer_sampler(request)`` (the sampler the activation
    estimate sizes) and ``fit_budget_bytes(...)`` (see :func:`fit_budget_bytes`); the others are
    asked through :mod:`kvcalc.planning.engine_asks` (``host_tier``, ``engine_host_tier``, ...).
    """

    name: str

    @property
    def versions(self) -> tuple[str, ...]:
        """Selectable ``--engine-version`` values, newest first."""
        ...

    def default_gpu_memory_utilization(self, memory: MemoryInputs) -> float | None:
        """The engine's default memory fraction (vLLM ``gpu_memory_utilization``, SGLang
        ``mem_fraction_static``, TRT-LLM ``free_gpu_memory_fraction``); None where N/A.

        Reads the device side of ``memory``: the model and ``pipeline_parallel_size`` matter where
        the engine's rule reads them (SGLang: MLA, multimodal towers, which CUDA graphs it captures);
        ``gpu_memory_utilization`` and the stage's terms are not read."""
        ...

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan: ...

    def available_kv_bytes(self, memory: MemoryInputs) -> int:
        """The engine's own budget rule for KV bytes per GPU, for the stage ``memory`` describes
        (``gpu_memory_utilization`` None: the engine's default). May be negative."""
        ...


def fit_budget_bytes(
    engine: Engine, *, available_kv_bytes: int, bytes_per_block: int, version: str | None
) -> int | None:
    """The bytes ``engine``'s one-request fit check compares a request's bytes with, from the
    engine's optional ``fit_budget_bytes`` method (vLLM: the available memory, less the null block
    from 0.33 on); None for an engine that compares a request's blocks with its pool."""
    ask = getattr(engine, "fit_budget_bytes", None)
    if ask is None:
        return None
    budget: int = ask(
        available_kv_bytes=available_kv_bytes, bytes_per_block=bytes_per_block, version=version
    )
    return budget
