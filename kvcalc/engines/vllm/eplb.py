"""EPLB and the checkpoint's MoE quantization (vLLM 0.33.0).

``FusedMoE`` (``layers/fused_moe/routed_experts.py``) raises ``NotImplementedError("EPLB is not
supported <method>.")`` when ``--enable-eplb`` is set and the layer's MoE quantization method's
``supports_eplb`` is false: the base class's default. Read from the 0.33.0 wheel: true for the
unquantized method, ``Fp8MoEMethod`` (``quant_method: fp8``, and ``--quantization fp8`` online),
``ModelOptNvFp4FusedMoE`` (``modelopt_fp4``) and the generic ``Mxfp4MoEMethod``; false for
``GptOssMxfp4MoEMethod`` (gpt-oss's ``mxfp4`` checkpoints: recorded, gpt-oss-20b at DP 2 + EP with
8 redundant experts), ``ModelOptFp8MoEMethod`` (``modelopt``), AWQ and GPTQ. Other methods depend
on a kernel backend chosen at start-up (compressed-tensors WNA16 and NVFP4) or were not read:
refused by name rather than guessed. One model file refuses EPLB itself: ``minicpm.py``
(``MiniCPMForCausalLM`` and ``MiniCPM3ForCausalLM``, which subclasses it) raises
``NotImplementedError("EPLB is not supported for MiniCPM yet.")`` when its config has experts.
"""

from __future__ import annotations

from kvcalc.engines.vllm.modelopt import normalized
from kvcalc.errors import InputError
from kvcalc.model.shape import ModelShape

#: checkpoint ``quant_method`` values whose MoE method supports EPLB (None: unquantized)
SUPPORTED = frozenset({"", "fp8", "modelopt_fp4"})
#: online ``--quantization`` values whose MoE method supports EPLB
SUPPORTED_ONLINE = frozenset({"fp8"})
#: checkpoint methods vLLM refuses, and the class it names
REFUSED = {"modelopt": "ModelOptFp8MoEMethod", "awq": "AutoAWQMoEMethod",
           "gptq": "AutoGPTQMoEMethod"}  # fmt: skip


#: architectures whose vLLM 0.33 model file refuses EPLB on a MoE config, with its words
MODEL_FILE_REFUSALS = {
    "MiniCPMForCausalLM": "EPLB is not supported for MiniCPM yet.",
    "MiniCPM3ForCausalLM": "EPLB is not supported for MiniCPM yet.",
}


def check_eplb(model: ModelShape, quantization: str | None) -> None:
    """Refuse ``--enable-eplb`` where vLLM 0.33's model file or its MoE quantization method
    refuses it (``model`` has routed experts)."""
    for arch in model.architectures:
        if arch in MODEL_FILE_REFUSALS:
            raise InputError(
                f"vLLM refuses these settings: {MODEL_FILE_REFUSALS[arch]}",
                hint=f"drop --enable-eplb: {arch}'s model file does not support it",
                code="invalid-parallelism",
            )
    quant = normalized(model.quantization)
    method = str(quant.get("quant_method") or "").lower() if isinstance(quant, dict) else ""
    if quantization and not method:  # online quantization of an unquantized checkpoint
        if quantization.lower() in SUPPORTED_ONLINE:
            return
        method = quantization.lower()
    refused = REFUSED.get(method)
    if method == "mxfp4" and model.model_type == "gpt_oss":
        refused = "GptOssMxfp4MoEMethod"  # GptOssMxfp4Config.override_quantization_method
    if refused:
        raise InputError(
            f"vLLM refuses these settings: EPLB is not supported {refused}.",
            hint=f"drop --enable-eplb (and the redundant experts): {method} MoE layers do not "
            "support EPLB in vLLM 0.33",
            code="invalid-parallelism",
        )
    if method not in SUPPORTED:
        raise InputError(
            f"--enable-eplb with a {method} checkpoint: whether vLLM 0.33's MoE method for it "
            "supports EPLB is not modelled",
            hint="EPLB is modelled for unquantized, fp8 and ModelOpt NVFP4 MoE checkpoints",
            code="unsupported-parallelism",
        )
