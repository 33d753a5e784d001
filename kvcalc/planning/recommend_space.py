"""What ``kvcalc recommend`` searches: the candidates of one GPU type and count, the bounds that
rule candidates out before they are planned, and the order candidates rank in. Pure.

A *group* is one engine on ``n`` GPUs of one type; its candidates are the parallel splits the
engine takes (TP × PP × DP = ``n``, TP within a node; vLLM's expert parallelism for a MoE model,
its decode context parallelism where TP replicates the KV cache) × KV dtypes × quantizations.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from kvcalc.engines.names import EngineName, traits
from kvcalc.frozen import frozen
from kvcalc.model.gpus import GpuSpec
from kvcalc.model.shape import ModelShape
from kvcalc.planning.core import layer_kv_bytes
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.parallel import has_routed_experts
from kvcalc.planning.result import CapacityPlan

#: ``--objective`` values
OBJECTIVES = ("cost", "gpus", "tokens-per-dollar")
#: GPUs per node, and the counts searched on one node
GPUS_PER_NODE = 8
NODE_COUNTS = (1, 2, 4, 8)
#: the settings a search fills (pinned when given)
SEARCHED = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
            "enable_expert_parallel", "decode_context_parallel_size")  # fmt: skip


@frozen
class Split:
    """One way to use the group's GPUs."""

    tensor_parallel_size: int
    pipeline_parallel_size: int
    #: vLLM data-parallel ranks; for engines without ``-dp``, independent replicas (``--num-gpus``)
    data_parallel_size: int
    enable_expert_parallel: bool = False
    decode_context_parallel_size: int = 1

    @property
    def complexity(self) -> int:
        """Settings changed from the engine's single-engine default (ties go to the simpler)."""
        return ((self.pipeline_parallel_size > 1) + (self.data_parallel_size > 1)
                + self.enable_expert_parallel + (self.decode_context_parallel_size > 1))  # fmt: skip


def gpu_counts(nodes: int, max_gpus: int | None) -> tuple[int, ...]:
    """1, 2, 4, 8 on one node, then whole nodes (16, 24, ...), at most ``max_gpus``."""
    counts = [*NODE_COUNTS, *(GPUS_PER_NODE * k for k in range(2, nodes + 1))]
    return tuple(n for n in counts if max_gpus is None or n <= max_gpus)


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def kv_replication(model: ModelShape, tp: int) -> int:
    """How many TP ranks hold each KV byte at TP ``tp``: 1 when the heads split evenly, ``tp`` for
    an MLA latent, ``tp / kv_heads`` for fewer KV heads than ranks (what decode context
    parallelism shards away); 1 for a format only its engine sizes."""
    one = layer_kv_bytes(model, "auto", 1, 1)
    per_rank = layer_kv_bytes(model, "auto", tp, 1)
    if not one or per_rank is None or per_rank * tp <= one:
        return 1
    return max(1, round(per_rank * tp / one))


