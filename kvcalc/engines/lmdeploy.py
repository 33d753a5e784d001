"""LMDeploy's TurboMind engine: a pool of blocks of ``cache_block_seq_len`` tokens for every layer.

**From source** (the lmdeploy 0.18.0 wheel's Python, and TurboMind's C++ on GitHub):

- ``TurbomindEngineConfig`` (``lmdeploy/messages.py``, 0.18.0): ``cache_max_entry_count`` 0.8 — below
  1 a fraction of the **free** GPU memory, from 1 on a number of blocks; ``cache_block_seq_len``
  64 tokens; ``quant_policy`` 0, 4 (int4 KV) or 8 (int8 KV), fp8 (16, 17) refused by TurboMind;
  ``dtype="auto"``: bf16/fp16 as the config says, otherwise bf16 where the GPU runs it, else fp16
  (``_resolve_dtype`` in ``lmdeploy/turbomind/converter.py``); ``session_len`` from the config's
  length keys (``_get_and_verify_max_len``); ``max_batch_size`` by GPU name (``get_max_batch_size``:
  A100/A800 384, H100/H800/H200/L20Y 1,024, else 128).
- One block holds every layer (``src/turbomind/kernels/attention/block.h``, ``block::Layout``):
  ``layers · kv_heads_rank · 2 · block_len · (head_dim · bits/8 + param)`` bytes, where ``bits`` is
  ``quant_policy`` (16 unquantized) and ``param`` is, for a quantized cache, one scale and one zero
  point per token per head per side in the model dtype (2 · 2 B), else 0
  (``SequenceManager.cc``: ``BlockConfig{head_dim, kv_head_num / attn_tp, block_len, t_bits, q_bits}``).
- ``BlockManager::GetBlockCount`` (``BlockManager.cc``): ``size_t(free · ratio) / block_size``, with
  ``free`` from ``cudaMemGetInfo`` (the minimum over ranks); it logs ``[BlockManager] block_size = %lu
  MB`` (``block_size >> 20``), ``max_block_count = %d`` and ``chunk_size = %d`` (``cache_chunk_size``
  −1 → all blocks in one chunk).

**Unconfirmed**: that the C++ files read (GitHub, commits ``0e546d79`` for ``block.h``, ``0397f350``
for ``SequenceManager.cc``, ``0bb835a3`` for ``BlockManager.cc``) are the ones built into 0.18.0 (the
wheel ships them compiled); what is allocated on the GPU between the weights and the cache (kvcalc
takes free = total − weights − non-torch memory, activation buffers after the cache); the log
prefix (``[TM][INFO]``); sliding-window layers (booked for every token); no real LMDeploy log was
available to check the printed lines. MLA (``head_dim`` 576, shared K/V), linear-attention layers,
per-layer head counts, K and V widths that differ and TurboQuant (``quant_policy`` 42) are refused.

Worked example (Llama-3.1-8B, ``quant_policy=4``, 64-token blocks): 32 layers · 8 heads · 2 · 64 ·
(128·4/8 + 4) = 2,228,224 B a block; with 20 GiB free × 0.8 → 7,710 blocks = 493,440 tokens.
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan, MemoryInputs
from kvcalc.engines.common import binary_search_max_len, share_of_free
from kvcalc.engines.extra import check_extra, extra_int, unknown_version
from kvcalc.engines.formats import nearest
from kvcalc.engines.unmodelled import refuse_unmodelled
from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP16, CacheDtype
from kvcalc.model.layouts import WINDOWED_KINDS, FullAttention, LayerKind
from kvcalc.units import MIB, cdiv

VERSIONS = ("0.18",)
EXTRA_KEYS = ("cache_block_seq_len", "quant_policy", "cache_max_entry_count", "cache_chunk_size")
DEFAULT_FRACTION = 0.8
DEFAULT_BLOCK_LEN = 64
#: ``--kv-cache-dtype`` spellings → ``quant_policy``
POLICIES = {"auto": 0, "bf16": 0, "fp16": 0, "int8": 8, "int4": 4, "turbomind_int8": 8,
            "turbomind_int4": 4}  # fmt: skip
KV_CACHE_DTYPES = tuple(POLICIES)
#: ``get_max_batch_size('cuda')``: GPU name fragment → default ``max_batch_size``
_BATCH = {"a100": 384, "a800": 384, "h100": 1024, "h800": 1024, "l20y": 1024, "h200": 1024}


class LmdeployEngine:
    name = "lmdeploy"
    versions = VERSIONS

    def default_gpu_memory_utilization(self, memory: MemoryInputs) -> float | None:
        """``cache_max_entry_count`` (of the memory free after the weights)."""
        _version(memory.engine_version)
        return DEFAULT_FRACTION

    def available_kv_bytes(self, memory: MemoryInputs) -> int:
        """``size_t(free · cache_max_entry_count)``, free = total − weights − non-torch memory (the
        activation buffers and CUDA graphs are assumed to come after the cache, unconfirmed)."""
        _version(memory.engine_version)
        free = memory.total_memory_bytes - memory.weights_bytes - memory.non_torch_bytes
        return share_of_free(free, memory.fraction_or(DEFAULT_FRACTION))

    def plan_kv_cache(self, request: EngineRequest) -> KvCachePlan:
        check_extra(self.name, request.extra, EXTRA_KEYS)
        refuse_unmodelled(self.name, request.model)
        version = _version(request.engine_version)
        notes = ["TurboMind block layout and block count from its C++ source (GitHub; the build in "
                 "0.18.0 is unconfirmed); activation buffers assumed allocated after the cache"]  # fmt: skip
        policy, dtype = _policy(request, notes)
        heads, head_dim, layers = _shape(request)
        block_len = extra_int(
            request.extra, "cache_block_seq_len", request.block_size or DEFAULT_BLOCK_LEN
        )
        assert block_len is not None
        param = 2 * dtype.block_bytes if policy else 0  # scale + zero point in the model dtype
        bits = policy or 8 * dtype.block_bytes
        if head_dim * bits % 8:
            raise InputError(
                f"head_dim {head_dim} does not pack at {bits} bits", code="unsupported-dtype"
            )
        token_bytes = layers * heads * 2 * (head_dim * bits // 8 + param)  # per token, all layers
        block_bytes = block_len * token_bytes
        count = request.extra.get("cache_max_entry_count")
        if count is not None:
            blocks = extra_int(request.extra, "cache_max_entry_count", None)
            assert blocks is not None
            notes.append(f"cache_max_entry_count {blocks:,} ≥ 1: a number of blocks")
        else:
            blocks = max(0, request.available_kv_bytes) // block_bytes
        chunk = extra_int(request.extra, "cache_chunk_size", None, minimum=-1)
        chunk = blocks if chunk is None or chunk < 0 else int(blocks**0.5) if chunk == 0 else chunk
        L = request.max_model_len
        per_request = cdiv(L, block_len)
        fits = per_request <= blocks
        estimate = (
            None if fits else binary_search_max_len(L, lambda n: cdiv(n, block_len) <= blocks)
        )
        if any(x.kind in WINDOWED_KINDS for x in request.model.layers):
            notes.append(
                "sliding/chunked layers booked for every token (TurboMind's window handling unconfirmed)"
            )
        lines = (f"[BlockManager] block_size = {block_bytes >> 20} MB",
                 f"[BlockManager] max_block_count = {blocks}", f"[BlockManager] chunk_size = {chunk}")  # fmt: skip
        notes.append("log lines from BlockManager.cc's format strings, not checked against a real log "
                     f"(block_size = {block_bytes / MIB:,.2f} MiB before the shift)")  # fmt: skip
        group = KvCacheGroup(kind=LayerKind.FULL, num_layers=layers, page_bytes=block_bytes // layers,
                             block_size=block_len, blocks_per_request=per_request, num_blocks=blocks)  # fmt: skip
        return KvCachePlan(
            engine="lmdeploy", engine_version=version,
            kv_cache_dtype=f"turbomind_int{policy}" if policy else dtype.name, block_size=block_len,
            num_blocks=blocks, kv_cache_bytes=blocks * block_bytes, kv_cache_tokens=blocks * block_len,
            max_concurrency=blocks / per_request, kv_bytes_per_token=token_bytes,
            bytes_per_request=per_request * block_bytes, fits=fits, estimated_max_model_len=estimate,
            groups=(group,), log_lines=lines, notes=tuple(notes), max_model_len=L,
            available_kv_bytes=request.available_kv_bytes, fit_budget_bytes=blocks * block_bytes,
            max_num_seqs=request.max_num_seqs or default_max_batch_size(request.gpu_name),
        )  # fmt: skip


def default_max_batch_size(gpu_name: str | None) -> int:
    """``get_max_batch_size('cuda')`` from the GPU's name."""
    name = (gpu_name or "").lower()
    return next((size for key, size in _BATCH.items() if key in name), 128)


