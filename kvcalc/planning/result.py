"""What ``kvcalc plan`` answers: frozen result dataclasses (their fields are the ``--json`` keys)."""

from __future__ import annotations

from dataclasses import asdict, field
from typing import Any

from kvcalc.engines.base import KvCacheGroup
from kvcalc.frozen import frozen


@frozen
class MemoryBreakdown:
    """Memory per GPU, in bytes: what each part takes; ``free_bytes`` stays unused on the device."""

    #: the device's memory as the driver reports it (0 with ``--kv-cache-memory`` alone)
    total_bytes: int
    #: the engine's share of the device (vLLM ``ceil(total · gpu_memory_utilization)``)
    budget_bytes: int
    gpu_memory_utilization: float | None
    weights_bytes: int
    #: the peak of the profiling forward pass (and the sampler), estimated
    activation_bytes: int
    #: CUDA context, NCCL and other memory outside torch's allocator, estimated
    non_torch_bytes: int
    #: CUDA graph capture (0 for engines without CUDA graphs or with ``--enforce-eager``)
    cudagraph_bytes: int
    kv_cache_bytes: int
    #: negative when the parts exceed the device: the deployment then does not start
    free_bytes: int
    #: the terms the engine allocates after its KV cache, outside the budget it sizes the cache
    #: from (``activation``, ``cudagraph``: SGLang's and LMDeploy's, vLLM's graphs where the release
    #: does not subtract them); they must fit in what the budget leaves of the device
    outside_budget: tuple[str, ...] = ()
    #: free on the GPU when the engine checks its fraction at start-up (vLLM from 0.9.1,
    #: ``request_memory``: the total less the 0.51 GiB its CUDA context holds); None where the
    #: engine has no such check
    startup_free_bytes: int | None = None
    #: the same at the pessimistic end: on more than one NVSwitch-class GPU less the 2.01 GiB NCCL
    #: and the context held in recorded runs (vLLM 0.11 on); else equal to ``startup_free_bytes``
    startup_free_low_bytes: int | None = None


@frozen
class Suggestion:
    """A change that was itself planned, and what it gives."""

    #: the change as flags to paste, and its effect
    text: str
    #: the inputs changed (``{"kv_cache_dtype": "fp8"}``)
    change: dict[str, Any]
    #: the verdict of the changed plan
    verdict: str
    max_concurrency: float
    kv_cache_tokens: int
    max_model_len: int


@frozen
class SpeculativeSummary:
    """Speculative decoding as the engine builds it (``speculative`` in ``kvcalc plan --json``)."""

    #: ``mtp``, ``eagle``, ``eagle3``, ``draft_model``, ``ngram`` or ``suffix``
    method: str
    #: tokens the draft proposes per step (k)
    num_speculative_tokens: int
    #: the draft's layers that hold KV cache (0 for n-gram and suffix decoding)
    draft_layers: int
    #: per GPU (rank): bytes per token the draft's layers store, in their cache dtype
    draft_kv_bytes_per_token: int
    #: per GPU: the draft's weight bytes in the weights term (the target's shared embedding and
    #: head not counted twice; 0 for n-gram and suffix decoding)
    draft_weights_bytes: int
    #: KV slots a running request holds past its tokens (k for drafts with KV, else 0)
    lookahead_tokens: int
    #: where the draft came from
    draft: str


