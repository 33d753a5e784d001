"""OLMo-Hybrid (``olmo_hybrid.py`` in vLLM 0.33.0): ``layer_types`` of ``linear_attention`` (a Gated
DeltaNet, ``olmo_gdn_linear_attn.py``) and ``full_attention``; transformers' ``OlmoHybridConfig``
writes every 4th layer full when unset and fills the DeltaNet heads from the attention heads
(``linear_key_head_dim`` = 0.75 · hidden / key heads, values twice as wide).

- attention: heads ``hidden_size / num_attention_heads`` wide (``head_dim`` is not read),
  ``num_key_value_heads`` KV heads;
- Gated DeltaNet (``gated_delta_net_state_shape``): conv ``(k − 1, (2·Hk·Dk + Hv·Dv)/tp)``, state
  ``(Hv/tp, Dv, Dk)``, both in the model dtype (``gated_delta_net_state_dtype``; no config hook).
  Unlike Qwen3-Next's layer it exports no prefill checkpoints, so align mode holds 2 blocks per
  request without the 64-token alignment.

Weights: the DeltaNet as Qwen3-Next's (:func:`kvcalc.hfconfig.weights_mixers.gdn_weights`: q, k,
v, the output gate g, a and b, the conv, ``dt_bias``, fp32 ``A_log``, the one-head output norm,
o_proj; vLLM fuses q, k, v and g into ``in_proj_qkvg``), the attention layers' q/k norms over all
heads (OLMo-2's), dense MLPs and two norms per layer.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout
from kvcalc.model.recurrent_layouts import GatedDeltaNetState

_TYPES = ("linear_attention", "full_attention")


def read_olmo_hybrid(r: ConfigReader, ctx: LayoutContext) -> list[Layout]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    types = r.list("layer_types")
    note = "layer_types"
    if types is None:
        types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        if "full_attention" not in types:
            types[-1] = "full_attention"
        note = "OlmoHybridConfig's layer_types (every 4th layer full)"
    unknown = sorted({str(t)[:40] for t in types if t not in _TYPES})
    if len(types) != n or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {n} layers as linear_attention or full_attention"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    width = split_head_width(r, ctx, "olmo_hybrid.py")
    kv = r.int("num_key_value_heads", default=heads)
    attention = FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)
    k_heads = r.int("linear_num_key_heads", default=heads)
    v_heads = r.int("linear_num_value_heads", default=heads)
    k_dim = r.int("linear_key_head_dim", default=int(0.75 * ctx.hidden_size / k_heads))
    v_dim = r.int("linear_value_head_dim", default=2 * k_dim)
    kernel = r.int("linear_conv_kernel_dim", default=4)
    gdn = GatedDeltaNetState(dtype=ctx.dtype, ssm_dtype=ctx.dtype, conv_kernel=kernel,
                             num_k_heads=k_heads, num_v_heads=v_heads, head_k_dim=k_dim,
                             head_v_dim=v_dim, prefill_checkpoints=False)  # fmt: skip
    prov["layer pattern"] = f"{note}: linear_attention → Gated DeltaNet, full_attention → attention"
    prov["gated_deltanet"] = (
        f"linear_num_key_heads {k_heads}, linear_num_value_heads {v_heads}, key/value head dims "
        f"{k_dim}/{v_dim}, linear_conv_kernel_dim {kernel}; both states in the model dtype; no "
        "prefill checkpoints (olmo_gdn_linear_attn.py)"
    )
    return [gdn if t == "linear_attention" else attention for t in types]


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return hybrid_weight_kinds(read_olmo_hybrid(r, ctx), {GatedDeltaNetState: L.GDN})


FAMILIES = (
    Family(
        name="olmo-hybrid",
        model_types={"olmo_hybrid"},
        architectures={"OlmoHybridForCausalLM"},
        keys={
            "layer_types",
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel_dim",
            "linear_a_log_min",
            "linear_a_log_max",
            "linear_dt_min",
            "linear_dt_max",
            "linear_dt_init_floor",  # initialisation ranges
            "linear_allow_neg_eigval",  # the recurrence's eigenvalue range, not its shape
            "linear_use_gate",  # must be true (olmo_gdn_linear_attn.py asserts it)
        },
        layer_types=set(_TYPES),
        layouts=_layouts,
        note="OLMo-Hybrid: Gated DeltaNet and full attention per layer_types.",
    ),
)
