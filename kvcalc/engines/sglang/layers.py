"""Per-family layer rules of SGLang's token pool: DeepSeek sparse attention, KV-shared layers.

- DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5; ``DSATokenToKVPool``): every layer keeps the MLA
  latent and the indexer keys (fp8 values + a float32 scale per 128: ``index_head_dim + index_head_dim
  // 128 · 4`` B, whatever the KV dtype). With an fp8 KV cache the latent is SGLang's scaled record
  (``calculate_mla_kv_cache_dim``): 512 fp8 + 512 // 128 · 4 B scales + 64 bf16 RoPE values = 656 B.
  The default ``dsa`` attention backend pages by 64 tokens. GLM-5, TP 1, 20 GiB: 78 · (1,152 + 132)
  = 100,152 B per token, 21,474,836,480 // 100,152 = 214,422 → 214,400 (a multiple of 64); fp8:
  78 · (656 + 132) = 61,464 B, 349,376 tokens (SGLang's own sizing code, recorded).
- KV-shared layers (``num_kv_shared_layers``): SGLang 0.5.23 sizes its pools over every layer
  (``num_effective_layers`` = ``num_hidden_layers``; the full/SWA layer ids from ``layer_types``), so a
  shared layer costs what its source layer costs. Gemma-3n text (hybrid SWA off), TP 1, bf16:
  30 · 2 · 2 · 256 · 2 B = 61,440 B per token, 349,525 tokens at 20 GiB. Gemma 4 E2B (a reconstructed
  config; hybrid SWA): 7 full layers of 2,048 B and 28 sliding of 1,024 B, (20 GiB − 100 MiB) /
  (14,336 + 0.8 · 28,672) = 573,327 full tokens. Other families with shared layers are refused.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import SharedKV, SparseMLA
from kvcalc.model.dtypes import FP8, FP8_DS_MLA, CacheDtype
from kvcalc.model.layouts import Layout
from kvcalc.model.shape import ModelShape

#: the ``dsa`` backend's page (``page_size`` 64 for DeepSeek sparse attention)
DSA_PAGE_SIZE = 64
#: architectures whose KV-shared layers SGLang was recorded giving their own buffers
_UNSHARED_ARCHS = frozenset({
    "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "Gemma4ForCausalLM",
})  # fmt: skip


def is_dsa(model: ModelShape) -> bool:
    return any(isinstance(x, SparseMLA) for x in model.layers)


def layer_dtype(model: ModelShape, dtype: CacheDtype) -> CacheDtype:
    """The dtype the layers are sized in: SGLang's scaled 656 B record for an fp8 DSA latent."""
    return FP8_DS_MLA if dtype is FP8 and is_dsa(model) else dtype


def unshare(model: ModelShape) -> ModelShape:
    """Charge every KV-shared layer as its source layer (Gemma-3n), or refuse."""
    if not any(isinstance(x, SharedKV) for x in model.layers):
        return model
    archs = set(model.config_architectures or model.architectures)
    if not archs & _UNSHARED_ARCHS:
        raise InputError(
            f"sglang: the KV-shared layers of {model.model_type} are not checked against SGLang's "
            "sizing code (only Gemma-3n's and Gemma 4's were recorded)",
            hint="plan it with --engine vllm",
            code="unsupported-model",
        )
    layers: list[Layout] = []
    for layer in model.layers:
        while isinstance(layer, SharedKV):
            layer = model.layers[layer.source_layer]
        layers.append(layer)
    return replace(model, layers=tuple(layers))
