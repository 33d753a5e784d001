"""Bailing MoE V3 (``BailingMoeV3ForCausalLM``) and V2.5 (``BailingMoeV2_5ForCausalLM``), both
``bailing_hybrid``: vLLM 0.33 ``models/bailing_moe_v3.py`` and ``models/bailing_moe_linear.py`` over
transformers' ``BailingHybridConfig``, linear-attention (KDA; V2.5: lightning) and MLA layers.

V2.5 (:func:`read_bailing_moe_v2_5`): lightning linear attention where ``(i + 1) %
layer_group_size != 0`` (no trailing-layer rule), one ``(num_attention_heads/tp, head_dim,
head_dim)`` state in the model dtype; its gated group norm splits ``group_norm_size`` over TP.

The model file does not read ``layer_types``: layer ``i`` is MLA where ``(i + 1) %
layer_group_size == 0`` or ``i`` is past the last whole group (``i >= num_hidden_layers //
layer_group_size * layer_group_size``), KDA otherwise (``_is_kda_layer``; transformers' own
``layer_types`` leave the trailing layers linear). A KDA layer keeps the conv and float32 recurrent
states of ``num_attention_heads`` heads ``head_dim`` wide with ``short_conv_kernel_size``
(``kda_state_shape``; transformers' ``linear_num_heads`` / ``linear_head_dim`` are not read); an
MLA layer one latent of ``kv_lora_rank + qk_rope_head_dim`` (the model file's ``getattr``
defaults 512 and 64; ``qk_nope_head_dim`` 128, ``v_head_dim`` 128), whole on every TP rank
(``is_deepseek_mla`` lists ``bailing_hybrid``). vLLM builds the KDA layers only with
``no_kda_lora`` true (``ValueError`` otherwise, which the config class's defaults hit), and reads
``use_bias`` and ``moe_shared_expert_intermediate_size``, which the config class does not define
(``AttributeError``): configs without them are refused as vLLM refuses them.
Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import FP32
from kvcalc.model.layouts import Layout, MLALatent
from kvcalc.model.recurrent_layouts import KimiDeltaState


def is_kda_layer(i: int, group: int, n: int) -> bool:
    """``bailing_moe_v3.py`` ``_is_kda_layer``."""
    return not ((i + 1) % group == 0 or i >= n // group * group)


def read_bailing_moe_v3(
    r: ConfigReader, ctx: LayoutContext
) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    arch = r.raw.get("architectures")
    if isinstance(arch, list) and "BailingMoeV2_5ForCausalLM" in arch:
        return read_bailing_moe_v2_5(r, ctx)
    if r.value("no_kda_lora") is not True:
        raise ConfigError(
            f"{r.source}: no_kda_lora is not true: vLLM 0.33 bailing_moe_v3.py builds its KDA "
            "layers only without the KDA LoRA (ValueError: BailingMoeV3 KDA currently expects "
            "no_kda_lora=True)",
            code="config-invalid",
        )
    # read by the MLPs of every layer and the shared experts, which BailingHybridConfig does not
    # define: without them vLLM fails building the model (AttributeError)
    moe = r.value("num_experts") is not None and r.int("first_k_dense_replace", default=0) < n
    for key in ("use_bias", "moe_shared_expert_intermediate_size")[: 2 if moe else 1]:
        if r.value(key) is None:
            raise ConfigError(
                f"{r.source}: missing {key}, which vLLM 0.33 bailing_moe_v3.py reads and "
                "BailingHybridConfig does not define (vLLM fails building it: AttributeError)",
                hint=f"set {key} in config.json as the published checkpoints do",
                code="config-invalid",
            )
    group = r.int("layer_group_size")
    head_dim = r.int("head_dim")
    kernel = r.int("short_conv_kernel_size")
    mla = _mla(r, ctx)
    state = KimiDeltaState(dtype=ctx.dtype, ssm_dtype=FP32, conv_kernel=kernel, num_heads=heads,
                           head_dim=head_dim)  # fmt: skip
    kda = [is_kda_layer(i, group, n) for i in range(n)]
    prov["layer pattern"] = (
        f"layer_group_size {group}: every {group}th layer and those past the last whole group MLA "
        f"({kda.count(False)}), the other {kda.count(True)} KDA (bailing_moe_v3.py _is_kda_layer; "
        "layer_types is not read)"
    )
    prov["kda"] = (
        f"num_attention_heads {heads} × head_dim {head_dim}, short_conv_kernel_size {kernel}; "
        "recurrent state float32 (vLLM's auto for KDA), conv state the model dtype"
    )
    layouts: list[Layout] = [state if k else mla for k in kda]
    return layouts, (L.UNCOUNTED,) * n


def is_linear_layer(i: int, group: int) -> bool:
    """``bailing_moe_linear.py`` ``is_linear_layer``."""
    return group > 0 and (i + 1) % group != 0


def _mla(r: ConfigReader, ctx: LayoutContext) -> MLALatent:
    """The MLA layer both model files build (their ``getattr`` defaults 512, 64, 128, 128)."""
    rank = r.int("kv_lora_rank", default=512)
    rope = r.int("qk_rope_head_dim", default=64)
    nope = r.int("qk_nope_head_dim", default=128)
    v_dim = r.int("v_head_dim", default=128)
    ctx.provenance["mla"] = f"kv_lora_rank + qk_rope_head_dim = {rank} + {rope} = {rank + rope}"
    return MLALatent(dtype=ctx.dtype, kv_lora_rank=rank, rope_dim=rope,
                     num_heads=ctx.num_attention_heads, qk_nope_dim=nope, v_head_dim=v_dim)  # fmt: skip


def read_bailing_moe_v2_5(
    r: ConfigReader, ctx: LayoutContext
) -> tuple[list[Layout], tuple[str, ...]]:
    """Bailing MoE V2.5 (``BailingMoeV2_5ForCausalLM``, ``bailing_moe_linear.py``): lightning
    linear attention where ``is_linear_layer`` (``(i + 1) % layer_group_size != 0``), MLA on the
    others."""
    from kvcalc.model.linear_attention_state import LinearAttentionState

    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    group = r.int("layer_group_size", default=1, minimum=0)
    linear = [is_linear_layer(i, group) for i in range(n)]
    if any(linear):
        # the linear layers' projections read config.use_bias (and use_qkv_bias when it is false)
        # as attributes, which BailingHybridConfig does not define (AttributeError)
        keys = ("use_bias",) if r.value("use_bias") else ("use_bias", "use_qkv_bias")
        for key in keys:
            if r.value(key) is None:
                raise ConfigError(
                    f"{r.source}: missing {key}, which vLLM 0.33 bailing_linear_attn.py reads "
                    "and BailingHybridConfig does not define (vLLM fails building it: "
                    "AttributeError)",
                    hint=f"set {key} in config.json as the published checkpoints do",
                    code="config-invalid",
                )
    head_dim = r.int("head_dim", default=0) or ctx.hidden_size // heads
    groups = r.int("group_norm_size", default=1)
    state = LinearAttentionState(dtype=ctx.dtype, ssm_dtype=ctx.dtype, conv_kernel=1,
                                 num_heads=heads, head_dim=head_dim, group_norm_size=groups)  # fmt: skip
    mla = _mla(r, ctx)
    prov["layer pattern"] = (
        f"layer_group_size {group}: every {group}th layer MLA ({linear.count(False)}), the other "
        f"{linear.count(True)} lightning linear attention (bailing_moe_linear.py is_linear_layer)"
    )
    prov["linear attention"] = (
        f"num_attention_heads {heads} × head_dim {head_dim}: one (heads, head_dim, head_dim) "
        f"state in the model dtype; group_norm_size {groups} groups split over TP"
    )
    layouts: list[Layout] = [state if k else mla for k in linear]
    return layouts, (L.UNCOUNTED,) * n


FAMILIES = (
    Family(
        name="bailing-moe-v3",
        model_types={"bailing_hybrid"},
        architectures={"BailingMoeV3ForCausalLM", "BailingMoeV2_5ForCausalLM"},
        keys={
            "layer_types",  # transformers' pattern: bailing_moe_v3.py uses layer_group_size
            "layer_group_size",
            "kv_lora_rank",
            "q_lora_rank",  # the query's low-rank path: no cache
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "qk_head_dim",  # their sum (transformers' attribute)
            "v_head_dim",
            "short_conv_kernel_size",
            "linear_head_dim",  # transformers' KDA widths: bailing_moe_v3.py reads head_dim
            "linear_num_heads",  # and num_attention_heads instead
            "linear_conv_kernel_dim",  # and short_conv_kernel_size
            "mlp_layer_types",  # dense/sparse MLP per layer (weights)
            "no_kda_lora",  # must be true (read)
            "group_norm_size",  # V2.5's gated group norm: TP must divide it (read)
        },
        layer_types={"linear_attention", "full_attention"},
        layouts=read_bailing_moe_v3,
        note="Bailing MoE V3 / V2.5: KDA or lightning linear attention, and MLA layers, by "
        "layer_group_size (vLLM 0.33 bailing_moe_v3.py, bailing_moe_linear.py).",
    ),
)
