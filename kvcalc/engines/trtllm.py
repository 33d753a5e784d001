"""TensorRT-LLM (LLM API, PyTorch backend): a block pool from a fraction of the *free* memory.

From ``tensorrt_llm/llmapi/llm_args.py`` ``KvCacheConfig`` (doc §5): ``free_gpu_memory_fraction``
defaults to 0.9 of the memory free after the model is loaded (not of the total), combined with
``max_tokens`` by taking the minimum; ``tokens_per_block`` defaults to 32 (the TensorRT-engine
build path used 64). Per token and rank: ``2 · kv_heads_rank · head_dim · dtype`` per layer.

**Unconfirmed** (the C++ block manager was not read): which buffers are subtracted before the
fraction is applied, how pools split by attention window (sliding layers are booked for every
token here), the MLA cache layout (one latent of ``kv_lora_rank + rope`` assumed), the PP layer
split (``tensor_split`` order assumed), and the log text (none is produced).

Cache dtypes (``KvCacheConfig.dtype``; the PyTorch backend takes ``auto``, ``fp8`` and ``nvfp4``,
``_VALID_KV_CACHE_DTYPES`` in ``_torch/pyexecutor``; ``KVCacheManager.get_cache_bytes_per_token``
sizes FP8, HALF, BF16, FLOAT and NVFP4):

- ``fp8``: 1 byte a value; its scales are per-tensor scalars, no per-token bytes;
- ``nvfp4`` (Blackwell; the docs ask for a ModelOpt checkpoint with NVFP4 KV scales): two values a
  byte plus a block-scale pool of one fp8 scale per 16 values — ``head/2 + head/16`` bytes per head
  and side (``createBlockScalePools(16)`` in ``kvCacheManager.cpp``, ``calculate_scaling_factor_size_bytes``
  with ``quant_vector_size=16``); head dims must be multiples of 16;
- ``int8`` (``int8_per_tensor``): INT8 KV exists on the TensorRT-engine backend only (``QuantMode``
  ``INT8_KV_CACHE``, one float32 scale per layer); 1 byte a value. The PyTorch backend refuses it;
  it is sized here with the same pool rule (**unconfirmed** for that backend, whose engine build
  defaults ``tokens_per_block`` to 64). MLA with nvfp4/int8 is refused (layout unconfirmed).

Worked example (Llama-3.1-8B, bf16, 10 GiB budget): 131,072 B per token, 32 tokens per block =
4 MiB per block → 2,560 blocks = 81,920 tokens; a 8,192-token request needs 256 blocks → 10.00x.
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan, MemoryInputs
from kvcalc.engines.common import binary_search_max_len, is_float32_config, share_of_free
from kvcalc.engines.extra import check_extra, extra_int, unknown_version
from kvcalc.engines.formats import nearest, resolve_generic
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP8, FP16, INT8_PER_TENSOR, NVFP4, CacheDtype
from kvcalc.model.layouts import WINDOWED_KINDS, LayerKind
from kvcalc.model.shape import ModelShape
from kvcalc.units import cdiv

VERSIONS = ("latest",)
EXTRA_KEYS = ("tokens_per_block", "max_tokens")
DEFAULT_FRACTION = 0.9
_DTYPES = {
    "fp8": FP8,
    "fp8_e4m3": FP8,
    "nvfp4": NVFP4,
    "int8": INT8_PER_TENSOR,
    "int8_per_tensor": INT8_PER_TENSOR,
    "fp16": FP16,
    "float16": FP16,
    "bf16": BF16,
    "bfloat16": BF16,
}
#: what ``--kv-cache-dtype`` takes for TensorRT-LLM (``fp16``/``bf16`` also name the model dtype)
KV_CACHE_DTYPES = ("auto", "fp8", "nvfp4", "int8")


class TrtllmEngine:
    name = "trtllm"
    versions = VERSIONS

    def default_gpu_memory_utilization(self, memory: MemoryInputs) -> float | None:
        """``KvCacheConfig.free_gpu_memory_fraction`` (of free memory after loading)."""
        _version(memory.engine_version)
        return DEFAULT_FRACTION

    def available_kv_bytes(self, memory: MemoryInputs) -> int:
        """``int(free · fraction)`` with free = total − weights − activations − context − graphs."""
        _version(memory.engine_version)
        free = memory.total_memory_bytes - memory.non_kv_bytes
        return share_of_free(free, memory.fraction_or(DEFAULT_FRACTION))

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        refuse_unmodelled(self.name, request.model)
        version = _version(request.engine_version)
        notes = ["block count details of the C++ KV cache manager are unconfirmed"]
        dtype = _dtype(request, notes)
        model = request.model.with_cache_dtype(dtype).per_rank(request.tensor_parallel_size)
        if any(x.kind is LayerKind.RECURRENT for x in model.layers):
            raise InputError(
                "TensorRT-LLM recurrent-state pools are not modelled", code="unsupported-model"
            )
        if any(x.kind in WINDOWED_KINDS for x in model.layers):
            notes.append("sliding/chunked layers booked for every token (window pools unconfirmed)")
        tpb = extra_int(request.extra, "tokens_per_block", 32)
        if tpb & (tpb - 1):
            raise InputError(
                f"tokens_per_block must be a power of 2, got {tpb}", code="invalid-input"
            )
        per_token = max(
            _stage_bytes(model, s)
            for s in _stages(model.num_layers, request.pipeline_parallel_size)
        )
        return _plan(request, version, dtype, per_token, tpb, notes)


def _version(version: str | None) -> str:
    if version is None:
        return VERSIONS[0]
    if version not in VERSIONS:
        raise unknown_version("trtllm", version, VERSIONS)
    return version


def _dtype(request: EngineRequest, notes: list[str]) -> CacheDtype:

    name = resolve_generic(
        "trtllm", request.kv_cache_dtype, KV_CACHE_DTYPES
    )  # int8 → int8_per_tensor
    if name == "auto":
        if is_float32_config(request.model):
            notes.append("float32 config: a 2-byte cache assumed (bf16, unconfirmed)")
            return BF16
        return request.model.dtype
    if name not in _DTYPES:
        raise InputError(
            f"TensorRT-LLM has no KV cache dtype {request.kv_cache_dtype!r}",
            hint=nearest("trtllm", name, KV_CACHE_DTYPES)
            + "choose one of: "
            + ", ".join(KV_CACHE_DTYPES),
            code="unsupported-dtype",
        )
    dtype = _DTYPES[name]
    if dtype in (NVFP4, INT8_PER_TENSOR) and request.model.is_mla:
        raise InputError(f"TensorRT-LLM's {dtype.name} cache is not modelled for MLA models",
                         hint="use auto or fp8", code="unsupported-dtype")  # fmt: skip
    if dtype is NVFP4:
        cc = request.gpu_compute_capability
        if cc is not None and cc[0] < 10:
            raise InputError(
                f"TensorRT-LLM's NVFP4 KV cache needs a Blackwell GPU (SM 10.x/12.x), got SM {cc[0]}.{cc[1]}",
                hint="use fp8 on this GPU", code="unsupported-dtype",
            )  # fmt: skip
        notes.append("NVFP4 KV: fp4 values + an fp8 block scale per 16 (a separate pool); needs Blackwell "
                     "and a ModelOpt checkpoint with NVFP4 KV scales" + ("" if cc else " (no GPU given)"))  # fmt: skip
    if dtype is INT8_PER_TENSOR:
        notes.append("INT8 KV: TensorRT-engine backend only (the PyTorch backend refuses it); one float32 "
                     "scale per layer, sized with the same pool rule (unconfirmed for that backend)")  # fmt: skip
    return dtype


def _stages(num_layers: int, pp: int) -> list[range]:
    """``tensor_split`` order: the first ``L % pp`` stages take one more layer (unconfirmed)."""
    base, extra = divmod(num_layers, pp)
    sizes = [base + (1 if i < extra else 0) for i in range(pp)]
    starts = [sum(sizes[:i]) for i in range(pp)]
    return [range(s, s + n) for s, n in zip(starts, sizes, strict=False)]


def _stage_bytes(model: ModelShape, stage: range) -> int:
    return sum(model.layers[i].bytes_per_token for i in stage)


def _plan(
    request: EngineRequest,
    version: str,
    dtype: CacheDtype,
    per_token: int,
    tpb: int,
    notes: list[str],
) -> KvCachePlan:
    L = request.max_model_len
    block_bytes = tpb * per_token
    num_blocks = max(0, request.available_kv_bytes // block_bytes) if block_bytes else 0
    cap = extra_int(request.extra, "max_tokens", None)
    if cap is not None:
        num_blocks = min(num_blocks, cap // tpb)
        notes.append(f"max_tokens {cap:,} caps the pool at {cap // tpb:,} blocks")
    per_request_blocks = cdiv(L, tpb)
    fits = per_request_blocks <= num_blocks
    estimate = None if fits else binary_search_max_len(L, lambda n: cdiv(n, tpb) <= num_blocks)
    group = KvCacheGroup(kind=LayerKind.FULL, num_layers=sum(1 for x in request.model.layers if x.bytes_per_token),
                         page_bytes=block_bytes, block_size=tpb, blocks_per_request=per_request_blocks,
                         num_blocks=num_blocks)  # fmt: skip
    return KvCachePlan(
        engine="trtllm", engine_version=version, kv_cache_dtype=dtype.name, block_size=tpb,
        num_blocks=num_blocks, kv_cache_bytes=num_blocks * block_bytes, kv_cache_tokens=num_blocks * tpb,
        max_concurrency=num_blocks / per_request_blocks, kv_bytes_per_token=per_token,
        bytes_per_request=per_request_blocks * block_bytes, fits=fits, estimated_max_model_len=estimate,
        groups=(group,), log_lines=(), notes=tuple(notes), max_model_len=L,
        available_kv_bytes=request.available_kv_bytes, fit_budget_bytes=num_blocks * block_bytes,
    )  # fmt: skip
