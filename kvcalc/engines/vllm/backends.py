"""vLLM 0.33 attention-backend block sizes for non-MLA models whose kernels need a larger block.

The default is 16 (``CacheConfig.DEFAULT_BLOCK_SIZE``; FLASH_ATTN, TRITON_ATTN and FlashInfer accept
it). Read in the vLLM 0.33.0 wheel and measured with its own selector and block-size update
(``Platform.update_block_size_for_backend``):

- **mm-prefix models** (image tokens attend bidirectionally: Gemma 3/4, ``is_mm_prefix_lm``) get a
  composite backend: TRITON_FLASH_ATTN on SM 9.x, TRITON_FLASHINFER on SM 10.x
  (``v1/attention/backends/triton_flashinfer.py``: ``kernel_block_sizes=(64,)``, so block 64 for
  any cache dtype);
- **512-wide heads with an fp8 cache on SM 9.x** (Gemma 4's global layers): block 64, FA4's
  FP8-KV kernel pages (``FlashAttentionBackend._get_sm90_fa4_fp8_kv_block_size``, keyed on the
  model's head size 512). A 16-bit cache keeps 16.

Gemma-4-31B (auto = fp8 from its ``kv_cache_scheme``): 64 on an H100 and a B200; a bf16 cache: 16
on an H100, 64 on a B200.
"""

from __future__ import annotations

from kvcalc.engines.vllm.hybrid import attention_layers
from kvcalc.errors import InputError
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import ATTENTION_KINDS, FullAttention, LayerKind
from kvcalc.model.shape import ModelShape

FA4_FP8_HEAD_SIZE = 512
#: model types whose attention vLLM 0.33 builds with ALiBi slopes and the cache dtype (bloom.py;
#: falcon.py's ALiBi layers take no cache_config, so their cache stays in the model dtype)
ALIBI_FA2 = frozenset({"bloom"})
BLOCK_64 = 64
#: head sizes the mm-prefix composites serve (``head_sizes=(256, 512)``)
MM_PREFIX_HEAD_SIZES = (256, 512)


def attention_block_size(
    model: ModelShape, dtype: CacheDtype, cc: tuple[int, int] | None
) -> tuple[int, str, str] | None:
    """(block size, backend, note) where the backend needs other than 16; None otherwise."""
    heads = {x.k_dim for x in model.layers if isinstance(x, FullAttention)}
    if not heads:
        return None
    major = 9 if cc is None else cc[0]
    assumed = " (no compute capability given: Hopper SM 9.0 assumed)" if cc is None else ""
    mm = model.mm_prefix_attention and heads <= set(MM_PREFIX_HEAD_SIZES)
    if major == 10 and mm:
        return (
            BLOCK_64,
            "TRITON_FLASHINFER",
            (
                "image-prefix attention on SM 10.x: the TRITON_FLASHINFER backend runs 64-token blocks"
            ),
        )
    fp8 = dtype.name in ("fp8", "fp8_e4m3")
    if major == 9 and fp8 and FA4_FP8_HEAD_SIZE in heads:
        backend = "TRITON_FLASH_ATTN" if mm else "FLASH_ATTN"
        return (
            BLOCK_64,
            backend,
            (
                f"{FA4_FP8_HEAD_SIZE}-wide heads with an fp8 cache on SM 9.x: {backend} runs FA4's "
                f"FP8-KV kernel on 64-token blocks{assumed}"
            ),
        )
    return None


