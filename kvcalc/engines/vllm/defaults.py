"""vLLM's version profiles and the defaults it picks before sizing: dtype, block size (batch
sizes: :mod:`kvcalc.engines.vllm.batch`).

Confirmed from the vLLM **0.33.0** wheel (``pip download --no-deps vllm==0.33.0``), files read:

- ``vllm/config/cache.py``: ``DEFAULT_BLOCK_SIZE = 16``; ``gpu_memory_utilization`` default 0.92;
  ``MambaCacheMode = Literal["align", "none"]`` (no ``"all"`` any more).
- ``vllm/config/model.py`` ``_resolve_auto_dtype``: a float32 config under ``--dtype auto`` becomes
  the platform's first supported dtype; ``vllm/platforms/cuda.py`` ``supported_dtypes``: bf16 on
  compute capability >= 8.0, fp16 on 6.x/7.x.
- ``vllm/platforms/cuda.py`` ``_get_backend_priorities`` + each MLA backend's
  ``supports_compute_capability`` / ``supported_kv_cache_dtypes`` / ``get_supported_kernel_block_sizes``
  and ``AttentionBackend.get_preferred_block_size`` (``vllm/v1/attention/backend.py``): on SM 9.x a
  bf16 MLA cache gets FLASH_ATTN_MLA (``MultipleOf(16)`` → 16), an fp8 one FLASHMLA (``[64]`` → 64);
  on SM 10.x FLASHINFER_MLA (``[32, 64]`` → 32, derived, not measured); elsewhere TRITON_MLA (16).
- ``vllm/engine/arg_utils.py`` ``get_batch_defaults``: >= 160 GiB → 16,384 tokens / 1,024 seqs for
  both contexts; >= 70 GiB, not "a100", not GB10 (SM 12.1) → LLM 16,384 / API 8,192, 1,024 seqs;
  else LLM 8,192 / API 2,048, 256 seqs.
- ``vllm/config/vllm.py`` ``max_concurrent_batches`` / ``max_in_flight_tokens``: async scheduling
  → 2 batches at PP 1 (V1 runner) or ``pp + 1`` (V2 runner), else ``pp``.
- ``vllm/envs.py``: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 1.

Profiles: ``0.33`` (0.33 on), ``0.28`` (0.28–0.32: one capacity line, the >= 160 GiB batch
tier, read in the 0.28.0-0.32.0 wheels), ``0.21`` (0.21–0.27: CUDA graphs subtracted, one batch
in flight, group-aware tokens on two lines, as the 0.21.0, 0.23.0, 0.25.0, 0.27.0 wheels print),
``0.20`` (0.20: as 0.21 with the older two capacity lines), ``0.10`` (0.9.1–0.19: two capacity lines plus "Available KV cache memory: %.2f GiB", as the
vllm-24577 record prints; 0.9.1 is the first wheel that logs it, from ``memory_profiling``, and the
first with the platform-preferred dtype for float32 configs), ``0.8`` (0.8.0–0.9.0: early V1, two
lines, no memory line, vllm-17122),
``0.6`` (the V0 engine: "# GPU blocks" lines, vllm-4454 / vllm-10517).

Read in the 0.19.0, 0.20.0 and 0.21.0 wheels (``config/cache.py``, ``envs.py``, ``v1/worker/
gpu_worker.py``): utilization 0.9 and ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0`` in 0.19; 0.92 and
``=1`` (the estimate subtracted) from 0.20.0 on, while 0.20 still logs the 0.19 capacity lines
(``v1/core/kv_cache_utils.py``; 0.21 derives the token count from the concurrency). Utilization
0.9 read in 0.8.4, 0.8.5, 0.9.2, 0.10.0, 0.10.1, 0.11.0 and 0.12.0; the batch-size rule per release
in :func:`kvcalc.engines.vllm.batch.batch_defaults`.

**Unconfirmed** (not read for those versions): everything the older profiles assume beyond the
engine-accounting doc and the engine_logs records — the float32 rule before 0.10 (fp16, bf16 for
Gemma, as old vLLM did), the block size non-MLA backends prefer on Blackwell (FlashInfer; 16
assumed), and the error texts and "Available KV cache memory" format per release (the wheels
show "models's" through 0.21 and ``format_gib`` from 0.14 on, which the profiles do not all
follow yet).
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.common import is_float32_config
from kvcalc.engines.extra import unknown_version, version_tuple
from kvcalc.engines.formats import nearest, resolve_generic
from kvcalc.engines.vllm.backends import attention_block_size, refuse_unsupported
from kvcalc.engines.vllm.modelopt import normalized
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import BF16, FP16, FP32, CacheDtype, parse_cache_dtype
from kvcalc.model.layouts import LayerKind
from kvcalc.model.shape import ModelShape

DEFAULT_BLOCK_SIZE = 16


@frozen
class VllmProfile:
    """The behaviours that differ between vLLM releases."""

    name: str
    #: first release this profile stands for, (major, minor) or (major, minor, patch)
    since: tuple[int, ...]
    v1: bool = True
    gpu_memory_utilization: float = 0.92
    #: CUDA-graph memory estimate subtracted from the budget (default since v0.21.0)
    subtracts_cudagraph: bool = True
    #: sliding/chunked reserve: ``max_in_flight_tokens`` (async: 2 batches) vs one batch
    in_flight_batches: bool = False
    #: the fit check plans against ``available − one block`` (BlockPool's null block)
    reserves_null_block: bool = False
    #: group-aware tokens (``int(concurrency · max_model_len)``, 0.21 on) vs blocks // groups · block
    merged_log_line: bool = True
    #: the capacity printed on one line (0.28 on) vs two (``GPU KV cache size`` / ``Maximum concurrency``)
    one_capacity_line: bool = True
    #: ">= 160 GiB" batch-default tier (0.28 on)
    big_gpu_tier: bool = False
    #: GB10 (SM 12.1) left out of the larger batch defaults (0.33)
    gb10_small_tier: bool = False
    #: float32 configs under ``auto``: the platform's preferred dtype (True) or fp16 (False)
    fp32_to_platform_dtype: bool = True
    #: hybrid MLA+Mamba alignment to 128-token blocks
    mla_hybrid_align_128: bool = False
    #: mamba prefill-checkpoint blocks and alignment in align mode
    prefill_checkpoints: bool = False
    #: the worker's "Available KV cache memory" line: None, "%.2f" or "format_gib"
    available_line: str | None = "format_gib"
    #: "Model loading took", the given-KV line and the start-up usage line at INFO, as the 0.28.0
    #: and 0.33.0 wheels print them (:mod:`~kvcalc.engines.vllm.messages`)
    memory_usage_lines: bool = False


PROFILES: tuple[VllmProfile, ...] = (
    VllmProfile(
        name="0.33", since=(0, 33), in_flight_batches=True, reserves_null_block=True,
        big_gpu_tier=True, gb10_small_tier=True, mla_hybrid_align_128=True, prefill_checkpoints=True,
        memory_usage_lines=True,
    ),
    VllmProfile(name="0.28", since=(0, 28), big_gpu_tier=True, memory_usage_lines=True),
    VllmProfile(name="0.21", since=(0, 21), one_capacity_line=False),
    VllmProfile(name="0.20", since=(0, 20), merged_log_line=False, one_capacity_line=False),
    VllmProfile(
        name="0.10", since=(0, 9, 1), gpu_memory_utilization=0.90, subtracts_cudagraph=False,
        merged_log_line=False, available_line="%.2f",
    ),
    VllmProfile(
        name="0.8", since=(0, 8), gpu_memory_utilization=0.90, subtracts_cudagraph=False,
        merged_log_line=False, fp32_to_platform_dtype=False, available_line=None,
    ),
    VllmProfile(
        name="0.6", since=(0, 0), v1=False, gpu_memory_utilization=0.90, subtracts_cudagraph=False,
        merged_log_line=False, fp32_to_platform_dtype=False, available_line=None,
    ),
)  # fmt: skip
VERSIONS = tuple(p.name for p in PROFILES)


def resolve_profile(version: str | None) -> tuple[VllmProfile, str | None]:
    """The profile for ``version`` (a profile name or any ``X.Y[.Z]``), and a note if mapped."""
    if version is None:
        return PROFILES[0], None
    for profile in PROFILES:
        if version == profile.name:
            return profile, None
    wanted = version_tuple(version)
    if not wanted or len(wanted) < 2:
        raise unknown_version("vllm", version, VERSIONS)
    for profile in PROFILES:
        if wanted[:3] >= profile.since:  # "0.9" is 0.9.0: (0, 9) < (0, 9, 1)
            note = f"vLLM {version} modelled by the {profile.name} profile"
            return profile, note
    raise unknown_version("vllm", version, VERSIONS)  # pragma: no cover - 0.0 catches all


# -- cache dtype ------------------------------------------------------------------------------
#: vLLM ``CacheDType`` spellings kvcalc can size (turboquant / nvfp4_ds_mla are not modelled)
VLLM_DTYPES = (
    "auto", "float16", "bfloat16", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
    "fp8_ds_mla", "fp8_per_token_head", "int8_per_token_head", "int4_per_token_head",
    "nvfp4", "nvfp4_4over6",
)  # fmt: skip

#: kvcalc's short cache dtype names → vLLM's (``CacheDType`` in vllm/config/cache.py)
_SHORT_NAMES = {"bf16": "bfloat16", "fp16": "float16"}
#: model types whose vLLM 0.33 model file builds its ``Attention`` without ``cache_config``, so
#: the layer's cache dtype is ``auto`` (the model dtype) whatever ``--kv-cache-dtype`` says
#: (``falcon.py``: the rotary and the ALiBi branch pass none; recorded: fp8 sizes as bf16)
_NO_CACHE_CONFIG = {"falcon": "falcon.py"}


def vllm_spelling(name: str) -> str:
    """A cache dtype as vLLM spells it (``CacheDType``): ``bf16`` → ``bfloat16``, ``fp16`` →
    ``float16``; other names are vLLM's already."""
    return _SHORT_NAMES.get(name, name)


