"""Zamba2 (``zamba2.py`` in vLLM 0.33.0): a Mamba2 mixer in every layer; the ``hybrid`` layers of
``layers_block_type`` also run one of ``num_mem_blocks`` shared transformer blocks first, whose
weights are shared but whose KV cache is each hybrid layer's own (one ``Attention`` per hybrid
layer). So a hybrid layer is attention *and* Mamba2 side by side (as Falcon-H1's), the others
Mamba2 alone.

- attention: ``num_attention_heads`` heads, K/V heads as many (``QKVParallelLinear`` without a KV-head
  count), ``attention_head_dim`` wide (transformers' ``Zamba2Config``: ``2 · hidden_size /
  num_attention_heads``, the shared block reads the concatenation of two hidden states);
- Mamba2 (``get_mamba_state_shape_from_config``): ``mamba_expand · hidden_size`` channels,
  ``n_mamba_heads`` × ``mamba_headdim`` (the config class: ``mamba_expand · hidden_size //
  n_mamba_heads``), ``mamba_ngroups``, ``mamba_d_state``, ``mamba_d_conv``.

``layers_block_type`` values: ``hybrid``, and ``mamba`` (``linear_attention`` in transformers 5's
spelling); without it the config class's 54-layer pattern. Both states are in the model dtype
unless ``--mamba-ssm-cache-dtype`` says otherwise.

Weights (:func:`zamba2_weights`, :func:`zamba2_mamba2`): every layer's Mamba2 mixer
(``MambaMixer2``: inner ``mamba_expand · hidden_size``, ``n_mamba_heads``, biases
``add_bias_linear``) and one norm; the hybrid layers' projection and LoRA adapters
(``adapter_rank``; q/k/v ones with ``use_shared_attention_adapter``) and the ``num_mem_blocks``
shared blocks counted once each. With ``use_mem_rope`` (a RoPE cache) they are refused.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import Mamba2Weights, Zamba2Weights
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout
from kvcalc.model.recurrent_layouts import Mamba2State, ParallelHybrid

_KINDS = {"hybrid": "hybrid", "mamba": "mamba", "linear_attention": "mamba"}


def default_block_types() -> list[str]:
    """``Zamba2Config``'s pattern when ``layers_block_type`` is unset (54 entries)."""
    return (
        ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"]
        + ["mamba"] * 3 + ["hybrid"] + ["mamba"] * 2
    )  # fmt: skip


