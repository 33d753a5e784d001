"""Per-layer specs of hybrid models, and what vLLM 0.33 does for each recurrent mixer.

A Falcon-H1 layer (:class:`~kvcalc.model.recurrent_layouts.ParallelHybrid`) registers two cache
layers in vLLM (``model.layers.i.self_attn.attn`` then ``model.layers.i.mamba``), so specs are keyed
by *cache layer*: layer ``i``'s attention keeps key ``i``, its mixer gets ``num_layers + i``; ``owner``
maps every key back to its transformer layer (pipeline stages split transformer layers).

Prefill checkpoints in align mode (``MambaSpec.num_prefill_checkpoint_blocks``, vLLM 0.33.0): the
platform aligns blocks to them only when *every* mamba layer declares an alignment
(``get_mamba_prefill_checkpoint_alignment``):

- Mamba2 (``mamba_mixer2.py``): 1 checkpoint block, alignment 1;
- Gated DeltaNet (``qwen_gdn_linear_attn.py``): with the FlashInfer prefill kernel (SM 9.0; SM 10.x
  and 12.x with 128-wide keys and CUDA runtime 13, which the 0.33 wheel is built for), 1 block
  aligned to 64 tokens; OLMo-Hybrid's (``olmo_gdn_linear_attn.py``) never;
- Kimi Delta Attention (``kimi_k3/nvidia/kda.py``): Kimi-K3's full-rank gate with FlashKDA (SM 9/10/12,
  head_dim 128, bf16 activations, a bounded gate), 1 block aligned to 16 (read, not recorded);
  Kimi-Linear's layers (``KimiGatedDeltaNetAttention``) never, even with a bounded gate (recorded);
- Mamba1 (``mamba_mixer.py``) and short convolution (``short_conv.py``): none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from kvcalc.engines.vllm.groups import LayerSpec, layer_spec
from kvcalc.model.dtypes import BF16
from kvcalc.model.layouts import Layout, RecurrentState

if TYPE_CHECKING:  # the recurrent layouts load with the first recurrent layer (start-up: none)
    from kvcalc.model.recurrent_layouts import GatedDeltaNetState, KimiDeltaState, ParallelHybrid


def is_parallel_hybrid(layout: Layout) -> TypeGuard[ParallelHybrid]:
    """A Falcon-H1 layer: attention and Mamba2 side by side."""
    if not isinstance(layout, RecurrentState):
        return False
    from kvcalc.model.recurrent_layouts import ParallelHybrid

    return isinstance(layout, ParallelHybrid)


def cache_layers(layers: tuple[Layout, ...]) -> list[tuple[int, int, Layout]]:
    """``(key, transformer layer, layout)`` for every cache layer, in vLLM's registration order."""
    n = len(layers)
    out: list[tuple[int, int, Layout]] = []
    for index, layout in enumerate(layers):
        if isinstance(layout, RecurrentState) and is_parallel_hybrid(layout):
            out += [(index, index, layout.attention), (n + index, index, layout.mixer)]
        else:
            out.append((index, index, layout))
    return out


def layer_specs(
    layers: tuple[Layout, ...], block_size: int, mamba_page_padded: int | None,
    checkpoint_blocks: int, speculative_blocks: int = 0,
) -> tuple[dict[int, LayerSpec], dict[int, int]]:  # fmt: skip
    """(spec per cache-layer key, transformer layer per key)."""
    specs: dict[int, LayerSpec] = {}
    owner: dict[int, int] = {}
    for key, index, layout in cache_layers(layers):
        spec = layer_spec(
            layout, block_size, mamba_page_padded, checkpoint_blocks, speculative_blocks
        )
        if spec is not None:
            specs[key] = spec
            owner[key] = index
    return specs, owner


def mixers(layers: tuple[Layout, ...]) -> list[RecurrentState]:
    """The recurrent mixers (a Falcon-H1 layer's Mamba2 part included)."""
    return [
        x.mixer if is_parallel_hybrid(x) else x for x in layers if isinstance(x, RecurrentState)
    ]


def attention_layers(layers: tuple[Layout, ...]) -> list[Layout]:
    """The layers holding K/V per token (a Falcon-H1 layer's attention part included)."""
    return [
        x.attention if isinstance(x, RecurrentState) and is_parallel_hybrid(x) else x
        for x in layers
        if not isinstance(x, RecurrentState) or is_parallel_hybrid(x)
    ]


def prefill_checkpoints(
    layers: tuple[Layout, ...], model_dtype, cc: tuple[int, int] | None
) -> tuple[int, int, str | None]:
    """(checkpoint blocks per mamba layer, block alignment, note) in align mode."""
    found = mixers(layers)
    if not found:
        return 0, 1, None
    from kvcalc.model.recurrent_layouts import GatedDeltaNetState, KimiDeltaState, Mamba2State

    if all(isinstance(x, Mamba2State) for x in found):
        return 1, 1, "Mamba2 layers hold 1 prefill-checkpoint block in align mode (vLLM 0.33)"
    if all(isinstance(x, GatedDeltaNetState) and x.prefill_checkpoints and _flashinfer_gdn(x, cc)
           for x in found):  # fmt: skip
        where = "SM 9.0, assumed" if cc is None else f"SM {cc[0]}.{cc[1]}"
        if cc is not None and cc[0] in (10, 12):
            where += ", CUDA runtime 13 as the vLLM 0.33 wheel ships"
        return (
            1,
            64,
            (
                f"Gated DeltaNet with the FlashInfer prefill kernel ({where}): 1 prefill-checkpoint "
                "block and 64-token alignment in align mode (vLLM 0.33)"
            ),
        )
    if all(isinstance(x, KimiDeltaState) and _flashkda(x, model_dtype, cc) for x in found):
        return (
            1,
            16,
            (
                "KDA with the FlashKDA prefill kernel (full-rank bounded gate, SM 9/10/12, head_dim 128, "
                "bf16): "
                "1 prefill-checkpoint block and 16-token alignment in align mode (vLLM 0.33)"
            ),
        )
    return 0, 1, None


def _flashinfer_gdn(x: GatedDeltaNetState, cc: tuple[int, int] | None) -> bool:
    """``_resolve_gdn_prefill_backend``: SM 9.0; SM 10.x / 12.x with 128-wide keys and CUDA >= 13."""
    if cc is None or cc == (9, 0):
        return True
    return cc[0] in (10, 12) and x.head_k_dim == 128


def _flashkda(x: KimiDeltaState, model_dtype, cc: tuple[int, int] | None) -> bool:
    """``is_flashkda_supported`` (the recurrent state is float32 or bf16 in every kvcalc layout)."""
    return (
        cc is not None and cc[0] in (9, 10, 12) and x.head_dim == 128 and model_dtype == BF16
        and x.flashkda_gate
    )  # fmt: skip