def _version(version: str | None) -> str:
    if version is None:
        return VERSIONS[0]
    if version not in VERSIONS:
        raise unknown_version("lmdeploy", version, VERSIONS)
    return version


def _policy(request: EngineRequest, notes: list[str]) -> tuple[int, CacheDtype]:
    """(``quant_policy``, the model dtype TurboMind runs in)."""
    name = request.kv_cache_dtype.strip().lower()
    if name not in POLICIES:
        raise InputError(
            f"LMDeploy (TurboMind) has no KV cache dtype {request.kv_cache_dtype!r}",
            hint=nearest("lmdeploy", name, KV_CACHE_DTYPES)
            + "choose one of: auto, int8 (quant_policy 8), int4 (quant_policy 4); fp8 is "
            "refused by TurboMind",
            code="unsupported-dtype",
        )
    policy = POLICIES[name]
    given = request.extra.get("quant_policy")
    if given is not None:
        if given not in (0, 4, 8):
            raise InputError(f"quant_policy must be 0, 4 or 8 for TurboMind, got {given!r}",
                             hint="16/17 (fp8) are refused by TurboMind; 42 (TurboQuant) is not modelled",
                             code="invalid-input")  # fmt: skip
        if name not in ("auto", "bf16", "fp16") and given != policy:
            raise InputError(f"--kv-cache-dtype {name} is quant_policy {policy}, but -E quant_policy={given} "
                             "was given", hint="give one of them", code="conflicting-options")  # fmt: skip
        policy = given
    if name in ("bf16", "fp16"):
        return policy, BF16 if name == "bf16" else FP16
    model = request.model
    declared = (model.config_dtype or "").strip().lower()
    if declared in ("bfloat16", "bf16", "float16", "fp16", "half"):
        return policy, model.dtype
    cc = request.gpu_compute_capability
    dtype = FP16 if cc is not None and cc < (8, 0) else BF16
    why = "no compute capability given: bf16 assumed" if cc is None else f"SM {cc[0]}.{cc[1]}"
    notes.append(f"config dtype is float32 or absent: TurboMind runs {dtype.name} ({why})")
    return policy, dtype