def refuse_unsupported(model: ModelShape, dtype: CacheDtype, cc: tuple[int, int] | None) -> None:
    """What the attention backend refuses when the model is built (measured with vLLM 0.33.0).

    K and V of different widths (MiMo-V2) run on FLASH_ATTN_DIFFKV, whose FlashAttention 4 path on
    SM 10.x has no fp8 cache: ``NotImplementedError: FlashAttention does not support fp8 kv-cache on
    this device.`` (``flash_attn.py``, ``FlashAttentionImpl.__init__``).

    BLOOM's ALiBi attention (:data:`ALIBI_FA2`) is FlashAttention 2 whatever the GPU
    (``fa_utils.get_flash_attn_version``: "Cannot use FA version 3 with ALiBi"), and FA2 has no fp8
    cache: on SM 9.x, where the selector picks FLASH_ATTN for an fp8 cache, the model's build fails
    the same way (recorded on an H100). On an A100 the selector passes FLASH_ATTN over for fp8 and
    FlashInfer serves it; on a B200 FlashInfer comes first (both recorded, planned).
    """
    if model.model_type in ALIBI_FA2 and dtype.is_quantized and (cc is None or cc[0] == 9):
        assumed = " (no compute capability given: Hopper SM 9.0 assumed)" if cc is None else ""
        raise InputError(
            f"vLLM refuses this model: FlashAttention does not support {dtype.name} kv-cache on "
            f"this device (ALiBi runs FlashAttention 2, which has no quantized cache; FLASH_ATTN "
            f"is vLLM's backend for it on SM 9.x){assumed}",
            hint="use --kv-cache-dtype auto on this GPU",
            code="unsupported-dtype",
        )
    if _diff_kv(model) and dtype.is_quantized and cc is not None and cc[0] == 10:
        name = "fp8" if dtype.name == "fp8" else dtype.name
        raise InputError(
            f"vLLM refuses this model: FlashAttention does not support {name} kv-cache on this "
            "device (K and V widths differ: FLASH_ATTN_DIFFKV on SM 10.x)",
            hint="use --kv-cache-dtype auto on this GPU",
            code="unsupported-dtype",
        )


def _diff_kv(model: ModelShape) -> bool:
    """K and V of unequal widths on some layer (MiMo-V2: vLLM's DIFFKV backends)."""
    result: bool = model.memo(("vllm.diff_kv",), lambda: any(
        isinstance(x, FullAttention) and x.k_dim != x.v_dim for x in model.layers))  # fmt: skip
    return result


#: FlashInfer's head sizes (``flashinfer.py`` ``get_supported_head_sizes``)
FLASHINFER_HEAD_SIZES = (64, 128, 256, 512)
#: families whose layers may carry attention sinks (which FlashInfer serves on SM 9.0 and 12.x
#: only: ``FlashInferBackend.supports_sink``), for a model whose weights kvcalc does not read
_SINK_FAMILIES = frozenset({"gpt-oss", "laguna", "granite-swa", "granitemoe-swa", "mimo-v2"})


def _has_sinks(model: ModelShape) -> bool | None:
    """Whether a layer has attention sinks, as the weight shape reads them (gpt-oss, Granite SWA's
    ``attention_sinks``, Laguna's ``swa_attention_sink_enabled``, MiMo-V2's
    ``add_swa_attention_sink_bias``); None where kvcalc has no weight shape."""
    w = model.weights
    if w is None:
        return None
    heads = (w.attention, w.global_attention, *w.layer_attention)
    return any(a is not None and a.sinks for a in heads)


