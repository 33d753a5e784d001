"""What the Mamba hybrids read alike: Jamba (Mamba1), Bamba and Granite-4.0-H (Mamba2), Falcon-H1.

Which layer is which, and the state shapes, follow vLLM 0.33.0's model files and transformers'
config classes (each family's reader is in its own module, ``families/jamba.py``...):

- Jamba (``jamba.py``; ``JambaConfig.layers_block_type``): layer ``i`` is attention when
  ``i % attn_layer_period == attn_layer_offset``, else a Mamba1 mixer of width
  ``mamba_expand · hidden_size`` with ``mamba_d_state`` and ``mamba_d_conv``; attention heads are
  ``hidden_size // num_attention_heads`` wide;
- Bamba (``BambaConfig.layers_block_type``): attention at ``attn_layer_indices``, Mamba2 elsewhere;
- Granite-4.0-H (``granitemoehybrid.py``): ``layer_types`` of ``mamba``/``attention`` (or
  transformers' ``linear_attention``/``full_attention``), Mamba2 of width
  ``mamba_expand · hidden_size`` with ``mamba_n_heads`` × ``mamba_d_head``, ``mamba_n_groups``;
- Falcon-H1 (``falcon_h1.py``, ``FalconH1ParallelHybrid``): every layer runs attention *and* a
  Mamba2 mixer side by side (width ``mamba_d_ssm``, else ``mamba_expand · hidden_size``).

None of these has a config hook for the SSM dtype (unlike Nemotron-H): both states are in the model
dtype unless ``--mamba-ssm-cache-dtype`` says otherwise.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention
from kvcalc.model.recurrent_layouts import Mamba2State


def attention_layer(r: ConfigReader, heads: int, hidden: int, dtype: CacheDtype) -> FullAttention:
    """K/V heads as the model files build them: ``hidden_size // num_attention_heads`` wide."""
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads") or heads)
    if hidden <= 0 or hidden % heads:
        raise ConfigError(
            f"{r.source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}",
            code="config-invalid",
        )
    head_dim = hidden // heads
    return FullAttention(dtype=dtype, kv_heads=kv, k_dim=head_dim, v_dim=head_dim)


def mamba2_state(
    r: ConfigReader, hidden: int, dtype: CacheDtype, prov: dict[str, str]
) -> Mamba2State:
    """Bamba / Granite / Falcon-H1 Mamba2 keys (``mamba_n_heads``, ``mamba_d_head``, ...)."""
    inner = r.int("mamba_d_ssm", default=None)
    width_note = f"mamba_d_ssm {inner}"
    if inner is None:
        expand = r.int("mamba_expand", default=2)
        inner = expand * hidden
        width_note = f"mamba_expand {expand} × hidden_size {hidden} = {inner}"
    num_heads = r.int("mamba_n_heads", default=128)
    head_dim = r.value("mamba_d_head", "auto")
    if head_dim == "auto":
        head_dim = inner // num_heads
    else:
        head_dim = r.int("mamba_d_head")
    groups = r.int("mamba_n_groups", default=1)
    state = r.int("mamba_d_state", default=256)
    kernel = r.int("mamba_d_conv", default=4)
    prov["mamba2"] = (
        f"{width_note} channels, mamba_n_heads {num_heads} × mamba_d_head {head_dim}, "
        f"mamba_d_state {state}, mamba_n_groups {groups}, mamba_d_conv {kernel}; both states "
        "in the model dtype"
    )
    return Mamba2State(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel, intermediate_size=inner,
                       n_groups=groups, state_size=state, num_heads=num_heads, head_dim=head_dim)  # fmt: skip


#: the Mamba mixer keys the Mamba-hybrid families read or knowingly ignore: one list, so a new
#: Mamba key is accounted for in one place
MAMBA_MIXER_KEYS = frozenset(
    {
        "mamba_d_conv",
        "mamba_d_head",
        "mamba_d_ssm",
        "mamba_d_state",
        "mamba_expand",
        "mamba_n_groups",
        "mamba_n_heads",
        "mamba_dt_rank",
        "mamba_conv_bias",
        "mamba_proj_bias",
        "mamba_chunk_size",
        "use_mamba_kernels",
        "mamba_rms_norm",
        "mamba_use_mlp",
        "mamba_norm_before_gate",
        "time_step_min",
        "time_step_max",
        "time_step_floor",
        "time_step_limit",
        "mamba_dt_min",
        "mamba_dt_max",
        "mamba_dt_init_floor",
        "ssm_state_size",
        "conv_kernel",
        "expand",
        "chunk_size",
        "n_groups",
    }
)
