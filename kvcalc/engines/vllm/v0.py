"""vLLM's V0 engine (releases before 0.8): one block table, every layer booked for every token.

Read from the engine_logs records (vllm-4454, vllm-10517) and the V0 sources as remembered in the
engine-accounting doc; the texts below match those records. **Unconfirmed**: V0 sliding-window
handling (windows are booked full here) and MLA in V0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan
from kvcalc.engines.extra import extra_int
from kvcalc.errors import InputError
from kvcalc.model.layouts import LayerKind, RecurrentState
from kvcalc.units import GIB, cdiv

if TYPE_CHECKING:
    from kvcalc.engines.vllm.setup import VllmSetup


def plan_v0(request: EngineRequest, setup: VllmSetup) -> KvCachePlan:
    """The V0 engine: one block table, every attention layer booked for every token.

    ``cache_block_size = block_size · Σ_layers bytes_per_token``; ``num_gpu_blocks = available //
    cache_block_size``; CPU blocks = swap space (4 GiB) // cache_block_size. It logs the block counts
    and ``num_blocks·block_size / max_model_len``, then refuses a ``max_model_len`` above
    ``num_blocks·block_size``. (V0 sliding-window handling is not modelled: windows are booked full.)
    """
    if any(isinstance(x, RecurrentState) for x in setup.model.layers):
        raise InputError(
            "the vLLM V0 profile does not model recurrent layers", code="unsupported-model"
        )
    L, block = request.max_model_len, setup.block_size
    per_token = sum(x.bytes_per_token for x in setup.model.layers)
    block_bytes = block * per_token
    num_blocks = max(0, request.available_kv_bytes // block_bytes)
    cpu_blocks = extra_int(request.extra, "swap_space_bytes", 4 * GIB, minimum=0) // block_bytes
    tokens = num_blocks * block
    concurrency = tokens / L
    logs = [f"# GPU blocks: {num_blocks}, # CPU blocks: {cpu_blocks}"]
    fits = num_blocks > 0 and L <= tokens
    if num_blocks <= 0:
        logs = [(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )]  # fmt: skip
    else:
        logs.append(f"Maximum concurrency for {L} tokens per request: {concurrency:.2f}x")
        if not fits:
            logs.append(
                f"The model's max seq len ({L}) is larger than the maximum number of tokens that can "
                f"be stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or "
                "decreasing `max_model_len` when initializing the engine."
            )
    layers = tuple(i for i, x in enumerate(setup.model.layers) if x.bytes_per_token)
    group = KvCacheGroup(
        kind=LayerKind.FULL, num_layers=len(layers), page_bytes=block_bytes // max(1, len(layers)),
        block_size=block, blocks_per_request=cdiv(L, block), num_blocks=num_blocks, layer_indices=layers,
    )  # fmt: skip
    return KvCachePlan(
        engine="vllm", engine_version=setup.profile.name, kv_cache_dtype=setup.dtype_name,
        block_size=block, num_blocks=num_blocks, kv_cache_bytes=num_blocks * block_bytes,
        kv_cache_tokens=tokens, max_concurrency=concurrency, kv_bytes_per_token=per_token,
        bytes_per_request=L * per_token, fits=fits,
        estimated_max_model_len=None if fits else tokens, groups=(group,), log_lines=tuple(logs),
        notes=(*setup.notes, "V0 engine: every layer booked for every token; fits iff max_model_len <= num_blocks·block_size"),
        max_model_len=L, available_kv_bytes=request.available_kv_bytes,
        fit_budget_bytes=tokens * per_token, max_num_batched_tokens=setup.mnbt,
        max_num_seqs=setup.max_num_seqs,
    )  # fmt: skip
