"""BLOOM (``BloomForCausalLM``): full multi-head attention with ALiBi on every layer.

vLLM 0.33 ``models/bloom.py`` (``BloomAttention``): ``n_head`` heads of ``hidden_size / n_head``
(it asserts the division), KV as many, and ALiBi slopes instead of rotary positions — numbers
handed to the attention, no cache shape. BLOOM has no ``max_position_embeddings``: vLLM derives no
length from its config and takes the one given. Under a quantized cache on SM 9.x vLLM selects
FLASH_ATTN, whose ALiBi path is FlashAttention 2 without an fp8 cache
(``engines/vllm/backends.py``). Recorded through ``scripts/vllm_meta_readback.py`` (the slopes
computed off the meta device). Weights (``modeling_bloom.py``): a LayerNorm after the word
embedding, the fused ``query_key_value`` and ``dense`` with bias, the MLP ``dense_h_to_4h`` /
``dense_4h_to_h`` (4 × hidden) with bias, two LayerNorms per layer, a final one, the head tied.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._mha import full_mha
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_bloom(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return full_mha(r, ctx, "bloom.py", "BLOOM")


FAMILIES = (
    Family(
        name="bloom",
        model_types={"bloom"},
        architectures={"BloomForCausalLM"},
        layouts=read_bloom,
        note="BLOOM: full multi-head attention with ALiBi per layer (vLLM 0.33 bloom.py)",
    ),
)