def model_dtype(
    model: ModelShape, profile: VllmProfile, cc: tuple[int, int] | None
) -> tuple[CacheDtype, str | None]:
    """What ``--dtype auto`` gives: the config dtype, with float32 configs cast down."""
    if not is_float32_config(model):
        return model.dtype, None
    gemma = model.model_type.startswith("gemma")
    if profile.fp32_to_platform_dtype:
        chosen = BF16 if cc is None or cc >= (8, 0) else FP16
        if chosen is FP16 and gemma:
            chosen = FP32  # vLLM refuses fp16 for Gemma 2/3; fp32 is the next supported dtype
        why = "no compute capability given: SM >= 8.0 assumed, " if cc is None else ""
        return chosen, (
            f"config dtype is float32 ({model.config_dtype or 'absent'}); vLLM casts it to "
            f"{chosen.name} ({why}vllm/config/model.py _resolve_auto_dtype, 0.33.0)"
        )
    chosen = BF16 if gemma else FP16
    return chosen, (
        f"config dtype is float32; old vLLM cast it to {chosen.name} (unconfirmed for this version)"
    )


def checkpoint_kv_cache_dtype(quant: object) -> str | None:
    """What ``--kv-cache-dtype auto`` becomes for this checkpoint quantization config in vLLM 0.33
    (``utils/torch_utils.py`` ``get_kv_cache_quant_algo_string`` for ``quant_method: modelopt*``;
    ``attention.py``: a compressed-tensors ``kv_cache_scheme`` makes ``auto`` fp8). ``None``: the
    model dtype. A legacy ModelOpt ``hf_quant_config.json`` has no ``quant_method``: vLLM sets one
    when the file names ModelOpt as its producer (:mod:`kvcalc.engines.vllm.modelopt`), else its
    ``kv_cache_quant_algo`` is not honoured (the Nemotron-3-Super FP8 sidecar, as vLLM 0.33 sizes it)."""
    quant = normalized(quant)
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method") or "")
    if method.startswith("modelopt"):
        inner = quant.get("quantization", quant)
        inner = inner if isinstance(inner, dict) else quant
        algo = (inner.get("kv_cache_scheme") or quant.get("kv_cache_scheme")
                or inner.get("kv_cache_quant_algo") or quant.get("kv_cache_quant_algo"))  # fmt: skip
        if isinstance(algo, dict):
            if (
                algo.get("dynamic") is False
                and algo.get("num_bits") == 8
                and algo.get("type") == "float"
            ):
                return "fp8"
            if algo.get("num_bits") == 4 and algo.get("type") == "float":
                return "nvfp4"
            return None
        if isinstance(algo, str) and algo.lower() in (
            "fp8",
            "nvfp4",
        ):  # MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP
            return algo.lower()
        return None
    if method == "compressed-tensors" and quant.get("kv_cache_scheme") is not None:
        return "fp8"
    return None