def _shape(request: EngineRequest) -> tuple[int, int, int]:
    """(KV heads per rank, head_dim, layers): TurboMind's one ``BlockConfig`` for every layer."""
    model = request.model
    tp = request.tensor_parallel_size
    if request.pipeline_parallel_size > 1:
        raise InputError(
            "TurboMind has no pipeline parallelism", hint="use -tp", code="invalid-parallelism"
        )
    odd = sorted({x.kind for x in model.layers if not isinstance(x, FullAttention)})
    if odd:
        raise InputError(
            f"LMDeploy's TurboMind cache is modelled for attention layers only; {model.name} has "
            f"{', '.join(odd)} layers",
            hint="use --engine vllm or sglang for this model",
            code="unsupported-model",
        )
    shapes = {(x.kv_heads, x.k_dim, x.v_dim) for x in model.layers if isinstance(x, FullAttention)}
    if len(shapes) != 1 or any(k != v for _, k, v in shapes):
        raise InputError(
            f"TurboMind sizes one head shape for every layer; {model.name} has "
            + ", ".join(f"{h} heads of {k}/{v}" for h, k, v in sorted(shapes)),
            code="unsupported-model",
        )
    heads, head_dim, _ = next(iter(shapes))
    if heads % tp:
        raise InputError(f"{heads} KV heads do not split over TP {tp} in TurboMind (kv_head_num / attn_tp)",
                         code="invalid-parallelism")  # fmt: skip
    return heads // tp, head_dim, model.num_layers
