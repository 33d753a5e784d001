"""ModelOpt quantization configs as vLLM 0.33 normalises them before anything reads them.

``transformers_utils/model_arch_config_convertor.py`` ``_normalize_quantization_config``: a config
written by ModelOpt (``producer.name == "modelopt"``, or a legacy ``quantization`` block holding
``modelopt_quant_config``) gets its ``quant_method`` from ``quantization.quant_algo``; an algorithm
it does not map stops vLLM at start-up (``ValueError: Unknown ModelOpt quant algo: ...``). This is
what makes a legacy ``hf_quant_config.json`` sidecar count: once ``quant_method`` is ``modelopt*``,
``get_kv_cache_quant_algo_string`` honours its ``kv_cache_quant_algo``. A sidecar without the
``producer`` block keeps no ``quant_method`` and is not honoured. Checked with vLLM 0.33.0's own
code: Llama-3.1-8B with a ``producer``-tagged FP8 sidecar plans an fp8 cache under ``auto``
(20,480 blocks in 20 GiB), the same sidecar without ``producer`` a bf16 one (10,240), and
``quant_algo: W4A8_AWQ`` is refused.
"""

from __future__ import annotations

from typing import Any

#: ``quant_algo`` (upper case) → the ``quant_method`` vLLM 0.33 sets
MODELOPT_METHODS = {
    "FP8": "modelopt",
    "FP8_PER_CHANNEL_PER_TOKEN": "modelopt",
    "FP8_PB_WO": "modelopt",
    "NVFP4": "modelopt_fp4",
    "MIXED_PRECISION": "modelopt_mixed",
}


def _modelopt_algo(quant: dict[str, Any]) -> str | None:
    """The ``quantization.quant_algo`` vLLM maps, for a config it treats as ModelOpt's."""
    producer = quant.get("producer")
    name = producer.get("name") if isinstance(producer, dict) else None
    inner = quant.get("quantization")
    legacy = isinstance(inner, dict) and "modelopt_quant_config" in inner
    if name != "modelopt" and not legacy:
        return None
    algo = inner.get("quant_algo") if isinstance(inner, dict) else None
    return None if algo is None else str(algo)


def normalized(quant: object) -> object:
    """``quant`` with the ``quant_method`` vLLM 0.33 gives a ModelOpt config (a copy; others as
    they are). An algorithm vLLM does not map is left for :func:`unknown_algo` to refuse."""
    if not isinstance(quant, dict):
        return quant
    algo = _modelopt_algo(quant)
    method = MODELOPT_METHODS.get(algo.upper()) if algo is not None else None
    return {**quant, "quant_method": method} if method else quant


def unknown_algo(quant: object) -> str | None:
    """vLLM 0.33's start-up error for a ModelOpt config whose ``quant_algo`` it does not know."""
    if not isinstance(quant, dict):
        return None
    algo = _modelopt_algo(quant)
    if algo is None or algo.upper() in MODELOPT_METHODS:
        return None
    return f"Unknown ModelOpt quant algo: {algo}"
