"""Readers of the Mamba hybrids: Jamba (Mamba1), Bamba and Granite-4.0-H (Mamba2), Falcon-H1.

Which layer is which, and the state shapes, follow vLLM 0.33.0's model files and transformers'
config classes:

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
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout
from kvcalc.model.recurrent_layouts import Mamba1State, Mamba2State, ParallelHybrid

JAMBA_TYPES = ("jamba",)
BAMBA_TYPES = ("bamba",)
GRANITE_HYBRID_TYPES = ("granitemoehybrid",)
FALCON_H1_TYPES = ("falcon_h1",)

_GRANITE_KINDS = {"mamba": "mamba", "linear_attention": "mamba",
                  "attention": "attention", "full_attention": "attention"}  # fmt: skip


def _attention(r: ConfigReader, heads: int, hidden: int, dtype: CacheDtype) -> FullAttention:
    """K/V heads as the model files build them: ``hidden_size // num_attention_heads`` wide."""
    kv = r.int("num_key_value_heads", default=heads)
    if hidden <= 0 or hidden % heads:
        raise ConfigError(
            f"{r.source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}",
            code="config-invalid",
        )
    head_dim = hidden // heads
    return FullAttention(dtype=dtype, kv_heads=kv, k_dim=head_dim, v_dim=head_dim)


def read_jamba(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    period = r.int("attn_layer_period", default=8)
    offset = r.int("attn_layer_offset", default=4, minimum=0)
    if offset >= period:
        raise ConfigError(
            f"{r.source}: attn_layer_offset {offset} must be below attn_layer_period {period}",
            code="config-invalid",
        )
    expand = r.int("mamba_expand", default=2)
    state = r.int("mamba_d_state", default=16)
    kernel = r.int("mamba_d_conv", default=4)
    attention = _attention(r, heads, hidden, dtype)
    mamba = Mamba1State(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel,
                        intermediate_size=expand * hidden, state_size=state)  # fmt: skip
    prov["layer pattern"] = (
        f"attn_layer_period {period}, attn_layer_offset {offset}: layer i is attention when "
        f"i % {period} == {offset}, else Mamba1"
    )
    prov["mamba1"] = (
        f"mamba_expand {expand} × hidden_size {hidden} = {expand * hidden} channels, mamba_d_state "
        f"{state}, mamba_d_conv {kernel}; both states in the model dtype"
    )
    return [attention if i % period == offset else mamba for i in range(num_layers)]


def _mamba2(r: ConfigReader, hidden: int, dtype: CacheDtype, prov: dict[str, str]) -> Mamba2State:
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


def read_bamba(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    indices = r.index_list("attn_layer_indices") or ()
    if any(i >= num_layers for i in indices):
        raise ConfigError(
            f"{r.source}: attn_layer_indices names a layer beyond num_hidden_layers {num_layers}",
            code="config-invalid",
        )
    attention = _attention(r, heads, hidden, dtype)
    mamba = _mamba2(r, hidden, dtype, prov)
    prov["layer pattern"] = f"attn_layer_indices {list(indices)}: attention there, Mamba2 elsewhere"
    return [attention if i in indices else mamba for i in range(num_layers)]


def read_granite_hybrid(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    key = "layer_types" if r.has("layer_types") or not r.has("layers_block_type") else None
    # transformers' attribute_map makes layers_block_type another name for layer_types
    types = r.list(key or "layers_block_type")
    if types is None:
        types = ["mamba"] * num_layers  # transformers' default: every layer a Mamba2 mixer
    unknown = sorted({str(t)[:40] for t in types if t not in _GRANITE_KINDS})
    if len(types) != num_layers or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {num_layers} layers as mamba or attention"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    kinds = [_GRANITE_KINDS[t] for t in types]
    attention = _attention(r, heads, hidden, dtype) if "attention" in kinds else None
    mamba = _mamba2(r, hidden, dtype, prov) if "mamba" in kinds else None
    prov["layer pattern"] = (
        f"{key or 'layers_block_type'}: mamba → Mamba2, attention → full attention"
    )
    return [attention if k == "attention" else mamba for k in kinds]  # type: ignore[misc]


def read_falcon_h1(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    if r.value("attn_layer_indices") is not None:
        raise ConfigError(
            f"{r.source}: attn_layer_indices on Falcon-H1 is not supported: vLLM 0.33 builds "
            "attention and Mamba2 in every layer and does not read it",
            hint="kvcalc refuses layouts it cannot size exactly; please file an issue",
            code="config-unsupported",
        )
    kv = r.int("num_key_value_heads", default=heads)
    head_dim = r.int("head_dim", default=None)
    if head_dim is None:
        head_dim = _attention(r, heads, hidden, dtype).k_dim
    attention = FullAttention(dtype=dtype, kv_heads=kv, k_dim=head_dim, v_dim=head_dim)
    mamba = _mamba2(r, hidden, dtype, prov)
    prov["layer pattern"] = "Falcon-H1: attention and Mamba2 side by side in every layer"
    return [ParallelHybrid(dtype=dtype, attention=attention, mixer=mamba)] * num_layers
