"""What the engine refuses of a deployment's parallelism (vLLM's words), and what kvcalc does not
model: :func:`check_parallelism` on the settings alone, :func:`check_model_parallelism` with the
model. The layout itself is :mod:`kvcalc.planning.parallel`'s. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcalc.engines.names import traits
from kvcalc.errors import InputError
from kvcalc.planning.parallel import has_routed_experts, moe_split, parallel_product

if TYPE_CHECKING:
    from kvcalc.model.shape import ModelShape
    from kvcalc.planning.parallel import PlanInputs

CODE = "invalid-parallelism"


def _has_vllm_parallelism(inputs: PlanInputs, own_dcp: bool = False) -> list[str]:
    """The vLLM parallel settings given (DCP not, for an engine that reads its own)."""
    given = []
    if inputs.enable_expert_parallel:
        given.append("--enable-expert-parallel")
    if inputs.enable_eplb:
        given.append("--enable-eplb")
    if inputs.num_redundant_experts:
        given.append("--num-redundant-experts")
    if inputs.decode_context_parallel_size > 1 and not own_dcp:
        given.append("--decode-context-parallel-size")
    if inputs.cp_kv_cache_interleave_size is not None:
        given.append("--cp-kv-cache-interleave-size")
    if inputs.prefill_context_parallel_size > 1:
        given.append("--prefill-context-parallel-size")
    if inputs.all2all_backend is not None:
        given.append("--all2all-backend")
    return given


def check_parallelism(inputs: PlanInputs) -> None:
    """Refuse what the engine refuses (vLLM's words) and what kvcalc does not model."""
    can = traits(inputs.engine)
    name = can.name.display
    vllm_only = _has_vllm_parallelism(inputs, can.own_dcp)
    if vllm_only and not can.moe_data_parallel:
        raise InputError(
            f"{', '.join(vllm_only)}: not modelled for {name} (kvcalc models them for vLLM)",
            hint="plan with --engine vllm, or without those settings",
            code="unsupported-parallelism",
        )
    if inputs.enable_dp_attention and not can.dp_attention:
        raise InputError(
            f"--enable-dp-attention is SGLang's; {name} has no data-parallel attention",
            hint="vLLM: --data-parallel-size N (a KV pool per rank, experts over TP × DP)",
            code="unsupported-parallelism",
        )
    if (
        inputs.enable_dp_attention
        and inputs.data_parallel_size > 1
        and inputs.weights_memory_bytes is None
    ):
        # the pools are modelled (kvcalc.engines.sglang.parallel); the weights are not
        raise InputError(
            "--enable-dp-attention: SGLang's weights per GPU under DP attention are not "
            "estimated (attention split over TP / DP, replicated embeddings; not recorded)",
            hint="give --weights-memory (the mem usage of SGLang's 'Load weight end' line)",
            code="unsupported-parallelism",
        )
    dp = inputs.data_parallel_size
    if dp > 1 and not (can.moe_data_parallel or can.dp_attention):
        raise InputError(
            f"--data-parallel-size: not modelled for {name}",
            hint="--num-gpus N plans independent full replicas",
            code="unsupported-parallelism",
        )
    tp, pcp, dcp = (inputs.tensor_parallel_size, inputs.prefill_context_parallel_size,
                    inputs.decode_context_parallel_size)  # fmt: skip
    if can.moe_data_parallel:
        _check_vllm(inputs, tp, pcp, dcp, dp)
        _check_all2all(inputs.all2all_backend)
    _check_num_gpus(inputs)


def _check_vllm(inputs: PlanInputs, tp: int, pcp: int, dcp: int, dp: int) -> None:
    """``ParallelConfig._validate_parallel_config`` (vLLM 0.33.0 ``config/parallel.py``)."""
    reason = None
    if inputs.enable_eplb:
        if not inputs.enable_expert_parallel:
            reason = "enable_expert_parallel must be True to use EPLB."
        elif tp * pcp * dp <= 1:
            reason = ("EPLB requires tensor, prefill-context, or data parallelism, but got "
                      f"TP={tp}, PCP={pcp}, DP={dp}.")  # fmt: skip
    elif inputs.num_redundant_experts:
        reason = (f"num_redundant_experts is set to {inputs.num_redundant_experts} but EPLB is not "
                  "enabled. Either enable EPLB or unset num_redundant_experts.")  # fmt: skip
    if reason is None and pcp == 1 and tp % dcp:
        reason = f"tp_size={tp} must be divisible by dcp_size={dcp}."
    if reason is None and pcp > 1 and dcp not in (1, pcp, tp * pcp):
        reason = ("When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full "
                  f"TP x PCP axis. Got TP={tp}, PCP={pcp}, DCP={dcp}; valid DCP sizes are "
                  f"{sorted({1, pcp, tp * pcp})}.")  # fmt: skip
    if reason is not None:
        raise InputError(
            f"vLLM refuses these settings: {reason}",
            hint="change the parallel sizes as vLLM asks",
            code=CODE,
        )


#: vLLM 0.33.0 ``config/parallel.py`` ``All2AllBackend`` (``passthrough`` is bound by the MoE
#: backend, not selectable)
ALL2ALL_BACKENDS = ("naive", "pplx", "deepep_high_throughput", "deepep_low_latency", "deepep_v2",
                    "mori_high_throughput", "mori_low_latency", "moonep", "nixl_ep",
                    "allgather_reducescatter", "flashinfer_all2allv", "flashinfer_nvlink_two_sided",
                    "flashinfer_nvlink_one_sided")  # fmt: skip
MODELLED_ALL2ALL = "allgather_reducescatter"


def _check_all2all(backend: str | None) -> None:
    """Only vLLM's default all-to-all is modelled: it all-gathers and reduce-scatters through NCCL
    and PyTorch; the others allocate their own communication buffers (DeepEP's NVSHMEM buffers,
    MoRI, NIXL-EP, FlashInfer's workspaces) whose size kvcalc does not know."""
    if backend is None or backend == MODELLED_ALL2ALL:
        return
    if backend not in ALL2ALL_BACKENDS:
        raise InputError(
            f"--all2all-backend {backend!r}: vLLM's choices are " + ", ".join(ALL2ALL_BACKENDS),
            code="invalid-input",
        )
    raise InputError(
        f"--all2all-backend {backend}: not modelled (its communication buffers live outside "
        "PyTorch's allocator and kvcalc does not size them)",
        hint=f"plan with the default, {MODELLED_ALL2ALL}, and leave room for the buffers",
        code="unsupported-parallelism",
    )


def _check_num_gpus(inputs: PlanInputs) -> None:
    n = inputs.num_gpus
    if n is None:
        return
    if inputs.data_parallel_size > 1 and not inputs.enable_dp_attention:
        need = inputs.deployment_gpus
        if n != need:
            raise InputError(
                f"--num-gpus {n} does not match the parallelism: "
                f"{parallel_product(inputs)} = {need} GPUs",
                hint=f"drop --num-gpus, or give --num-gpus {need}",
                code=CODE,
            )
        return
    if n < inputs.world_size:
        raise InputError(
            f"{parallel_product(inputs)} = {inputs.world_size} needs that many GPUs, "
            f"but num_gpus is {n}",
            code="invalid-input",
        )


def check_model_parallelism(model: ModelShape, inputs: PlanInputs) -> None:
    """What the engine refuses for this model's parallel layout."""
    if not traits(inputs.engine).moe_data_parallel:
        return
    given = _has_vllm_parallelism(inputs)
    if inputs.data_parallel_size > 1:
        given.insert(0, "--data-parallel-size")
    if given:
        from kvcalc.engines.vllm.dcp import check_parallel_release, check_pcp

        check_parallel_release(inputs.engine_version, given)
        check_pcp(model, inputs.prefill_context_parallel_size)
    if inputs.enable_eplb and has_routed_experts(model):
        from kvcalc.engines.vllm.eplb import check_eplb

        check_eplb(model, inputs.quantization)
    ranks, whole = moe_split(inputs)
    moe = getattr(getattr(model, "weights", None), "moe", None)
    if moe is not None and not whole:
        from kvcalc.engines.vllm.defaults import resolve_profile
        from kvcalc.engines.vllm.moe_layout import check_expert_width

        if resolve_profile(inputs.engine_version)[0].name == "0.33":  # recorded there
            check_expert_width(moe.expert_intermediate_size, ranks,
                               padded=bool(getattr(moe, "min_width_per_rank", 0)))  # fmt: skip
    if (
        inputs.speculative_config
        and has_routed_experts(model)
        and (whole or ranks != inputs.tensor_parallel_size)
    ):
        from kvcalc.engines.vllm.speculative import check_moe_parallel_draft

        check_moe_parallel_draft(inputs.speculative_config,
                                 prefill_context_parallel_size=inputs.prefill_context_parallel_size,
                                 eplb=inputs.enable_eplb or inputs.num_redundant_experts > 0)  # fmt: skip
    if inputs.enable_expert_parallel:
        if getattr(model.weights, "moe", 0) is None:  # weights read, no MoE block
            # vLLM 0.33.0 config/model.py ModelConfig._verify_with_expert_parallelism
            raise InputError(
                "vLLM refuses these settings: Number of experts in the model must be greater than "
                "0 when expert parallelism is enabled.",
                hint="drop --enable-expert-parallel for a dense model",
                code=CODE,
            )