def splits(model: ModelShape, engine: EngineName, n: int, base: PlanInputs,
           pinned: frozenset[str]) -> Iterator[Split]:  # fmt: skip
    """Every split of ``n`` GPUs the engine can be given, the pinned settings kept."""
    can = traits(engine)
    moe = has_routed_experts(model)
    vllm_parallel = can.moe_data_parallel
    replicas = not (can.moe_data_parallel or can.dp_attention)  # -dp: vLLM; replicas elsewhere
    for tp in _divisors(n):
        if tp > GPUS_PER_NODE:
            continue
        for pp in _divisors(n // tp):
            dp = n // (tp * pp)
            if dp > 1 and not (vllm_parallel or replicas):
                continue
            eps = (False, True) if moe and vllm_parallel and tp * dp > 1 else (False,)
            # DCP off, or sharding away exactly what TP replicates
            copies = kv_replication(model, tp) if vllm_parallel and tp > 1 else 1
            dcps = (1, copies) if copies > 1 and tp % copies == 0 else (1,)
            for ep in eps:
                for dcp in dcps:
                    split = Split(tensor_parallel_size=tp, pipeline_parallel_size=pp,
                                  data_parallel_size=dp, enable_expert_parallel=ep,
                                  decode_context_parallel_size=dcp)  # fmt: skip
                    if all(getattr(split, f) == getattr(base, f) for f in pinned if f in SEARCHED):
                        yield split


def kv_dtypes(engine: EngineName, gpu: GpuSpec, asked: tuple[str, ...]) -> tuple[str, ...]:
    """The KV dtypes tried: those asked, else ``auto`` and the engine's fp8 where the GPU has fp8
    tensor cores (the catalog's ``fp8_dense_tflops``: Hopper, Ada, Blackwell, MI300)."""
    if asked:
        return asked
    compact = traits(engine).compact_kv_dtype
    fp8 = compact is not None and compact.startswith("fp8") and gpu.fp8_dense_tflops is not None
    return ("auto", compact) if fp8 and compact else ("auto",)


def inputs_for(base: PlanInputs, engine: EngineName, gpu: str, split: Split, kv_dtype: str,
               quantization: str | None, concurrency: int) -> PlanInputs:  # fmt: skip
    """The plan of one candidate: per KV pool the share of ``concurrency`` it must hold."""
    from dataclasses import replace

    can = traits(engine)
    replicas = not (can.moe_data_parallel or can.dp_attention)
    dp = split.data_parallel_size
    world = split.tensor_parallel_size * split.pipeline_parallel_size
    return replace(
        base, engine=engine, gpu=gpu, tensor_parallel_size=split.tensor_parallel_size,
        pipeline_parallel_size=split.pipeline_parallel_size,
        data_parallel_size=1 if replicas else dp,
        num_gpus=world * dp if replicas and dp > 1 else None,
        enable_expert_parallel=split.enable_expert_parallel,
        decode_context_parallel_size=split.decode_context_parallel_size,
        kv_cache_dtype=kv_dtype, quantization=quantization, batch=-(-concurrency // dp),
    )  # fmt: skip


def usable_bytes(engine: EngineName, gpu: GpuSpec, one: CapacityPlan) -> int:
    """Bytes per GPU the weights and the KV cache share at most: the whole memory, or, for an
    engine whose budget is ``ceil(total · gpu_memory_utilization)`` less the rest (vLLM), that
    budget (the fraction the one-GPU plan resolved: the same on every split)."""
    util = one.memory.gpu_memory_utilization
    if not traits(engine).memory_fraction_knob or not util:
        return gpu.memory_bytes
    return math.ceil(gpu.memory_bytes * util)


def weights_bound(weights_one_gpu: int, model: ModelShape, n: int, split: Split | None) -> int:
    """Bytes per GPU no split holds fewer of: every weight lives on at least one rank, so the
    busiest of ``n`` ranks holds at least 1/n of the one-GPU weights; a dense model's data-parallel
    ranks each hold a full copy (1/(TP × PP))."""
    if split is not None and not has_routed_experts(model):
        return -(-weights_one_gpu // (split.tensor_parallel_size * split.pipeline_parallel_size))
    return -(-weights_one_gpu // n)


def rank_kv_bound(
    model: ModelShape, kv_dtype: str, tokens: int, concurrency: int, split: Split
) -> int | None:
    """Bytes the busiest GPU of ``split`` holds for its pool's share of the requests at least:
    one TP rank's layers (replicas included), a pipeline stage's share at least 1/PP, DCP's
    tokens at most sharded DCP ways; None for a format only its engine sizes."""
    per_rank = layer_kv_bytes(model, kv_dtype, split.tensor_parallel_size, tokens)
    if per_rank is None:
        return None
    share = split.pipeline_parallel_size * split.decode_context_parallel_size
    return -(-concurrency // split.data_parallel_size) * per_rank // share


def kv_bound(model: ModelShape, kv_dtype: str, tokens: int, concurrency: int) -> int | None:
    """Bytes the requests' KV takes over all GPUs at least: each token's KV is stored at least
    once (TP, PP and DCP split it, replication and block rounding only add), in the layers' own
    bytes (windows capped); None for a format only its engine sizes."""
    per_request = layer_kv_bytes(model, kv_dtype, 1, tokens)
    return None if per_request is None else per_request * concurrency
