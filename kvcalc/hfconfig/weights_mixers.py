"""Weight dimensions of the recurrent mixers several families share, for :mod:`kvcalc.hfconfig.weights`:
Granite-4.0-H's and Falcon-H1's Mamba2 keys, the Nemotron-H/Zamba2-style Mamba2 and the Gated
DeltaNet (Qwen3-Next, Qwen3.5). A family's own weight shapes are in its ``families/`` module.
Each equals transformers' meta-device build (tests/test_weights.py).
"""

from __future__ import annotations

from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import GdnWeights, Mamba2Weights


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


def mamba2_weights(r: ConfigReader) -> Mamba2Weights:
    """A Mamba2 mixer (Nemotron-H, Falcon-H1, Zamba2 style keys)."""
    return Mamba2Weights(
        num_heads=r.int("mamba_num_heads", "num_heads"),
        head_dim=r.int("mamba_head_dim", "head_dim"),
        n_groups=r.int("n_groups", default=1),
        state_size=r.int("ssm_state_size"),
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
        # olmo_gdn_linear_attn.py builds A_log in the model dtype
        a_log_fp32=r.str("model_type", "") != "olmo_hybrid",
    )
