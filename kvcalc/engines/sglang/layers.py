"""Per-family layer rules of SGLang's token pool: DeepSeek sparse attention, KV-shared layers.

- DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5; ``DSATokenToKVPool``): every layer keeps the MLA
  latent and the indexer keys (fp8 values + a float32 scale per 128: ``index_head_dim + index_head_dim
  // 128 · 4`` B, whatever the KV dtype). The default ``dsa`` attention backend pages by 64 tokens.
  For SGLang's DeepSeek family (``_DEEPSEEK_FAMILY_ARCHS``) on CUDA, ``_dsa_kv_cache_dtype_default``
  turns ``auto`` into ``fp8_e4m3`` on SM 10 and newer (Blackwell) and ``bfloat16`` before, and
  refuses any dtype but those two; ``_dsa_split_backend_resolution`` then picks ``trtllm`` on SM 10+
  (``flashinfer_sparse_mla`` for GLM-5 in fp8 on SM 12) and ``flashmla_kv``/``fa3`` on Hopper.
  ``calculate_mla_kv_cache_dim``: a ``trtllm`` backend keeps the raw latent (576 values in the KV
  dtype); any other in fp8 keeps SGLang's scaled record, 512 fp8 + 512 // 128 · 4 B scales + 64 bf16
  RoPE values = 656 B. GLM-5, TP 1, 20 GiB: bf16 78 · (1,152 + 132) = 100,152 B per token,
  21,474,836,480 // 100,152 = 214,422 → 214,400 (a multiple of 64); fp8 on an H100: 78 · (656 + 132)
  = 61,464 B, 349,376 tokens; on a B200 by default: 78 · (576 + 132) = 55,224 B, 388,864 tokens
  (SGLang's own sizing code, recorded).
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
from kvcalc.model.dtypes import BF16, FP8, FP8_DS_MLA, CacheDtype
from kvcalc.model.layouts import Layout
from kvcalc.model.shape import ModelShape

#: the ``dsa`` backend's page (``page_size`` 64 for DeepSeek sparse attention)
DSA_PAGE_SIZE = 64
#: ``_DEEPSEEK_FAMILY_ARCHS`` (``arg_groups/overrides.py``): trtllm_mla on SM100 for MLA; for DSA,
#: the KV dtype and DSA backends SGLang picks by the GPU
DEEPSEEK_FAMILY = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
    "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
    "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
    "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM",
})  # fmt: skip
#: the dtypes ``_dsa_kv_cache_dtype_default`` lets through (kvcalc's generic ``fp8`` is fp8_e4m3)
_DSA_DTYPES = {"bf16": BF16, "bfloat16": BF16, "fp8": FP8, "fp8_e4m3": FP8}
#: architectures whose KV-shared layers SGLang was recorded giving their own buffers
_UNSHARED_ARCHS = frozenset({
    "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "Gemma4ForCausalLM",
})  # fmt: skip


def is_dsa(model: ModelShape) -> bool:
    return any(isinstance(x, SparseMLA) for x in model.layers)


def arch_of(model: ModelShape) -> str:
    """The architecture SGLang's model lists are keyed on (config.json's top-level one first)."""
    return (model.config_architectures or model.architectures or ("",))[0]


def dsa_resolves_dtype(model: ModelShape) -> bool:
    """Whether SGLang resolves the KV dtype of ``model`` by its DSA rule (the family's DSA models)."""
    return is_dsa(model) and arch_of(model) in DEEPSEEK_FAMILY


def dsa_cache_dtype(
    model: ModelShape, name: str, capability: tuple[int, int] | None, notes: list[str]
) -> CacheDtype:
    """``_dsa_kv_cache_dtype_default``: the KV dtype of a DSA model of the DeepSeek family
    (``name``: ``--kv-cache-dtype`` as SGLang spells it). The learnable-sink rule (bfloat16 only)
    is not here: HY V4, the one DSA family with sinks, is refused for SGLang before."""
    if capability is not None and capability[0] < 9:
        notes.append(
            f"DeepSeek sparse attention on SM {capability[0]}.{capability[1]}: SGLang sizes its "
            "pool as here (recorded on an emulated A100), but its default DSA kernels "
            "(flashmla_sparse prefill, fa3 decode) are built for SM 9.0 and newer and no start-up "
            "check refuses them: whether it runs is not checked (vLLM refuses it)"
        )
    if name == "auto":
        major = _major(
            model, capability, "the KV dtype (fp8_e4m3 on SM 10 and newer, else bfloat16)"
        )
        chosen = FP8 if major >= 10 else BF16
        notes.append(
            f"SGLang stores DeepSeek sparse attention's KV cache in "
            f"{'fp8_e4m3' if chosen is FP8 else 'bfloat16'} on SM {major} by default "
            "(_dsa_kv_cache_dtype_default)"
        )
        return chosen
    given = _DSA_DTYPES.get(name)
    if given is None:
        raise InputError(
            f"sglang: {arch_of(model)} (DeepSeek sparse attention) takes only a bf16/bfloat16 or "
            f"fp8_e4m3 KV cache, not {name!r} (SGLang 0.5.23 refuses it at start-up)",
            hint="use --kv-cache-dtype fp8_e4m3 or bfloat16",
            code="unsupported-dtype",
        )
    return given


def layer_dtype(
    model: ModelShape, dtype: CacheDtype, capability: tuple[int, int] | None
) -> CacheDtype:
    """The dtype the layers are sized in: for an fp8 DSA latent SGLang's scaled 656 B record, or
    the raw 576 fp8 values where SGLang picks a ``trtllm`` DSA backend (the family, SM 10+, but
    GLM-5 on SM 12 takes flashinfer_sparse_mla)."""
    if dtype is not FP8 or not is_dsa(model):
        return dtype
    if not dsa_resolves_dtype(model):
        return FP8_DS_MLA
    major = _major(model, capability, "the DSA backend and with it the fp8 record")
    glm_sm12 = arch_of(model) == "GlmMoeDsaForCausalLM" and major == 12
    return FP8 if major >= 10 and not glm_sm12 else FP8_DS_MLA


def _major(model: ModelShape, capability: tuple[int, int] | None, what: str) -> int:
    if capability is None:
        raise InputError(
            f"sglang: {model.model_type} (DeepSeek sparse attention): SGLang picks {what} by the "
            "GPU's compute capability, and no NVIDIA GPU is named",
            hint="pass --gpu NAME (see `kvcalc gpus`), or --kv-cache-dtype bfloat16",
            code="missing-gpu",
        )
    return capability[0]


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