def resolve_cache_dtype(
    request: EngineRequest, profile: VllmProfile
) -> tuple[CacheDtype, list[str]]:
    """The cache storage format for ``--kv-cache-dtype``; raises ``unsupported-dtype``."""

    name = resolve_generic(
        "vllm", request.kv_cache_dtype, VLLM_DTYPES
    )  # int8 → int8_per_token_head
    if name not in VLLM_DTYPES:
        raise InputError(
            f"vLLM has no KV cache dtype {request.kv_cache_dtype!r} that kvcalc models",
            hint=nearest("vllm", name, VLLM_DTYPES) + "choose one of: " + ", ".join(VLLM_DTYPES),
            code="unsupported-dtype",
        )
    notes: list[str] = []
    if name in _SHORT_NAMES:  # kvcalc's spelling; vLLM's CacheDType has only the long one
        notes.append(
            f"--kv-cache-dtype {name}: vLLM spells it {_SHORT_NAMES[name]} (`vllm serve "
            f"--kv-cache-dtype {_SHORT_NAMES[name]}`; vLLM 0.33 refuses {name}: "
            "vllm/config/cache.py CacheConfig._validate_cache_dtype)"
        )
    dropped = _NO_CACHE_CONFIG.get(request.model.model_type)
    if dropped and profile.name == "0.33":  # neither the flag nor a checkpoint's KV scheme
        if name != "auto":
            notes.append(
                f"--kv-cache-dtype {name} does not reach this model's attention: vLLM 0.33's "
                f"{dropped} builds its Attention layers without cache_config, so they cache in "
                "the model dtype"
            )
        name = "auto"
    elif name == "auto" and profile.name == "0.33":
        checkpoint = checkpoint_kv_cache_dtype(request.model.checkpoint_quant_config)
        if checkpoint:
            name = checkpoint
            notes.append(
                f"auto cache dtype: the checkpoint's quantization config asks for a {checkpoint} KV "
                "cache (vLLM 0.33 get_kv_cache_quant_algo_string)"
            )
    dtype = parse_cache_dtype(name)
    if dtype is None and profile.fp32_to_platform_dtype:  # auto: the dtype the model runs in
        from kvcalc.engines.vllm.dtypes import serving_dtype

        serving = serving_dtype(
            request.model, request.dtype, request.gpu_compute_capability, request.gpu_name
        )
        dtype = serving.dtype
        if serving.note:
            notes.append(serving.note)
    elif dtype is None:
        dtype, note = model_dtype(request.model, profile, request.gpu_compute_capability)
        if note:
            notes.append(note)
    if {LayerKind.MLA, LayerKind.COMPRESSED} & set(request.model.kinds):
        from kvcalc.engines.vllm.sparse import sparse_cache_dtype

        dtype, sparse_note = sparse_cache_dtype(
            request.model, name, dtype, request.gpu_compute_capability
        )
        if sparse_note:
            notes.append(sparse_note)
    if request.model.is_mla and (dtype.row_scale_bytes or dtype.block_format):
        raise InputError(
            f"cache dtype {dtype.name} is not modelled for MLA models in vLLM",
            hint="use auto, fp8 or fp8_ds_mla",
            code="unsupported-dtype",
        )
    return dtype, notes


