"""What SGLang resolves before sizing: the version profiles, ``mem_fraction_static``, the KV dtype,
``chunked_prefill_size``, ``max_running_requests``.

Checked against SGLang 0.5.23's own argument resolution (the SGLang reference tool, emulated GPUs
of 16 to 180 GB): tests/fixtures/sglang_0_5_23/. Configs without a dtype are served in fp16
(recorded: GPT-2, SantaCoder, MiniMax-M2.5). **Unconfirmed**: bf16 for float32 Gemma configs; ``0.5.8`` outside the one record (≥ 160 GiB tier).
A given ``--max-running-requests`` caps the decode graphs' ``max_bs`` (recorded: Llama-3.1-8B at 128,
0.833). DeepEP is not modelled.
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.common import is_float32_config
from kvcalc.engines.extra import unknown_version
from kvcalc.engines.formats import nearest, resolve_generic
from kvcalc.engines.sglang.graphs import (
    CAPTURE_KEYS,
    DEFAULT_SETTINGS,
    GRAPH_KEYS,
    ReserveSettings,
)
from kvcalc.engines.sglang.hicache import KEYS as HICACHE_KEYS
from kvcalc.engines.sglang.layers import dsa_cache_dtype, dsa_resolves_dtype
from kvcalc.engines.sglang.multimodal import prefill_graph_allowed, vision_factor
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import BF16, FP8, FP8_E5M2, FP16, CacheDtype
from kvcalc.model.shape import ModelShape
from kvcalc.units import MIB

#: ``latest`` is SGLang 0.5.23 (recorded with SGLang's own code); ``0.5.8`` leaves the prefill
#: CUDA graph out of the reserve (one record, ROCm); ``2025.03`` is 0.4.x (two records) and
#: ``2025.02`` the same with the older pool line, without ``#tokens`` (one record)
VERSIONS = ("latest", "0.5.8", "2025.03", "2025.02")
#: the 0.4.x profiles: memory fraction by TP alone, no hybrid SWA, no multimodal reservation
LEGACY = frozenset({"2025.03", "2025.02"})
EXTRA_KEYS = (
    "page_size",
    "max_total_tokens",
    "swa_full_tokens_ratio",
    "hybrid_swa",
    "mem_fraction_static",
    "mamba_full_memory_ratio",
    "max_mamba_cache_size",
    "disable_radix_cache",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    *HICACHE_KEYS,
    *GRAPH_KEYS,
    *CAPTURE_KEYS,
)
_DTYPES = {"fp8": FP8, "fp8_e4m3": FP8, "fp8_e5m2": FP8_E5M2, "bf16": BF16, "bfloat16": BF16,
           "fp16": FP16, "float16": FP16}  # fmt: skip
#: what ``--kv-cache-dtype`` takes for SGLang (no integer caches)
KV_CACHE_DTYPES = ("auto", *_DTYPES)
#: DeepSeek-V4 and KDA hybrids: breakable prefill graphs are off (``disable_breakable_cudagraph_if_incompatible``)
_NO_PREFILL_GRAPH_ARCHS = frozenset({"DeepseekV4ForCausalLM", "KimiLinearForCausalLM"})


@frozen
class MemoryDefaults:
    """What ``_handle_gpu_memory_settings`` resolves, and the ``mem_fraction_static`` it makes."""

    chunked_prefill_size: int
    #: ``cuda_graph_config.decode.max_bs``
    decode_graph_max_bs: int
    #: how many prefill CUDA-graph sizes are captured (0: prefill graphs off)
    prefill_graph_sizes: int
    #: the MiB kept out of ``mem_fraction_static`` (activations, graphs, parallel slack)
    reserved_mib: float
    #: the multimodal factor applied after rounding (1.0 for text models)
    vision_factor: float
    mem_fraction_static: float


def memory_defaults(
    profile: str,
    gpu_memory_bytes: int | None,
    tp: int = 1,
    pp: int = 1,
    model: ModelShape | None = None,
    attn_dp: int = 1,
    max_running_requests: int | None = None,
    dcp: int = 1,
    settings: ReserveSettings = DEFAULT_SETTINGS,
) -> MemoryDefaults:
    """``handle_gpu_memory_settings`` of SGLang 0.5.23 without DeepEP (speculation runs after it
    and leaves it as it is: DeepSeek-V3 TP 8 with NEXTN keeps 0.799, recorded).

    H100 80GB (81,559 MiB), TP 1, Llama-3.1-8B: chunked prefill 8,192, decode graphs up to 256,
    58 prefill graph sizes; reserved = 512 + 8,192·1.5 + 1·1/8·1,024 + 256·2 + 58·8 = 13,904 MiB
    (at least 10,240), so round((81,559 − 13,904) / 81,559, 3) = 0.83. An MLA model reserves
    1,536 MiB for prefill graphs instead of 8 per size: 0.816. ``"2025.03"``/``"2025.02"`` (0.4.x) are a table by
    TP alone: 0.88, 0.87 from TP 2, 0.85 from 4, 0.81 from 8, 0.79 from 16.

    ``settings`` are the launch flags that move the reserve (:mod:`~kvcalc.engines.sglang.graphs`):
    a given ``--chunked-prefill-size`` replaces the tier's (``-1``: the activation term takes
    ``max(--max-prefill-tokens, 2,048)`` and no prefill graph size is captured), a given
    ``--cuda-graph-max-bs-decode`` the tier's decode ``max_bs`` (and is not capped by
    ``--max-running-requests``), ``--cuda-graph-max-bs-prefill`` the prefill graphs' largest size
    (the MLA and ``llama-2`` caps apply only to the default); a disabled decode graph drops
    ``max_bs · 2`` (DP attention's padding stays), a disabled prefill graph its 8 MiB per size or
    MLA's 1,536 MiB. Recorded: tests/fixtures/sglang_0_5_23/graph_reserve.json.
    """
    if profile != "latest" and settings.given:
        raise settings.refusal(profile)
    mem = None if not gpu_memory_bytes else gpu_memory_bytes / MIB
    small = tp < 4
    if profile in LEGACY:
        chunk, graph_bs = (2048, 8 if small else 80) if mem and mem < 25_000 else (8192, 160)
        fraction = next(
            f for n, f in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88)) if tp >= n
        )
        return MemoryDefaults(chunked_prefill_size=chunk, decode_graph_max_bs=graph_bs,
                              prefill_graph_sizes=0, reserved_mib=0.0, vision_factor=1.0,
                              mem_fraction_static=fraction)  # fmt: skip
    if mem is None:
        chunk, graph_bs = 4096, 160
    elif mem < 20 * 1024:
        chunk, graph_bs = 2048, 8
    elif mem < 35 * 1024:
        chunk, graph_bs = 4096, 48 if small else 160
    elif mem < 60 * 1024:
        chunk, graph_bs = 4096, 32 if small else 160
    elif mem < 160 * 1024:
        chunk, graph_bs = 8192, 256 if small else 512
    else:
        chunk, graph_bs = 16384, 512
    if settings.chunked_prefill_size is not None:
        chunk = settings.chunked_prefill_size
    if settings.decode_max_bs is not None:
        graph_bs = settings.decode_max_bs
    elif max_running_requests is not None:  # a given --max-running-requests caps the default
        graph_bs = min(graph_bs, max_running_requests)
    if settings.decode_sizes is not None:  # the list given: its largest, whatever caps it above
        graph_bs = max(settings.decode_sizes)
    mla = model is not None and model.is_mla
    sizes = 0
    # off under DCP and where apply_cuda_graph_compatibility turns it off, unless a prefill
    # backend was given explicitly
    allowed = settings.prefill_forced or (dcp == 1 and _prefill_graph(model, pp))
    prefill_on = profile == "latest" and settings.prefill_graph and allowed
    if prefill_on and settings.prefill_sizes is not None:
        sizes = len(settings.prefill_sizes)
    elif prefill_on:
        prefill_max = settings.prefill_max_bs
        if prefill_max is None:
            prefill_max = _prefill_graph_max_bs(model, chunk, mla, settings.max_total_tokens)
        sizes = len(prefill_graph_sizes(prefill_max))
    prefill_mib = (1536 if mla else 8 * sizes) if prefill_on else 0
    activation = chunk if chunk > 0 else settings.max_prefill_tokens
    decode_mib = graph_bs * 2 if settings.decode_graph else 0
    reserved = 512 + max(activation, 2048) * 1.5 + tp * pp / 8 * 1024 + decode_mib + prefill_mib
    if attn_dp > 1:  # reserve_for_graph_mb: DP attention pads its decode graphs
        reserved += graph_bs * attn_dp * 3 + (graph_bs * attn_dp * 1.5 if graph_bs > 300 else 0)
    if mem is not None and mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    factor = vision_factor(model) if model is not None else 1.0
    fraction = 0.95 if mem is None else round((mem - reserved) / mem, 3)
    return MemoryDefaults(chunked_prefill_size=chunk, decode_graph_max_bs=graph_bs,
                          prefill_graph_sizes=sizes, reserved_mib=reserved, vision_factor=factor,
                          mem_fraction_static=fraction * factor if factor != 1.0 else fraction)  # fmt: skip


def default_mem_fraction_static(
    gpu_memory_bytes: int | None, tp: int = 1, pp: int = 1, model: ModelShape | None = None,
    profile: str = "latest", attn_dp: int = 1, max_running_requests: int | None = None,
    dcp: int = 1, settings: ReserveSettings = DEFAULT_SETTINGS,
) -> float:  # fmt: skip
    """``mem_fraction_static`` when not given (:func:`memory_defaults`)."""
    return memory_defaults(profile, gpu_memory_bytes, tp, pp, model, attn_dp,
                           max_running_requests, dcp, settings).mem_fraction_static  # fmt: skip


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """``generate_prefill_cuda_graph_batch_sizes``: the token counts prefill graphs capture."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_bs + 1, 512)]  # fmt: skip
    return [s for s in sizes if s <= max_bs]


def _prefill_graph(model: ModelShape | None, pp: int) -> bool:
    """Whether the breakable prefill CUDA graph stays on (``apply_cuda_graph_compatibility``)."""
    if pp > 1:
        return False  # off by default under pipeline parallelism
    if model is None:
        return True
    if not prefill_graph_allowed(model):
        return False  # multimodal models outside SGLang's allow-list
    return not (set(model.architectures) & _NO_PREFILL_GRAPH_ARCHS)


def _prefill_graph_max_bs(
    model: ModelShape | None, chunk: int, mla: bool, max_total_tokens: int | None
) -> int:
    max_bs = min(8192, chunk) if mla else chunk
    if max_total_tokens is not None:  # a given --max-total-tokens caps the prefill graphs
        max_bs = min(max_bs, max_total_tokens)
    if model is not None and "llama-2" in model.name.lower():
        max_bs = min(max_bs, 4096)  # SGLang matches "llama-2" in the model path
    return max_bs


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
    if dsa_resolves_dtype(request.model):
        return dsa_cache_dtype(request.model, name, request.gpu_compute_capability, notes)
    if name == "auto":
        model = request.model
        if _mxfp4_gpt_oss(model):  # model_overrides/gpt_oss.py: dtype "bfloat16" for MXFP4
            return BF16
        if model.config_dtype is not None and not is_float32_config(model):
            return model.dtype
        # a float32 config, or none named (the config class's float32): fp16, bf16 for Gemma
        chosen = BF16 if model.model_type.startswith("gemma") else FP16
        what = "float32 config" if model.config_dtype is not None else "no dtype in config"
        notes.append(f"{what}: SGLang serves it in {chosen.name}")
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


def _mxfp4_gpt_oss(model: ModelShape) -> bool:
    """gpt-oss in MXFP4: SGLang 0.5.23 serves it in bfloat16 whatever its config names ("use bf16
    for mxfp4 triton kernels"; recorded on a config that names no dtype)."""
    quant = model.quantization or {}
    return "GptOssForCausalLM" in model.architectures and quant.get("quant_method") == "mxfp4"


def default_max_running_requests(profile: str, tokens: int, context_len: int) -> int:
    """``max_running_requests`` when not given.

    ``resolve_max_num_reqs`` (0.5.23): ``min(clamp(int(tokens / context_len · 512), 2048, 4096),
    tokens // 2)``. 0.4.x: the request pool holds that estimate + 1 slots and the scheduler
    prints ``min(tokens // 2, slots)`` (2,049 in both 0.4.x records).
    """
    estimate = min(max(int(tokens / context_len * 512), 2048), 4096)
    if profile in LEGACY:
        return min(tokens // 2, estimate + 1)
    return min(estimate, tokens // 2)
