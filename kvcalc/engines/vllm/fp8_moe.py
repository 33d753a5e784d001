"""vLLM 0.33's FP8 MoE backends before SM 8.9: a refined block no kernel there runs (pure).

``oracle/fp8.py`` ``select_fp8_moe_backend`` walks the backends in priority order and, finding none
whose ``is_supported_config`` accepts the weights, raises ``NotImplementedError("No FP8 MoE backend
supports the deployment configuration.")``. Before SM 8.9 (A100, A10, RTX 3090) the block-fp8
experts run on Marlin (and, where installed, humming), which take the checkpoint's 128 × 128
blocks only; Triton takes any block but needs ``supports_fp8`` (SM 8.9), and DeepGEMM, FlashInfer
and CUTLASS need Hopper or Blackwell. So where the rank's expert width is not a multiple of the
checkpoint's block and ``refine_fp8_moe_block_shape`` refines it (:func:`kvcalc.estimate.pricing.
refined_fp8_moe_block`), nothing serves it. Recorded on an emulated A100: MiniMax-M2.5 (1,536-wide
experts, 128 × 128 blocks) at TP 8, 192 wide per rank, refined to 64 × 64 — refused; at TP 1, on
Marlin (``reference_sm8_sm12.json``). DeepSeek-V3 and Kimi-K2 (2,048 → 256 at TP 8) keep their
blocks and run on Marlin.
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.errors import InputError
from kvcalc.estimate.pricing import refined_fp8_moe_block


def refuse_refined_fp8_moe_before_sm89(request: EngineRequest) -> None:
    cc = request.gpu_compute_capability
    weights = request.model.weights
    if cc is None or cc >= (8, 9) or weights is None or weights.moe is None:
        return
    quant = weights.quantization
    if quant is None or quant.method != "fp8" or quant.scale_granularity != "block":
        return
    ranks = request.moe_ranks or request.tensor_parallel_size
    if request.expert_parallel or ranks == 1:
        return  # whole experts (or one rank): the checkpoint's blocks
    moe = weights.moe
    ispp = moe.expert_intermediate_size // ranks
    hidden = moe.latent_size or weights.hidden_size
    refined = refined_fp8_moe_block(quant.block_rows, quant.block_cols, ispp, hidden, split=True)
    if refined is None:
        return
    raise InputError(
        "vLLM refuses to start: No FP8 MoE backend supports the deployment configuration. "
        f"(the {moe.expert_intermediate_size}-wide experts are {ispp} wide on each of {ranks} "
        f"ranks, so their {quant.block_rows} × {quant.block_cols} fp8 blocks are refined to "
        f"{refined} × {refined}, which only the Triton kernels run, and those need SM 8.9; this "
        f"GPU is SM {cc[0]}.{cc[1]})",
        hint="use a TP size that keeps the expert width a multiple of the block, "
        "--enable-expert-parallel, or a GPU of SM 8.9 or newer",
        code="unsupported-quantization",
    )
