"""How vLLM 0.33 lays a MoE model's MLPs over the ranks under data and expert parallelism (pure).

With expert parallelism, TP > 1 and DP > 1, vLLM's default all-to-all (``allgather_reducescatter``)
makes the MoE sequence parallel (``config/parallel.py`` ``ParallelConfig.use_sequence_parallel_moe``):
each TP rank runs its slice of the tokens through the whole MoE block, so the model files that
pass ``is_sequence_parallel`` (or ``disable_tp=is_sequence_parallel``) to an MLP build it with
``disable_tp`` and every rank holds it whole. The routed experts are not changed by it
(``FusedMoEParallelConfig.make`` splits them over TP × DP with or without ``sp_size``), nor are the
routers and ``ReplicatedLinear`` layers (whole anyway). Each rule below is one vLLM 0.33 model file,
recorded with the reference harness (``sequence_parallel_moe.json``, ``speculative_parallel.json``):

- ``deepseek_v2.py`` ``DeepseekV2MoE``: the shared experts (``DeepseekV2MLP(is_sequence_parallel=)``)
  — DeepSeek-V2/V3, Kimi-K2, and Kimi-K2.5 (``kimi_k25.py`` builds its text model there), the MTP
  layer too (``deepseek_mtp.py`` builds ``DeepseekV2MoE``); the dense layers keep the TP split;
- ``vllm/models/deepseek_v32`` (CUDA: ``nvidia/model.py``): DeepSeek-V3.2 and GLM-5 build
  ``DeepseekV2MoE`` (shared experts whole) and, unlike ``deepseek_v2.py``, their dense layers'
  ``DeepseekV2MLP`` with ``is_sequence_parallel=`` too, where the pipeline is one stage
  (``DeepseekV32DecoderLayer.use_sequence_parallel``: ``... and pipeline_parallel_size == 1``);
- ``qwen3_next.py`` / ``qwen3_5.py`` (``Qwen2MoeMLP(is_sequence_parallel=)``): Qwen3-Next, Qwen3.5
  MoE, and their MTP layers;
- ``llama4.py`` ``Llama4MoE``: the shared expert (``LlamaMLP(disable_tp=is_sequence_parallel)``)
  — Llama 4 Scout and Maverick, also as ``mllama4.py``'s text model; dense layers keep the split;
- ``nemotron_h.py`` ``NemotronHMoE``: the shared experts (``NemotronHMLP(is_sequence_parallel=)``)
  — Nemotron-H MoE, Nemotron-3 Nano and Super (the latent projections are ``ReplicatedLinear``,
  whole either way); the dense MLP layers keep the split.

Other model files pass ``is_sequence_parallel`` only to ``FusedMoE`` (``gpt_oss.py``,
``qwen3_moe.py``, ``granitemoe.py``, ``mimo_v2.py``) or not at all (``mixtral.py``,
``glm4_moe.py``, ``minimax_m2.py``, ``ernie45_moe.py``, ...): no weight changes (recorded equal
for Qwen3-MoE, Mixtral and MiniMax-M2; gpt-oss's recorded gap is its mxfp4 backend's padding, the
same at TP 1). Kimi-K2.5 and DeepSeek-V3.2 are recorded with blocks equal and their quantized
weights not yet (``weights_not_equal``).
"""

from __future__ import annotations

from collections.abc import Iterable

from kvcalc.engines.vllm.registry import vllm_registry
from kvcalc.errors import InputError

#: vLLM model modules whose shared experts are whole on every rank under sequence-parallel MoE
#: (``mllama4`` and ``kimi_k25`` build their text model with ``llama4.py`` / ``deepseek_v2.py``)
WHOLE_SHARED_EXPERT_MODULES = frozenset({
    "deepseek_v2", "kimi_k25", "vllm.models.deepseek_v32", "qwen3_next", "qwen3_5", "llama4",
    "mllama4", "nemotron_h",
})  # fmt: skip
#: vLLM model modules whose dense layers' MLPs are whole too (with one pipeline stage)
WHOLE_DENSE_MLP_MODULES = frozenset({"vllm.models.deepseek_v32"})


def sequence_parallel_moe(
    *, tensor_parallel_size: int, data_parallel_size: int, enable_expert_parallel: bool
) -> bool:
    """vLLM's ``use_sequence_parallel_moe`` with its default all-to-all backend (the only one
    kvcalc plans): expert parallel, TP > 1 and DP > 1."""
    return enable_expert_parallel and tensor_parallel_size > 1 and data_parallel_size > 1


def _modules(architectures: Iterable[str]) -> set[str]:
    names = set(architectures)
    return {e.module for e in vllm_registry().entries if e.architecture in names}


def shared_experts_whole(
    architectures: Iterable[str], *, tensor_parallel_size: int, data_parallel_size: int,
    enable_expert_parallel: bool,
) -> bool:  # fmt: skip
    """The shared experts of a model of ``architectures`` are held whole on every rank."""
    if not sequence_parallel_moe(tensor_parallel_size=tensor_parallel_size,
                                 data_parallel_size=data_parallel_size,
                                 enable_expert_parallel=enable_expert_parallel):  # fmt: skip
        return False
    return bool(_modules(architectures) & WHOLE_SHARED_EXPERT_MODULES)


def dense_mlps_whole(
    architectures: Iterable[str], *, tensor_parallel_size: int, data_parallel_size: int,
    enable_expert_parallel: bool, pipeline_parallel_size: int,
) -> bool:  # fmt: skip
    """The dense (non-MoE) layers' MLPs of a model of ``architectures`` are held whole on every
    rank (DeepSeek-V3.2 and GLM-5 with one pipeline stage)."""
    if pipeline_parallel_size != 1 or not sequence_parallel_moe(
        tensor_parallel_size=tensor_parallel_size, data_parallel_size=data_parallel_size,
        enable_expert_parallel=enable_expert_parallel,
    ):  # fmt: skip
        return False
    return bool(_modules(architectures) & WHOLE_DENSE_MLP_MODULES)


def check_expert_width(width: int, ranks: int, *, padded: bool = False) -> None:
    """``FusedMoEConfig.__post_init__`` (``fused_moe/config.py``) asserts
    ``intermediate_size % tp_size == 0`` for the routed experts' group, TP × DP × PCP ranks
    without expert parallelism (1 with it: the experts stay whole); recorded: Qwen3-30B-A3B's
    shape with experts 770 wide at TP 2 served and at TP 4 refused, 769 wide at TP 1 served and
    TP 2 refused, 770 at TP 4 with expert parallelism served. ``padded``: the model file pads
    each rank's share first (Kimi-Linear's ``min_moe_intermediate_per_partition``), not checked."""
    if padded or ranks <= 1 or width % ranks == 0:
        return
    raise InputError(
        "vLLM 0.33 refuses to start: the routed experts' width does not split over their ranks "
        f"(FusedMoEConfig asserts intermediate_size % tp_size == 0: {width:,} over {ranks} = "
        "TP × DP × PCP ranks)",
        hint="--enable-expert-parallel keeps each expert whole, or choose TP × DP × PCP dividing "
        f"{width:,}",
        code="invalid-parallelism",
    )