@frozen
class CapacityPlan:
    """The answer of ``kvcalc plan``. Field names are the ``--json`` keys (a public contract)."""

    #: the model's Hub id (or the name its config gives)
    model: str
    #: where its config came from (``bundled config``, ``hub: ORG/NAME``, a path)
    model_source: str
    #: ``vllm``, ``sglang``, ``llamacpp``, ``hf``, ``trtllm`` or ``lmdeploy``
    engine: str
    #: the version profile modelled
    engine_version: str
    #: the catalog's GPU name; null with ``--gpu-memory``/``--kv-cache-memory`` alone
    gpu: str | None
    #: GPUs in all: DP × PP × TP × PCP per deployment; beyond it (without DP) independent replicas
    num_gpus: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    #: KV pools over all GPUs, each with its own requests: vLLM data-parallel ranks (engine cores)
    #: × independent replicas (SGLang: DP ranks × replicas)
    data_parallel_replicas: int
    #: data-parallel ranks of one deployment (vLLM ``--data-parallel-size``, SGLang ``--dp``)
    data_parallel_size: int = 1
    #: whole routed experts per rank (vLLM ``--enable-expert-parallel`` with more than one MoE rank)
    expert_parallel: bool = False
    #: ranks the routed experts are split over (vLLM: TP × DP × PCP; else TP)
    moe_parallel_size: int = 1
    #: vLLM ``--decode-context-parallel-size`` (SGLang ``--dcp-size``): each request's KV tokens
    #: sharded over this many ranks
    decode_context_parallel_size: int = 1
    #: vLLM ``--prefill-context-parallel-size``: GPUs per engine core × PCP, KV unchanged
    prefill_context_parallel_size: int = 1
    #: GPUs of ``num_gpus`` that no deployment uses (said in the notes)
    idle_gpus: int = 0
    #: the cache storage format used (``auto`` resolved)
    kv_cache_dtype: str
    #: tokens per block/page (1 for llama.cpp cells and SGLang's default page)
    block_size: int
    #: blocks the engine allocates per GPU (every rank has as many)
    num_blocks: int
    #: bytes the engine allocates for KV per GPU
    kv_cache_bytes: int
    #: token capacity as the engine prints it
    kv_cache_tokens: int
    #: requests of ``max_model_len`` tokens that fit, as the engine computes and prints it: per KV
    #: pool (one vLLM data-parallel rank, one replica)
    max_concurrency: float
    #: ``max_concurrency`` (per KV pool: per data-parallel rank) × ``data_parallel_replicas``
    total_max_concurrency: float
    #: the KV budget per GPU (the engine's "Available KV cache memory"; negative when nothing is left)
    available_kv_bytes: int
    #: the band around ``available_kv_bytes`` measured on the engine's records (equal to it when the
    #: KV memory was given or the engine's band is not measured); verdicts use the low end
    available_kv_bytes_low: int
    available_kv_bytes_high: int
    #: weight bytes per GPU
    weights_bytes: int
    #: ``config estimate``, ``safetensors metadata (hub)``/``(local)``, ``gguf header``, ``given (--weights-memory)``
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
    #: tokens per request planned
    max_model_len: int
    #: the longest request that fits when ``max_model_len`` does not (else null)
    estimated_max_model_len: int | None
    #: the engine's values, defaults resolved (null where the engine has no such setting)
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    #: the concurrency asked for (``--batch``); ``--max-num-seqs`` is a cap, not a target
    target_concurrency: int | None
    #: tokens one workload request holds (``--prompt-len`` + ``--output-len``), if given
    workload_tokens: int | None
    #: requests of ``workload_tokens`` that fit
    workload_concurrency: float | None
    #: concurrent requests the deployment can run: the KV-limited figure (the workload's when given,
    #: else ``max_concurrency``) capped by ``max_num_seqs``; verdicts and requirements use it; 0 for a
    #: deployment that does not start (``wont-start``, ``weights-dont-fit``)
    runnable_concurrency: float
    #: KV memory beyond the target (negative: missing)
    headroom_bytes: int
    headroom_fraction: float
    #: ``ok``, ``tight``, ``below-target``, ``wont-start`` or ``weights-dont-fit``
    verdict: str
    verdict_reason: str
    memory: MemoryBreakdown
    #: planned alternatives, when the plan does not pass or is tight
    suggestions: tuple[Suggestion, ...] = ()
    #: the engine's KV-cache groups (vLLM) or pools
    groups: tuple[KvCacheGroup, ...] = ()
    #: what the engine would print for these numbers, in its own format
    log_lines: tuple[str, ...] = ()
    #: assumptions, defaults taken and unconfirmed points
    notes: tuple[str, ...] = ()
    #: decode throughput ceiling at this plan's concurrency (``kvcalc.planning.throughput``), when computed
    throughput: dict[str, Any] | None = None
    #: the request as given (``kv_cache_dtype`` ``auto``, ``gpu`` as typed)
    inputs: dict[str, Any] = field(default_factory=dict)
    #: False when the model's layout was not verified and was planned as plain attention
    #: (``--trust-layout``): the figures are then a guess
    layout_validated: bool = True
    #: speculative decoding, when configured (null without)
    speculative: SpeculativeSummary | None = None
    #: False when a serving command set flags kvcalc does not model and ``ignore_unmodelled``
    #: left them out (``inputs.unmodelled_flags`` names them): the figures may then be wrong
    fully_modelled: bool = True
    #: LoRA adapter slots per GPU (``--enable-lora``: ``max_loras`` × the slots of every wrapped
    #: module), included in ``weights_bytes``; 0 without LoRA
    lora_bytes: int = 0
    #: KV tokens the host tier holds beside the GPU pool (vLLM ``--kv-offloading-size``: CPU
    #: chunks × tokens per chunk, divided by the KV-cache groups; SGLang HiCache: one rank's host
    #: pool); null without one or when its size is not known (LMCache)
    host_kv_tokens: int | None = None
    #: host memory the deployment's tiers need, all its GPUs together (KV offloading, a NIXL host
    #: buffer, offloaded weights, SGLang's HiCache host pools); 0 without any; null when a part is
    #: not known (LMCache)
    host_memory_bytes: int | None = 0
    #: weight bytes per GPU moved to host memory (``--cpu-offload-gb``), already out of
    #: ``weights_bytes``
    weights_offloaded_bytes: int = 0
    #: vLLM 0.33's multimodal encoder budget (``MultiModalBudget``): the largest item's tokens by
    #: modality (the modalities the tower serves with a limit above 0); null for a text-only model,
    #: another engine or release, no tower built, or a tower whose item size is not derived
    mm_max_tokens_per_item: dict[str, int] | None = None
    #: the encoder compute budget in tokens (max of ``max_num_batched_tokens`` and the largest item)
    mm_encoder_budget_tokens: int | None = None
    #: the encoder cache size in tokens (the same maximum)
    mm_encoder_cache_tokens: int | None = None
    #: items of each modality one encoder batch holds (the profile runs the modality with the
    #: most tokens per item, ``mm_profiled_modality``, that many times)
    mm_items_per_batch: dict[str, int] | None = None
    #: the modality vLLM's profile run encodes (``image``, ``video``, ``audio``)
    mm_profiled_modality: str | None = None
    #: bytes of the encoder outputs the profile run holds through the text dummy run, included in
    #: ``memory.activation_bytes``; null where not derived (the vision band covers it)
    mm_encoder_outputs_bytes: int | None = None

    @property
    def passed(self) -> bool:
        return self.verdict in ("ok", "tight")

    @property
    def lookahead_tokens(self) -> int:
        """KV slots a running request holds past its tokens (speculative decoding's k)."""
        return self.speculative.lookahead_tokens if self.speculative else 0

    @property
    def kv_bytes_per_request(self) -> int:
        """The engine's figure (:attr:`engine_kv_bytes_per_request`), under its former name."""
        return self.engine_kv_bytes_per_request

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
