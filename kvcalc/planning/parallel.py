"""How a deployment uses its GPUs: data, tensor, pipeline, context and expert parallelism.

vLLM 0.33 (``config/parallel.py``): one engine core spans ``world_size = PP × TP × PCP`` GPUs;
``--data-parallel-size`` runs DP engine cores, each with its own scheduler, requests and KV pool
(``cache_config.kv_cache_size_tokens`` is "per DP engine"), so a deployment uses
``DP × PP × TP × PCP`` GPUs (``ParallelConfig.world_size_across_dp``). MoE experts are split over
``TP × DP × PCP`` ranks whether or not ``--enable-expert-parallel`` is given
(``model_executor/layers/fused_moe/config.py`` ``FusedMoEParallelConfig.make``: without EP the
expert widths are split as a flattened TP group, with EP whole experts); attention and dense
weights are split over TP only. ``--decode-context-parallel-size`` reuses the TP ranks; ``-pcp``
multiplies the GPUs and leaves the KV cache as it is.

``--num-gpus`` without ``-dp``: GPUs beyond one engine make independent full replicas (each its own
weights and KV pool), as before; with ``-dp`` it must equal the deployment's GPUs. Either way the
plan says how the GPUs are used, idle ones included.

SGLang 0.5.23: ``--dp N`` alone runs N full replicas (``DataParallelController``, each ``--tp``
GPUs); with ``--enable-dp-attention`` the N attention ranks live inside the TP group
(``server_args.py``: ``tp_size % dp_size == 0``, attention TP = TP / DP).

Pure; what the engine refuses (in vLLM's words) is :mod:`kvcalc.planning.parallel_checks`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kvcalc.engines.names import traits
from kvcalc.frozen import frozen

if TYPE_CHECKING:
    from kvcalc.engines.names import EngineName
    from kvcalc.model.shape import ModelShape


class PlanInputs(Protocol):
    """What this module and :mod:`kvcalc.planning.parallel_checks` read of
    :class:`kvcalc.planning.inputs.PlanInputs` (which imports them to check itself, so the class is
    not imported here)."""

    @property
    def engine(self) -> EngineName: ...

    @property
    def engine_version(self) -> str | None: ...

    @property
    def num_gpus(self) -> int | None: ...

    @property
    def tensor_parallel_size(self) -> int: ...

    @property
    def pipeline_parallel_size(self) -> int: ...

    @property
    def data_parallel_size(self) -> int: ...

    @property
    def enable_expert_parallel(self) -> bool: ...

    @property
    def enable_eplb(self) -> bool: ...

    @property
    def num_redundant_experts(self) -> int: ...

    @property
    def quantization(self) -> str | None: ...

    @property
    def decode_context_parallel_size(self) -> int: ...

    @property
    def cp_kv_cache_interleave_size(self) -> int | None: ...

    @property
    def prefill_context_parallel_size(self) -> int: ...

    @property
    def enable_dp_attention(self) -> bool: ...

    @property
    def kv_cache_memory_bytes(self) -> int | None: ...

    @property
    def weights_memory_bytes(self) -> int | None: ...

    @property
    def all2all_backend(self) -> str | None: ...

    @property
    def speculative_config(self) -> object: ...

    @property
    def world_size(self) -> int: ...

    @property
    def deployment_gpus(self) -> int: ...


@frozen
class GpuLayout:
    """Where the GPUs go. Counts, not bytes."""

    #: GPUs in all (``--num-gpus``, else one deployment's)
    num_gpus: int
    #: GPUs of one engine core: TP × PP × PCP
    engine_gpus: int
    #: data-parallel ranks of one deployment (vLLM engine cores sharing the experts; SGLang
    #: attention ranks with DP attention, replicas without)
    data_parallel_size: int
    #: GPUs of one deployment: DP × PP × TP × PCP (SGLang DP attention: TP × PP)
    deployment_gpus: int
    #: independent full copies of the deployment on ``num_gpus``
    replicas: int
    #: GPUs no deployment uses
    idle_gpus: int
    #: KV pools (engine cores, or SGLang attention ranks) over all GPUs, each with its own requests
    pools: int
    #: ranks the routed experts are split over (vLLM: TP × DP × PCP; else TP)
    moe_ranks: int
    #: whole experts per rank (``--enable-expert-parallel``) rather than each expert split
    expert_parallel: bool
    notes: tuple[str, ...] = ()


def parallel_product(inputs: PlanInputs) -> str:
    parts = []
    if inputs.data_parallel_size > 1 and not inputs.enable_dp_attention:
        parts.append(f"DP {inputs.data_parallel_size}")
    parts.append(f"PP {inputs.pipeline_parallel_size}")
    parts.append(f"TP {inputs.tensor_parallel_size}")
    if inputs.prefill_context_parallel_size > 1:
        parts.append(f"PCP {inputs.prefill_context_parallel_size}")
    return " × ".join(parts)


def gpu_layout(inputs: PlanInputs, *, moe: bool) -> GpuLayout:
    """How ``inputs`` uses its GPUs (``moe``: the model has routed experts)."""
    can = traits(inputs.engine)
    dp = inputs.data_parallel_size
    engine = inputs.world_size
    deployment = inputs.deployment_gpus
    num_gpus = inputs.num_gpus or deployment
    replicas = max(1, num_gpus // deployment)
    idle = num_gpus - replicas * deployment
    notes: list[str] = []
    moe_ranks, whole = moe_split(inputs)
    pools = dp * replicas
    if dp > 1 and can.moe_data_parallel:
        split = (
            f"routed experts split over TP × DP × PCP = {moe_ranks} ranks "
            + ("(whole experts, --enable-expert-parallel)" if inputs.enable_expert_parallel
               else "(each expert's width split; --enable-expert-parallel keeps whole experts)")
            if moe else "no routed experts: every rank holds the full model"
        )  # fmt: skip
        notes.append(
            f"data parallel {dp}: {dp} engine cores of {engine} GPU(s), each with its own "
            f"requests and KV pool; {split}; attention and dense weights over TP "
            f"{inputs.tensor_parallel_size} on every rank"
        )
    elif dp > 1 and inputs.enable_dp_attention:
        notes.append(
            f"DP attention {dp}: {dp} attention ranks inside TP {inputs.tensor_parallel_size} "
            f"({deployment} GPUs), each with its own requests and KV pool"
        )
    elif dp > 1:
        notes.append(
            f"--dp {dp}: {dp} full replicas of TP {inputs.tensor_parallel_size}, each with its "
            "own weights and KV pool (no DP attention)"
        )
    elif moe and moe_ranks > 1 and inputs.enable_expert_parallel:
        notes.append(f"expert parallel: whole experts over TP × DP × PCP = {moe_ranks} ranks")
    pcp = inputs.prefill_context_parallel_size
    if pcp > 1:
        notes.append(
            f"prefill context parallel {pcp}: each engine core spans TP {inputs.tensor_parallel_size}"
            f" × PP {inputs.pipeline_parallel_size} × PCP {pcp} = {engine} GPUs; the KV cache is "
            "as without PCP on every GPU (replicated over the PCP ranks unless DCP spans them)"
            + (f"; routed experts over {moe_ranks} ranks" if moe else "")
        )
    if (
        can.moe_data_parallel
        and (dp > 1 or inputs.prefill_context_parallel_size > 1)
        and (inputs.kv_cache_memory_bytes is None)
    ):
        notes.append(
            f"activation and CUDA-graph terms: kvcalc's estimate for one engine core of TP "
            f"{inputs.tensor_parallel_size}, non-torch its multi-GPU figure (the DP/EP group has "
            "NCCL communicators); what data/context parallelism adds beyond that (MoE tokens "
            "all-gathered over the DP ranks by vLLM's default allgather_reducescatter backend, "
            "DP batch padding, the communicators' own size) is not measured (unconfirmed)"
        )
    if replicas > 1:
        notes.append(
            f"--num-gpus {num_gpus}: {replicas} independent full replicas of {deployment} GPU(s) "
            "(each its own weights and KV pool; concurrency over all replicas counts them all)"
        )
    if idle:
        notes.append(
            f"--num-gpus {num_gpus}: {idle} GPU(s) idle — the parallelism uses {deployment} per "
            f"replica ({parallel_product(inputs)}), {replicas * deployment} in all"
        )
    return GpuLayout(
        num_gpus=num_gpus, engine_gpus=engine, data_parallel_size=dp, deployment_gpus=deployment,
        replicas=replicas, idle_gpus=idle, pools=pools, moe_ranks=moe_ranks,
        expert_parallel=whole, notes=tuple(notes),
    )  # fmt: skip


def moe_split(inputs: PlanInputs) -> tuple[int, bool]:
    """(ranks the routed experts are split over, whole experts per rank): vLLM's MoE group is
    TP × DP × PCP (``FusedMoEParallelConfig.make``); other engines split experts over TP."""
    ranks = inputs.tensor_parallel_size
    if traits(inputs.engine).moe_data_parallel:
        ranks *= inputs.data_parallel_size * inputs.prefill_context_parallel_size
    return ranks, inputs.enable_expert_parallel and ranks > 1


def shared_experts_whole(model: ModelShape, inputs: PlanInputs) -> bool:
    """The MoE blocks' shared experts are whole on every rank (vLLM's sequence-parallel MoE:
    :mod:`kvcalc.engines.vllm.moe_layout`); other engines split them over TP."""
    if not traits(inputs.engine).moe_data_parallel:
        return False
    from kvcalc.engines.vllm.moe_layout import shared_experts_whole as vllm_whole

    return vllm_whole((*model.architectures, *model.config_architectures),
                      tensor_parallel_size=inputs.tensor_parallel_size,
                      data_parallel_size=inputs.data_parallel_size,
                      enable_expert_parallel=inputs.enable_expert_parallel)  # fmt: skip


def dense_mlps_whole(model: ModelShape, inputs: PlanInputs) -> bool:
    """The dense layers' MLPs are whole on every rank (vLLM's sequence-parallel MoE in
    DeepSeek-V3.2 and GLM-5: :mod:`kvcalc.engines.vllm.moe_layout`); other engines split them."""
    if not traits(inputs.engine).moe_data_parallel:
        return False
    from kvcalc.engines.vllm.moe_layout import dense_mlps_whole as vllm_whole

    return vllm_whole((*model.architectures, *model.config_architectures),
                      tensor_parallel_size=inputs.tensor_parallel_size,
                      data_parallel_size=inputs.data_parallel_size,
                      enable_expert_parallel=inputs.enable_expert_parallel,
                      pipeline_parallel_size=inputs.pipeline_parallel_size)  # fmt: skip


def has_routed_experts(model: ModelShape) -> bool:
    """The model has routed experts (its weight shape has a MoE block)."""
    return getattr(getattr(model.weights, "moe", None), "num_experts", 0) > 0
