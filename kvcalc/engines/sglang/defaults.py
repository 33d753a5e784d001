"""What SGLang resolves before sizing: the version profiles, ``mem_fraction_static``, the KV dtype.

**Unconfirmed**: the float32-config rule (fp16, bf16 for Gemma).
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest, unknown_version
from kvcalc.engines.common import is_float32_config
from kvcalc.engines.formats import nearest, resolve_generic
from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP8, FP8_E5M2, FP16, CacheDtype
from kvcalc.units import MIB

VERSIONS = ("latest", "2025.03")
EXTRA_KEYS = (
    "page_size",
    "max_total_tokens",
    "swa_full_tokens_ratio",
    "hybrid_swa",
    "mem_fraction_static",
)
_DTYPES = {"fp8": FP8, "fp8_e4m3": FP8, "fp8_e5m2": FP8_E5M2, "bf16": BF16, "bfloat16": BF16,
           "fp16": FP16, "float16": FP16}  # fmt: skip
#: what ``--kv-cache-dtype`` takes for SGLang (no integer caches)
KV_CACHE_DTYPES = ("auto", *_DTYPES)


def default_mem_fraction_static(gpu_memory_bytes: int | None, tp: int = 1, pp: int = 1) -> float:
    """``ServerArgs._handle_gpu_memory_settings`` without DP attention, piecewise graphs, speculation.

    80 GB card (81,559 MiB), TP 1: reserved = 512 + 8,192·1.5 + 256·2 + 1·1/8·1,024 = 13,440 MiB,
    so round((81,559 − 13,440) / 81,559, 3) = 0.835.
    """
    if not gpu_memory_bytes:
        return 0.88
    mem = gpu_memory_bytes / MIB
    small = tp < 4
    if mem < 20 * 1024:
        chunk, graph_bs = 2048, 8
    elif mem < 35 * 1024:
        chunk, graph_bs = 2048, 24 if small else 80
    elif mem < 60 * 1024:
        chunk, graph_bs = 4096, 32 if small else 160
    elif mem < 160 * 1024:
        chunk, graph_bs = 8192, 256 if small else 512
    else:
        chunk, graph_bs = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mem - reserved) / mem, 3)


def version(name: str | None) -> str:
    """The profile ``name`` picks (the newest when ``None``)."""
    if name is None:
        return VERSIONS[0]
    if name not in VERSIONS:
        raise unknown_version("sglang", name, VERSIONS)
    return name


def cache_dtype(request: EngineRequest, notes: list[str]) -> CacheDtype:
    """``--kv-cache-dtype``: ``auto`` follows the model's dtype (float32 configs are cast)."""
    name = resolve_generic("sglang", request.kv_cache_dtype, KV_CACHE_DTYPES)
    if name == "auto":
        model = request.model
        if not is_float32_config(model):
            return model.dtype
        chosen = BF16 if model.model_type.startswith("gemma") else FP16
        notes.append(f"float32 config: SGLang casts to {chosen.name} (unconfirmed)")
        return chosen
    if name not in _DTYPES:
        raise InputError(
            f"SGLang has no KV cache dtype {request.kv_cache_dtype!r} that kvcalc models",
            hint=nearest("sglang", name, KV_CACHE_DTYPES)
            + "choose one of: auto, "
            + ", ".join(_DTYPES),
            code="unsupported-dtype",
        )
    return _DTYPES[name]


def default_max_running_requests(tokens: int, max_model_len: int) -> int:
    """``max_running_requests`` when not given: ``min(max(int(tokens / L · 512), 2048), 4096)``."""
    return min(max(int(tokens / max_model_len * 512), 2048), 4096)