def refuse_fp8_before_sm89(
    model: ModelShape, dtype: CacheDtype, cc: tuple[int, int] | None, gpu_name: str | None
) -> None:
    """An fp8 cache before SM 8.9 (A100, A10, RTX 3090, T4, V100) where only a Triton backend
    serves the model: ``TritonMLAImpl`` and ``TritonAttentionImpl`` raise "FP8 KV cache is not
    supported by the Triton ... backend ...; native FP8 (fp8e4nv) requires SM89+"
    (``triton_mla.py``, ``triton_attn.py``). MLA runs on TRITON_MLA alone there; MHA falls to
    TRITON_ATTN where FlashInfer cannot serve it (FlashAttention 2 has no fp8 cache): attention
    sinks, K and V of unequal widths (TRITON_ATTN_DIFFKV), a head size FlashInfer lacks, or below
    SM 8.0 (FlashInfer's floor). Recorded on an emulated A100 (``reference_sm8_sm12.json``) for
    DeepSeek-V3, Kimi-K2 and K2.5, gpt-oss-20b/120b, Phi-3.5-mini (96-wide heads), and Laguna,
    Granite SWA (dense and MoE) and MiMo-V2-Flash with sinks, where Laguna and Granite SWA without
    them run on FlashInfer; and on a T4 for Llama-3.1-8B. A sink family whose weights kvcalc does
    not read is refused as not checked. An encoder-decoder (Whisper's cross-attention, an
    ``ENCODER_DECODER`` attention FlashInfer does not take: ``supports_attn_type``) falls to
    TRITON_ATTN too (recorded on an emulated A100: ``registry_multimodal_whisper.json``), and so
    do the mm-prefix models (PaliGemma, BAGEL, Gemma 3: bidirectional image tokens, which only
    TRITON_ATTN serves before SM 9) and a hybrid layer's attention of a head size FlashInfer lacks
    (Zamba2's 160), recorded in the A100 sweep (``registry_a100_b200_sweep.json``)."""
    if cc is None or cc >= (8, 9) or not dtype.name.startswith("fp8"):
        return
    # the attention of every layer, a Falcon-H1 or Zamba2 hybrid layer's included
    heads = {x.k_dim for x in attention_layers(model.layers) if isinstance(x, FullAttention)}
    sinks = _has_sinks(model)
    if model.is_mla:
        from kvcalc.model.attention_layouts import SparseMLA  # MLA models only: loaded lazily

        if any(isinstance(x, SparseMLA) for x in model.layers):
            return  # sparse MLA: refused before SM 9 (sparse.py)
        backend = "Triton MLA"
    elif (cc < (8, 0) or not heads <= set(FLASHINFER_HEAD_SIZES) or sinks or _diff_kv(model)
          or LayerKind.CROSS in model.kinds or model.mm_prefix_attention):  # fmt: skip
        backend = "Triton attention"
    elif sinks is None and model.family in _SINK_FAMILIES:
        raise InputError(
            f"vLLM 0.33 with an fp8 KV cache on SM {cc[0]}.{cc[1]}: {model.model_type} may have "
            "attention sinks, which FlashInfer cannot serve there, and the Triton backend has no "
            "fp8 cache before SM 8.9; which backend vLLM picks was not checked",
            hint="plan it with --kv-cache-dtype auto on this GPU",
            code="unsupported-dtype",
        )
    else:
        return
    suggested = "float16" if cc < (8, 0) else "bfloat16"
    raise InputError(
        f"vLLM refuses to start: FP8 KV cache is not supported by the {backend} backend on "
        f"{gpu_name or 'this GPU'} (compute capability {cc[0]}.{cc[1]}); native FP8 (fp8e4nv) "
        f"requires SM89+. Re-run with --kv-cache-dtype {suggested}.",
        hint=f"use --kv-cache-dtype auto (or {suggested}) on this GPU, or a GPU of SM 8.9 or newer",
        code="unsupported-dtype",
    )


#: the block sizes vLLM 0.33's CUDA attention backends accept, by their ``supports_block_size``
#: (``v1/attention/backend.py``: the size must be a multiple of a supported kernel size):
#: FLASH_ATTN, TRITON_ATTN, FLEX_ATTENTION and FLASH_ATTN_MLA / TRITON_MLA ``MultipleOf(16)``,
#: FLASHINFER ``[16, 32, 64]``, FLASHMLA ``[64]``, FLASHINFER_MLA ``[32, 64]``, CUTLASS_MLA
#: ``[128]``, TURBOQUANT ``[16, 32, 64, 128]``: no backend takes a size that is not a multiple of 16
BLOCK_MULTIPLE = 16


def user_block_size_refusal(
    model: ModelShape, dtype: CacheDtype, cc: tuple[int, int] | None, block: int
) -> tuple[str, str] | None:
    """vLLM 0.33's refusal of a ``--block-size`` its attention backends cannot run, and the fix.

    Not a multiple of 16: the selector rejects every backend (``platforms/cuda.py``
    ``get_attn_backend_cls``: "No valid attention backend found ... Reasons: {FLASH_ATTN:
    [block_size not supported], ...}"; recorded with the harness for Qwen3-1.7B on an H100 and a
    B200 at 7 and 24, DeepSeek-V2-Lite (MLA) at 7). A multiple of 16 that the preferred backend
    cannot page (Gemma-4's 64-token FA4 FP8-KV pages at 16) is served by the next backend that can:
    the selector skips the rejected ones (Gemma-4-31B fp8 at 16 on an H100: TRITON_ATTN, recorded).
    """
    if not set(model.kinds) & {*ATTENTION_KINDS, LayerKind.MLA}:
        return None  # attention-free (Mamba only): no attention backend is selected
    if block % BLOCK_MULTIPLE:
        return (
            f"No valid attention backend found for cuda with AttentionSelectorConfig(... "
            f"block_size={block}, ...). Reasons: {{...: [block_size not supported]}} (every CUDA "
            "attention backend of vLLM 0.33 needs a block size that is a multiple of 16)",
            f"--block-size {BLOCK_MULTIPLE * max(1, round(block / BLOCK_MULTIPLE))} (a multiple "
            "of 16; vLLM's default is 16)",
        )
    return None
