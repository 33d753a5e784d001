"""What ``kvcalc plan`` answers: frozen result dataclasses (their fields are the ``--json`` keys)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvcalc.engines.base import KvCacheGroup


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Per GPU, in bytes. ``free_bytes`` is what stays unused on the device."""

    total_bytes: int
    #: the engine's share of the device (vLLM ``ceil(total · gpu_memory_utilization)``)
    budget_bytes: int
    gpu_memory_utilization: float | None
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    free_bytes: int


@dataclass(frozen=True, kw_only=True)
class Suggestion:
    """A change that was itself planned, and what it gives."""

    text: str
    change: dict[str, Any]
    verdict: str
    max_concurrency: float
    kv_cache_tokens: int
    max_model_len: int


@dataclass(frozen=True, kw_only=True)
class CapacityPlan:
    """The answer of ``kvcalc plan``. Field names are the ``--json`` keys (a public contract)."""

    model: str
    model_source: str
    engine: str
    engine_version: str
    gpu: str | None
    num_gpus: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_replicas: int
    kv_cache_dtype: str
    block_size: int
    num_blocks: int
    kv_cache_bytes: int
    kv_cache_tokens: int
    max_concurrency: float
    total_max_concurrency: float
    available_kv_bytes: int
    #: the band around ``available_kv_bytes`` measured on the engine's records (equal to it when the
    #: KV memory was given or the engine's band is not measured); verdicts use the low end
    available_kv_bytes_low: int
    available_kv_bytes_high: int
    weights_bytes: int
    weights_source: str
    num_parameters: int | None
    #: per GPU (rank): all layers on that rank, as the engine stores them
    kv_bytes_per_token: int
    #: one request of ``max_model_len`` tokens in the engine's accounting: the blocks it reserves
    #: per GPU (vLLM: what its fit check needs), the figure its "Maximum concurrency" divides by
    engine_kv_bytes_per_request: int
    #: the same request in the layers' own bytes (windows capped, recurrent state added, no block
    #: rounding), per tensor-parallel rank over all layers, as ``kvcalc inspect`` counts it; None
    #: for an engine's own format the layouts do not size (QuantizedCache, TurboMind)
    layer_kv_bytes_per_request: int | None
    max_model_len: int
    estimated_max_model_len: int | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    target_concurrency: int | None
    workload_tokens: int | None
    workload_concurrency: float | None
    #: concurrent requests the deployment can run: the KV-limited figure (the workload's when given,
    #: else ``max_concurrency``) capped by ``max_num_seqs``; verdicts and requirements use it
    runnable_concurrency: float
    headroom_bytes: int
    headroom_fraction: float
    verdict: str
    verdict_reason: str
    memory: MemoryBreakdown
    suggestions: tuple[Suggestion, ...] = ()
    groups: tuple[KvCacheGroup, ...] = ()
    log_lines: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: decode throughput ceiling at this plan's concurrency (``kvcalc.planning.throughput``), when computed
    throughput: dict[str, Any] | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    #: False when the model's layout was not verified and was planned as plain attention
    #: (``--trust-layout``): the figures are then a guess
    layout_validated: bool = True

    @property
    def passed(self) -> bool:
        return self.verdict in ("ok", "tight")

    @property
    def kv_bytes_per_request(self) -> int:
        """The engine's figure (:attr:`engine_kv_bytes_per_request`), under its former name."""
        return self.engine_kv_bytes_per_request

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