def read_zamba2(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    # transformers' attribute_map makes layer_types another name for layers_block_type
    layer_types = r.has("layer_types") and not r.has("layers_block_type")
    note = "layer_types" if layer_types else "layers_block_type"
    types = r.list(note)
    if types is None:
        types, note = default_block_types(), "Zamba2Config's default layers_block_type"
    unknown = sorted({str(t)[:40] for t in types if t not in _KINDS})
    if len(types) != num_layers or unknown:
        raise ConfigError(
            f"{r.source}: layers_block_type must name {num_layers} layers as mamba or hybrid"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    hybrid = [i for i, t in enumerate(types) if _KINDS[t] == "hybrid"]
    listed = r.index_list("hybrid_layer_ids")
    if listed is not None and list(listed) != hybrid:
        raise ConfigError(
            f"{r.source}: hybrid_layer_ids {list(listed)} are not the hybrid layers of "
            f"layers_block_type {hybrid}: vLLM 0.33's zamba2.py maps one onto the other",
            code="config-invalid",
        )
    if hidden <= 0:
        raise r.missing(("hidden_size",))
    head_dim = r.int("attention_head_dim", default=None)
    if head_dim is None:
        if (2 * hidden) % heads:
            raise ConfigError(
                f"{r.source}: 2 × hidden_size {hidden} is not a multiple of num_attention_heads "
                f"{heads}", code="config-invalid",
            )  # fmt: skip
        head_dim = 2 * hidden // heads
    attention_width = r.int("attention_hidden_size", default=2 * hidden)
    if head_dim * heads != attention_width:  # Zamba2Attention's own check
        raise ConfigError(
            f"{r.source}: attention_head_dim {head_dim} × num_attention_heads {heads} is not "
            f"attention_hidden_size {attention_width}, which vLLM 0.33's zamba2.py refuses",
            code="config-invalid",
        )
    expand = r.int("mamba_expand", default=2)
    inner = expand * hidden
    num_heads = r.int("n_mamba_heads", default=8)
    mamba_head_dim = r.int("mamba_headdim", default=inner // num_heads)
    groups = r.int("mamba_ngroups", default=1)
    state = r.int("mamba_d_state", default=64)
    kernel = r.int("mamba_d_conv", default=4)
    mamba = Mamba2State(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel, intermediate_size=inner,
                        n_groups=groups, state_size=state, num_heads=num_heads,
                        head_dim=mamba_head_dim)  # fmt: skip
    if r.int("num_key_value_heads", default=heads) != heads:
        raise ConfigError(
            f"{r.source}: num_key_value_heads {r.int('num_key_value_heads')} is not "
            f"num_attention_heads {heads}: vLLM 0.33's zamba2.py builds every head's K/V but "
            "checks the KV heads against the TP size",
            hint="kvcalc refuses layouts it cannot size exactly; please file an issue",
            code="config-unsupported",
        )
    attention = FullAttention(dtype=dtype, kv_heads=heads, k_dim=head_dim, v_dim=head_dim)
    prov["layer pattern"] = (
        f"{note}: {len(hybrid)} hybrid layers (attention of a shared block and Mamba2), "
        f"{num_layers - len(hybrid)} Mamba2 alone"
    )
    prov["attention"] = (
        f"{heads} heads and KV heads of attention_head_dim {head_dim} (2 × hidden_size / "
        "num_attention_heads), a cache per hybrid layer"
    )
    prov["mamba2"] = (
        f"mamba_expand {expand} × hidden_size {hidden} = {inner} channels, n_mamba_heads "
        f"{num_heads} × mamba_headdim {mamba_head_dim}, mamba_d_state {state}, mamba_ngroups "
        f"{groups}, mamba_d_conv {kernel}; both states in the model dtype"
    )
    both = ParallelHybrid(dtype=dtype, attention=attention, mixer=mamba)
    return [both if i in hybrid else mamba for i in range(num_layers)]


def zamba2_mamba2(r: ConfigReader, hidden: int) -> Mamba2Weights:
    """The Mamba2 mixer vLLM builds (``Zamba2MambaDecoderLayer``)."""
    inner = r.int("mamba_expand", default=2) * hidden
    heads = r.int("n_mamba_heads", default=8)
    return Mamba2Weights(
        num_heads=heads,
        head_dim=inner // heads,
        n_groups=r.int("mamba_ngroups", default=1),
        state_size=r.int("mamba_d_state", default=64),
        conv_kernel=r.int("mamba_d_conv", default=4),
        conv_bias=r.bool("use_conv_bias", True),
        proj_bias=r.bool("add_bias_linear"),
        inner=inner,
    )


def zamba2_weights(r: ConfigReader, kinds: tuple[str, ...], hidden: int) -> Zamba2Weights:
    """The shared blocks and the hybrid layers' projections and adapters."""
    if r.bool("use_mem_rope"):
        raise ConfigError(
            f"{r.source}: Zamba2 with use_mem_rope: its weights are not counted from config.json",
            hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
        )
    return Zamba2Weights(
        hybrid_layers=tuple(i for i, k in enumerate(kinds) if k == L.ZAMBA2_HYBRID),
        mem_blocks=r.int("num_mem_blocks", default=1),
        num_heads=r.int("num_attention_heads"),
        width=r.int("attention_hidden_size", default=2 * hidden),
        intermediate_size=r.int("intermediate_size", default=4 * hidden),
        adapter_rank=r.int("adapter_rank", default=128),
        attention_adapters=r.bool("use_shared_attention_adapter"),
        bias=r.bool("add_bias_linear"),
    )


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_zamba2(
        r, ctx.num_layers, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance
    )
    return hybrid_weight_kinds(layouts, {ParallelHybrid: L.ZAMBA2_HYBRID, Mamba2State: L.MAMBA2})


FAMILIES = (
    Family(
        name="zamba2",
        model_types={"zamba2"},
        architectures={"Zamba2ForCausalLM"},
        keys={
            "layers_block_type",
            "layer_types",  # the config class's alias of layers_block_type
            "hybrid_layer_ids",
            "attention_head_dim",
            "attention_hidden_size",
            "kv_channels",  # hidden_size / heads: the config class's, read by no vLLM code
            "num_query_groups",  # = num_attention_heads in the config class; vLLM reads neither
            "mamba_expand",
            "n_mamba_heads",
            "mamba_headdim",
            "mamba_ngroups",
            "mamba_d_state",
            "mamba_d_conv",
            "use_mamba_kernels",
            "use_conv_bias",
            "chunk_size",  # the SSD scan's chunk
            "time_step_min",
            "time_step_max",
            "time_step_floor",
            "time_step_limit",  # initialisation and the dt clamp
            "use_mem_eff_path",
            "num_mem_blocks",  # weights: shared blocks, their adapters
            "adapter_rank",
            "use_shared_attention_adapter",
            "use_mem_rope",
            "add_bias_linear",
        },
        layer_types=frozenset(),
        layouts=_layouts,
        note="Zamba2: Mamba2 in every layer, shared-block attention beside it in hybrid layers.",
    ),
)
