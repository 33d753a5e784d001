"""Pure Mamba models (``mamba.py`` and ``mamba2.py`` in vLLM 0.33.0): every layer one recurrent mixer,
no attention, no MLP (vLLM's ``IsAttentionFree``; no ``num_attention_heads``: vLLM's
``get_total_num_attention_heads`` is 0).

- Mamba (``MambaForCausalLM``) and FalconMamba (``FalconMambaForCausalLM``, the same model file):
  a Mamba1 mixer of ``intermediate_size`` channels (``mamba1_state_shape``: conv
  ``(conv_kernel − 1, I/tp)``, SSM ``(I/tp, state_size)``). transformers' ``MambaConfig`` and
  ``FalconMambaConfig`` set ``intermediate_size = expand · hidden_size`` and then let the
  config.json's own ``intermediate_size`` win (falcon-mamba-7b: ``expand`` 16 but
  ``intermediate_size`` 8,192, and vLLM builds 8,192 channels).
- Mamba2 (``Mamba2ForCausalLM``): ``mamba2_state_shape`` with ``expand · hidden_size`` channels
  (``get_mamba_state_shape_from_config`` reads no ``intermediate_size``), ``num_heads`` ×
  ``head_dim``, ``n_groups`` (one group is replicated up to the TP size), ``state_size``.

Both states are in the model dtype unless ``--mamba-ssm-cache-dtype`` / ``--mamba-cache-dtype`` say
otherwise (``_mamba_state_dtype``). The weight count counts the mixers (:func:`mamba1_weights`,
and :func:`mamba2_weights`, read here) and no feed-forward.
"""

from __future__ import annotations

import math

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import Mamba1Weights, Mamba2Weights
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import Layout
from kvcalc.model.recurrent_layouts import Mamba1State, Mamba2State

#: the pure Mamba model types (no attention, no MLP: the weight count's ``ffns`` are ``none``)
MAMBA_TYPES = frozenset({"mamba", "falcon_mamba", "mamba2"})


def mamba1_width(r: ConfigReader, hidden: int) -> tuple[int, str]:
    """The Mamba1 mixer's channels: config.json's ``intermediate_size``, else ``expand · hidden``."""
    inner = r.int("intermediate_size", default=None)
    if inner is not None:
        return inner, f"intermediate_size {inner}"
    expand = r.int("expand", default=2)
    return expand * hidden, f"expand {expand} × hidden_size {hidden} = {expand * hidden}"


