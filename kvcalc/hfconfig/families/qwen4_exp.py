"""Qwen4-Exp's text model (``Qwen4ExpForCausalLM``, ``qwen4_exp_text``): vLLM 0.33
``models/qwen4_exp/`` over transformers' ``Qwen4ExpTextConfig``, a Qwen3-Next-style hybrid.

``layer_types`` names each layer: ``linear_attention`` is Qwen3-Next's Gated DeltaNet (its conv and
recurrent states over the flat ``linear_*`` keys, the recurrent one in ``mamba_ssm_dtype`` where
the config names one: vLLM's Qwen3.5 config hook, which Qwen4-Exp's subclasses), and
``indexed_attention`` (``qwen_sparse_attention`` before transformers 5.18) is Qwen3-Next's gated
full attention, ``num_key_value_heads`` × ``head_dim`` (the config class's 2 and 256 where
config.json omits them), while ``indexer_n_heads`` is null
(recorded); with an indexer it is the QSA sparse attention, not recorded: refused. PLE layers
(``ple_layer_ids``: short-convolution states) were not recorded either: refused. vLLM asserts an
``output_gate_type`` of silu, swish or sigmoid (the config class's default None fails, recorded)
and refuses ``hc_count`` 1 or less; the hyper-connections, N-gram embeddings and MoE shape no
cache. Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import generic
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.family import TRUST_HINT, Family, LayoutContext, UnverifiedConfigError
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout

#: ``models/qwen4_exp/nvidia/model.py`` ``_QSA_LAYER_TYPES``
_ATTENTION = ("indexed_attention", "qwen_sparse_attention")
#: the output gates ``Qwen3NextAttention``... asserts (``output_gate_type``)
_GATES = ("silu", "swish", "sigmoid")


def _refuse(r: ConfigReader, what: str, key: str) -> UnverifiedConfigError:
    return UnverifiedConfigError(
        f"{r.source}: Qwen4-Exp with {what} was not checked against vLLM 0.33 (recorded: Gated "
        "DeltaNet and full attention layers, no indexer, no PLE layers)",
        model_type="qwen4_exp_text",
        architectures=("Qwen4ExpForCausalLM",),
        keys=(key,),
        hint=TRUST_HINT,
    )


def read_qwen4_exp(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, prov = ctx.num_layers, ctx.provenance
    gate = r.value("output_gate_type")
    if gate not in _GATES:
        raise ConfigError(
            f"{r.source}: output_gate_type {gate!r}: vLLM 0.33's Qwen4-Exp attention asserts one "
            f"of {', '.join(_GATES)} (AssertionError: unsupported output_gate_type)",
            hint="set output_gate_type as the checkpoint does",
            code="config-invalid",
        )
    if r.int("hc_count", default=4) <= 1:
        raise ConfigError(f"{r.source}: hc_count must be > 1: vLLM 0.33 refuses Qwen4-Exp without "
                          "hyper-connections (ValueError)", code="config-invalid")  # fmt: skip
    if r.value("indexer_n_heads") is not None:
        raise _refuse(r, "an indexer (indexer_n_heads: QSA sparse attention)", "indexer_n_heads")
    if r.list("ple_layer_ids"):
        raise _refuse(r, "PLE layers (ple_layer_ids: short-convolution states)", "ple_layer_ids")
    types = r.list("layer_types")
    if types is None:
        raise r.missing(("layer_types",))
    unknown = sorted({str(t)[:40] for t in types} - {"linear_attention", *_ATTENTION})
    if len(types) != n or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {n} layers as linear_attention or "
            "indexed_attention" + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    # Qwen4ExpTextConfig's defaults where config.json omits them (not hidden / heads, nor MHA)
    kv = r.int("num_key_value_heads", default=class_default(r, "num_key_value_heads"), minimum=1)
    width = r.int("head_dim", default=class_default(r, "head_dim"), minimum=1)
    prov["num_kv_heads"] = f"num_key_value_heads = {kv} (Qwen4ExpTextConfig's default where absent)"
    prov["head_dim"] = f"head_dim = {width} (Qwen4ExpTextConfig's default where absent)"
    gdn = generic.gated_deltanet(r, ctx.dtype, prov)
    prov["layer pattern"] = (
        "layer_types: linear_attention → Gated DeltaNet, indexed_attention → full attention "
        "(no indexer: vLLM 0.33 models/qwen4_exp builds Qwen3NextAttention)"
    )
    layouts: list[Layout] = [
        gdn
        if t == "linear_attention"
        else FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)
        for t in types
    ]
    return layouts, (L.UNCOUNTED,) * n


FAMILIES = (
    Family(
        name="qwen4-exp",
        model_types={"qwen4_exp_text"},
        architectures={"Qwen4ExpForCausalLM"},
        keys={
            "layer_types", "linear_num_key_heads", "linear_num_value_heads",
            "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
            "mamba_ssm_dtype",
            # the QSA indexer: refused when indexer_n_heads is set (the others follow it)
            "indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget",
            "indexer_compress_ratio",
            # PLE layers: refused when ple_layer_ids lists any; its short convolution's kernel
            # and state count are unread without them
            "ple_layer_ids", "ple_conv_kernel_size", "number_of_conv_states",
        },
        layer_types={"linear_attention", *_ATTENTION},
        layouts=read_qwen4_exp,
        note="Qwen4-Exp (text): Gated DeltaNet + gated full attention per layer_types "
        "(vLLM 0.33 models/qwen4_exp); indexer and PLE layers refused",
    ),
)  # fmt: skip
