"""Weight dimensions of families whose layers differ from the generic reader's
(:mod:`kvcalc.hfconfig.weights`):
Granite-4.0-H's Mamba2 and Jamba's Mamba1 mixers, LFM2's feed-forward width, and the recurrent
mixers (Mamba2, Gated DeltaNet) every hybrid shares.
Each equals transformers' meta-device build (tests/test_weights.py).
"""

from __future__ import annotations

import math

from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import (
    GdnWeights,
    Mamba1Weights,
    Mamba2Weights,
)


def granite_mamba2(r: ConfigReader, hidden: int) -> Mamba2Weights:
    """Granite-4.0-H's and Falcon-H1's Mamba2 mixer as transformers' configs default it (the KV
    reader's rule in :mod:`kvcalc.hfconfig.families._mamba`): inner width ``mamba_d_ssm``, else
    ``mamba_expand · hidden_size``; 128 heads of ``inner // heads`` unless ``mamba_d_head`` is set."""
    inner = r.int("mamba_d_ssm", default=None) or r.int("mamba_expand", default=2) * hidden
    heads = r.int("mamba_n_heads", default=128)
    head_dim = r.value("mamba_d_head", "auto")
    return Mamba2Weights(
        num_heads=heads,
        head_dim=inner // heads if head_dim == "auto" else r.int("mamba_d_head"),
        n_groups=r.int("mamba_n_groups", default=1),
        state_size=r.int("mamba_d_state", default=256),
        conv_kernel=r.int("mamba_d_conv", default=4),
        conv_bias=r.bool("mamba_conv_bias", True),
        proj_bias=r.bool("mamba_proj_bias", False),
        inner=inner,
        gated_norm=r.bool("mamba_rms_norm", True)
        if r.str("model_type", "") == "falcon_h1"
        else True,
    )


def lfm2_ffn(r: ConfigReader) -> int:
    """transformers' Lfm2MLP width: ``block_ff_dim`` (else ``intermediate_size``), auto-adjusted
    to 2/3, times ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of``
    (LFM2-1.2B: 12,288 → 8,192)."""
    size = r.int("block_ff_dim", "intermediate_size")
    if r.bool("block_auto_adjust_ff_dim", True):
        size = int(2 * size / 3)
        mult = r.value("block_ffn_dim_multiplier", 1.0)
        if isinstance(mult, (int, float)) and not isinstance(mult, bool) and 0 < mult < 1e3:
            multiple = r.int("block_multiple_of", default=256)
            size = multiple * -(-int(mult * size) // multiple)
    return size


def jamba_mamba1(r: ConfigReader, hidden: int) -> Mamba1Weights:
    """Jamba's Mamba1 mixer as JambaConfig sets it: inner ``mamba_expand · hidden_size``,
    ``mamba_dt_rank`` "auto" = ceil(hidden_size / 16)."""
    rank = r.value("mamba_dt_rank", "auto")
    return Mamba1Weights(
        inner=r.int("mamba_expand", default=2) * hidden,
        state_size=r.int("mamba_d_state", default=16),
        conv_kernel=r.int("mamba_d_conv", default=4),
        dt_rank=math.ceil(hidden / 16) if rank == "auto" else r.int("mamba_dt_rank"),
        conv_bias=r.bool("mamba_conv_bias", True),
        proj_bias=r.bool("mamba_proj_bias", False),
    )


def mamba2_weights(r: ConfigReader) -> Mamba2Weights:
    """A Mamba2 mixer (Nemotron-H, Falcon-H1, Zamba2 style keys)."""
    return Mamba2Weights(
        num_heads=r.int("mamba_num_heads", "num_heads"),
        head_dim=r.int("mamba_head_dim", "head_dim"),
        n_groups=r.int("n_groups", default=1),
        state_size=r.int("ssm_state_size", "state_size"),
        conv_kernel=r.int("conv_kernel", "mamba_d_conv", default=4),
        conv_bias=r.bool("use_conv_bias", True),
        proj_bias=r.bool("mamba_proj_bias", False) or r.bool("use_bias", False),
    )


def gdn_weights(r: ConfigReader) -> GdnWeights:
    """A Gated DeltaNet mixer (Qwen3-Next, Qwen3.5/3.6)."""
    return GdnWeights(
        num_k_heads=r.int("linear_num_key_heads"),
        num_v_heads=r.int("linear_num_value_heads"),
        k_head_dim=r.int("linear_key_head_dim"),
        v_head_dim=r.int("linear_value_head_dim"),
        conv_kernel=r.int("linear_conv_kernel_dim", default=4),
    )
