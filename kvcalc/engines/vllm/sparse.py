"""vLLM 0.33 for DeepSeek Sparse Attention models (DeepSeek-V3.2, GLM-5): backend, block, cache dtype.

Read in the vLLM 0.33.0 wheel and checked with its own sizing code (H100 and B200 emulated):

- every layer reports two ``MLAAttentionSpec``: the latent (``kv_lora_rank + qk_rope_head_dim``)
  and the indexer keys (``DeepseekV32IndexerCache``: 132 uint8 per token for index_head_dim 128);
  both are full attention with one block size, so they form one ``UniformTypeKVCacheSpecs`` group
  whose page is their sum (kvcalc sizes one spec per layer with the summed page: same blocks);
- the block size is 64: ``DeepseekV32IndexerBackend`` supports only ``[64]`` on CUDA
  (``v1/attention/backends/mla/indexer.py``), "Setting kv cache block size to 64 for
  DEEPSEEK_V32_INDEXER/… backend(s)";
- the latent backend on SM 9.x: FLASH_ATTN_MLA_SPARSE for a 16-bit cache, FLASHMLA_SPARSE for a
  quantized one, which serves every fp8 variant as ``fp8_ds_mla`` (656 B per token:
  ``_canonicalize_sparse_mla_kv_cache_dtype`` in ``mla_attention.py``).

GLM-5 on an H100 with 20 GiB: bf16 pages 64·(1,152 + 132)·78 = 6,409,728 B per block → 3,350
blocks, 214,400 tokens; fp8 → fp8_ds_mla: 64·(656 + 132)·78 = 3,933,696 B → 5,459 blocks.

On SM 12.x (RTX 5090, RTX PRO 6000, DGX Spark) the only sparse latent backend is
FLASHINFER_MLA_SPARSE_SM120, which stores ``fp8_ds_mla`` for ``auto`` as for fp8 ("Using fp8_ds_mla
KV cache format for FLASHINFER_MLA_SPARSE_SM120 backend"): GLM-5 5,459 blocks either way. Before
SM 9 no backend serves sparse MLA ("No valid attention backend found": FLASH_ATTN_MLA_SPARSE,
FLASHMLA_SPARSE and FLASHINFER_MLA_SPARSE_SM90 reject the compute capability), so it is refused.
Recorded for GLM-5 and DeepSeek-V3.2 on an emulated A100 and RTX 5090
(``tests/fixtures/vllm_0_33/sparse_mla_capability.json``).
"""

from __future__ import annotations

from kvcalc.engines.vllm.dsv4 import check_dtype, is_deepseek_v4
from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import SparseMLA
from kvcalc.model.dtypes import FP8, FP8_DS_MLA, CacheDtype
from kvcalc.model.shape import ModelShape

SPARSE_BLOCK_SIZE = 64


def is_sparse_mla(model: ModelShape) -> bool:
    return any(isinstance(layer, SparseMLA) for layer in model.layers)


def sparse_cache_dtype(
    model: ModelShape, requested: str, dtype: CacheDtype, cc: tuple[int, int] | None
) -> tuple[CacheDtype, str | None]:
    """FLASHMLA_SPARSE serves a quantized latent as ``fp8_ds_mla``; DeepSeek-V4 always uses it."""
    if is_deepseek_v4(model):
        check_dtype(requested)
        return FP8_DS_MLA, (
            "DeepSeek-V4: the latent caches use the fp8_ds_mla layout (584 B per token) for auto "
            "and fp8 alike"
        )
    if not is_sparse_mla(model):
        return dtype, None
    major = 9 if cc is None else cc[0]
    if major < 9:
        assert cc is not None
        raise InputError(
            f"vLLM 0.33 has no attention backend for DeepSeek sparse attention "
            f"({model.model_type}) on SM {cc[0]}.{cc[1]}: 'No valid attention backend found' "
            "(FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE and FLASHINFER_MLA_SPARSE_SM90 need SM 9.0; "
            "FLASHINFER_MLA_SPARSE SM 10.x, FLASHINFER_MLA_SPARSE_SM120 SM 12.x)",
            hint="plan it on a Hopper or Blackwell GPU (H100, H200, B200, RTX 5090)",
            code="unsupported-model",
        )
    if model.model_type == "hy_v4" and major != 9:
        # models/hy_v4/nvidia/attention.py picks a sink-capable sparse MLA backend per platform
        # (_resolve_sink_backend): recorded on Hopper only
        raise InputError(
            f"vLLM 0.33: HY V4's sparse layers on SM {major}.x were not checked (its learnable "
            "sink selects the sparse MLA backend per platform; recorded on an H100)",
            hint="plan it on a Hopper GPU (H100, H200)",
            code="unsupported-model",
        )
    if major == 10 and requested.strip().lower() == "auto" and _is_glm_dsa(model):
        # GlmMoeDsaForCausalLM.verify_and_update_config (vllm/model_executor/models/config.py)
        return FP8, "GLM-5 on SM 10.x: vLLM switches the auto KV cache to fp8_e4m3"
    if major == 12 and not dtype.mla_record_bytes:
        return FP8_DS_MLA, (
            f"sparse MLA on SM 12.x: FLASHINFER_MLA_SPARSE_SM120 stores the latent as fp8_ds_mla "
            f"(656 B per token per layer) for a {requested.strip().lower()} cache too"
        )
    if major != 9 or not dtype.is_quantized or dtype.mla_record_bytes:
        return dtype, None
    return FP8_DS_MLA, (
        f"sparse MLA with a {dtype.name} cache: FLASHMLA_SPARSE stores the latent as fp8_ds_mla "
        "(656 B per token per layer)"
    )


def _is_glm_dsa(model: ModelShape) -> bool:
    return "GlmMoeDsaForCausalLM" in model.architectures or model.model_type == "glm_moe_dsa"


def sparse_block_size(
    model: ModelShape, dtype: CacheDtype, cc: tuple[int, int] | None
) -> tuple[int, str, str]:
    """(block size, backends, note) for a sparse MLA model on CUDA."""
    major = 9 if cc is None else cc[0]
    if major == 10:
        # fp8 prefers FLASHINFER_MLA_SPARSE on SM 10.x; a 16-bit latent FLASHMLA_SPARSE (measured
        # with 128 heads; FA4 sparse at 16 heads or fewer per rank, same pages)
        latent = "FLASHINFER_MLA_SPARSE" if dtype.is_quantized else "FLASHMLA_SPARSE"
    elif major == 12:
        latent = "FLASHINFER_MLA_SPARSE_SM120"
    else:
        latent = "FLASHMLA_SPARSE" if dtype.is_quantized else "FLASH_ATTN_MLA_SPARSE"
    backends = f"DEEPSEEK_V32_INDEXER/{latent}"
    note = (
        f"sparse MLA: the indexer backend DEEPSEEK_V32_INDEXER supports only block size 64 "
        f"(latent backend {latent})"
    )
    if cc is None:
        note += " (no compute capability given: Hopper SM 9.0 assumed)"
    return SPARSE_BLOCK_SIZE, backends, note