# -- block size -------------------------------------------------------------------------------
def default_block_size(
    model: ModelShape, dtype: CacheDtype, cc: tuple[int, int] | None, profile: VllmProfile
) -> tuple[int, str | None, str | None]:
    """(block size, attention backend name when it decides, note). Hybrid alignment comes later."""
    if not profile.v1:
        return DEFAULT_BLOCK_SIZE, None, None
    if not model.is_mla:
        if profile.in_flight_batches:
            refuse_unsupported(model, dtype, cc)
        chosen = attention_block_size(model, dtype, cc) if profile.in_flight_batches else None
        return chosen if chosen else (DEFAULT_BLOCK_SIZE, None, None)
    from kvcalc.engines.vllm.sparse import is_sparse_mla, sparse_block_size

    if is_sparse_mla(model):
        return sparse_block_size(model, dtype, cc)
    assumed = cc is None
    major = 9 if cc is None else cc[0]
    if dtype.mla_record_bytes:
        # sparse MLA (DeepSeek-V3.2): measured block 64 on an H100 with vLLM 0.33.0 (doc §1.4)
        backend, size = "FLASHMLA_SPARSE", 64
    elif major == 9:
        backend, size = ("FLASHMLA", 64) if dtype.is_quantized else ("FLASH_ATTN_MLA", 16)
    elif major == 10:
        backend, size = "FLASHINFER_MLA", 32
    else:
        backend, size = "TRITON_MLA", DEFAULT_BLOCK_SIZE
    note = f"MLA attention backend {backend} → block size {size}"
    if assumed:
        note += " (no compute capability given: Hopper SM 9.0 assumed)"
    if major == 10:
        note += " (derived from vLLM 0.33.0 backend priorities, not measured)"
    if not profile.in_flight_batches:
        note += f" (backend choice read from vLLM 0.33.0; unconfirmed for {profile.name})"
    return size, backend, note