def read_mamba1(
    r: ConfigReader, num_layers: int, hidden: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    inner, note = mamba1_width(r, hidden)
    state = r.int("state_size", default=16)
    kernel = r.int("conv_kernel", default=4)
    prov["mamba1"] = (
        f"{note} channels, state_size {state}, conv_kernel {kernel}; both states in the model "
        "dtype; every layer a Mamba1 mixer (attention-free)"
    )
    layer = Mamba1State(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel,
                        intermediate_size=inner, state_size=state)  # fmt: skip
    return [layer] * num_layers


def read_mamba2(
    r: ConfigReader, num_layers: int, hidden: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    expand = r.int("expand", default=2)
    inner = expand * hidden
    heads = r.int("num_heads", default=128)
    head_dim = r.int("head_dim", default=64)
    if heads * head_dim != inner:  # Mamba2Config.validate_architecture
        raise ConfigError(
            f"{r.source}: hidden_size × expand ({inner}) must equal num_heads × head_dim "
            f"({heads * head_dim}), as transformers' Mamba2Config requires",
            code="config-invalid",
        )
    if r.int("intermediate_size", default=inner) != inner:
        raise ConfigError(
            f"{r.source}: intermediate_size {r.int('intermediate_size')} is not expand × "
            f"hidden_size ({inner}): vLLM 0.33's mamba2.py builds the mixer with it but sizes the "
            "state with expand × hidden_size",
            hint="kvcalc refuses layouts it cannot size exactly; please file an issue",
            code="config-unsupported",
        )
    groups = r.int("n_groups", default=8)
    state = r.int("state_size", default=128)
    kernel = r.int("conv_kernel", default=4)
    prov["mamba2"] = (
        f"expand {expand} × hidden_size {hidden} = {inner} channels, num_heads {heads} × head_dim "
        f"{head_dim}, state_size {state}, n_groups {groups}, conv_kernel {kernel}; both states "
        "in the model dtype; every layer a Mamba2 mixer (attention-free)"
    )
    layer = Mamba2State(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel, intermediate_size=inner,
                        n_groups=groups, state_size=state, num_heads=heads, head_dim=head_dim)  # fmt: skip
    return [layer] * num_layers


def mamba1_weights(r: ConfigReader, hidden: int) -> Mamba1Weights:
    """transformers' MambaMixer / FalconMambaMixer: ``time_step_rank`` "auto" = ceil(hidden / 16),
    no dt/B/C norm weights (FalconMamba's are unweighted)."""
    rank = r.value("time_step_rank", "auto")
    return Mamba1Weights(
        inner=mamba1_width(r, hidden)[0],
        state_size=r.int("state_size", default=16),
        conv_kernel=r.int("conv_kernel", default=4),
        dt_rank=math.ceil(hidden / 16) if rank == "auto" else r.int("time_step_rank"),
        conv_bias=r.bool("use_conv_bias", True),
        proj_bias=r.bool("use_bias", False),
        dt_b_c_norms=False,
    )


def mamba2_weights(r: ConfigReader, hidden: int) -> Mamba2Weights:
    """transformers' Mamba2Mixer with Mamba2Config's defaults (128 heads of 64, 8 groups)."""
    return Mamba2Weights(
        num_heads=r.int("num_heads", default=128),
        head_dim=r.int("head_dim", default=64),
        n_groups=r.int("n_groups", default=8),
        state_size=r.int("state_size", default=128),
        conv_kernel=r.int("conv_kernel", default=4),
        conv_bias=r.bool("use_conv_bias", True),
        proj_bias=r.bool("use_bias", False),
        inner=r.int("expand", default=2) * hidden,
    )


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if r.str("model_type", "") == "mamba2":
        layouts = read_mamba2(r, ctx.num_layers, ctx.hidden_size, ctx.dtype, ctx.provenance)
    else:
        layouts = read_mamba1(r, ctx.num_layers, ctx.hidden_size, ctx.dtype, ctx.provenance)
    return hybrid_weight_kinds(layouts, {Mamba1State: L.MAMBA1, Mamba2State: L.MAMBA2})


#: the mixer keys MambaConfig / FalconMambaConfig / Mamba2Config carry: read above, or the
#: initialisation and kernel choices that shape no state
_KEYS = {
    "state_size",
    "conv_kernel",
    "expand",
    "use_conv_bias",
    "time_step_rank",  # x_proj / dt_proj width (weights)
    "time_step_scale",
    "time_step_min",
    "time_step_max",
    "time_step_init_scheme",
    "time_step_floor",
    "time_step_limit",  # initialisation and the dt clamp
    "use_mambapy",
    "use_falcon_mambapy",
    "use_associative_scan",  # transformers' slow-path kernels
}

FAMILIES = (
    Family(
        name="mamba",
        model_types={"mamba", "falcon_mamba"},
        architectures={"MambaForCausalLM", "FalconMambaForCausalLM"},
        keys=_KEYS,
        layer_types=frozenset(),
        layouts=_layouts,
        attention_free=True,
        note="Mamba / FalconMamba: a Mamba1 mixer in every layer, no attention.",
    ),
    Family(
        name="mamba2",
        model_types={"mamba2"},
        architectures={"Mamba2ForCausalLM"},
        keys={*_KEYS, "n_groups", "chunk_size"},  # chunk_size: the SSD scan's
        layer_types=frozenset(),
        layouts=_layouts,
        attention_free=True,
        note="Mamba2 (Codestral Mamba): a Mamba2 mixer in every layer, no attention.",
    ),
)
