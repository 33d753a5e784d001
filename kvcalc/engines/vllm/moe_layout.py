"""How vLLM 0.33 lays a MoE block's shared experts over the ranks under data and expert
parallelism (pure).

With expert parallelism, TP > 1 and DP > 1, vLLM's default all-to-all (``allgather_reducescatter``)
makes the MoE sequence parallel (``config/parallel.py`` ``ParallelConfig.use_sequence_parallel_moe``):
each TP rank runs its slice of the tokens through the whole MoE block, so the model files that
pass ``is_sequence_parallel`` to their shared-expert MLP build it with ``disable_tp`` and every rank
holds it whole. Recorded for ``deepseek_v2.py`` (``DeepseekV2MLP``: DeepSeek-V2/V3, Kimi-K2) and
``qwen3_next.py`` / ``qwen3_5.py`` (``Qwen2MoeMLP``: Qwen3-Next, Qwen3.5 MoE), the MTP layers
too (``speculative_parallel.json``); the other modules with the same pattern (``llama4.py``,
``nemotron_h.py``, ...) are not recorded and keep their TP split here (unconfirmed).
"""

from __future__ import annotations

from collections.abc import Iterable

from kvcalc.engines.vllm.registry import vllm_registry

#: vLLM model modules whose shared experts are whole on every rank under sequence-parallel MoE
WHOLE_SHARED_EXPERT_MODULES = frozenset({"deepseek_v2", "qwen3_next", "qwen3_5"})


def shared_experts_whole(
    architectures: Iterable[str], *, tensor_parallel_size: int, data_parallel_size: int,
    enable_expert_parallel: bool,
) -> bool:  # fmt: skip
    """The shared experts of a model of ``architectures`` are held whole on every rank."""
    if not (enable_expert_parallel and tensor_parallel_size > 1 and data_parallel_size > 1):
        return False
    names = set(architectures)
    return any(e.module in WHOLE_SHARED_EXPERT_MODULES
               for e in vllm_registry().entries if e.architecture in names)  # fmt: skip
