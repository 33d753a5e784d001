"""A.X K1 (``AXK1ForCausalLM``, ``axk1``): vLLM 0.33 ``models/AXK1.py`` over transformers'
``AXK1Config``, a DeepSeek-V3-shaped MoE with MLA on every layer.

vLLM's ``is_deepseek_mla`` lists ``axk1``, so each layer caches one latent of ``kv_lora_rank +
qk_rope_head_dim`` (``AXK1MLAAttention``), whole on every TP rank, as the DeepSeek-V3 family's.
``q_lora_rank``, ``qk_nope_head_dim`` and ``v_head_dim`` shape the weights. Where both
``qk_nope_head_dim`` and ``qk_rope_head_dim`` are 0 the model file builds plain multi-head attention
instead (``use_mha``), which was not recorded: refused, as are MLA dimensions other than the
config class's (128, 64, 128): vLLM's MLA prefill backends take fixed sets of them (an H100 has
none for (128, 32, 128): seen on the reference harness). MoE layers come from ``mlp_layer_types``
(weights).

Weights: the MLA of DeepSeek-V3's shape, dense MLPs and MoE layers as ``_get_mlp_layer_types``
picks them (:func:`axk1_moe_layers`: ``mlp_layer_types``, else ``first_k_dense_replace`` 1 and
``moe_layer_freq`` 1, AXK1Config's defaults), shared experts, an fp32 ``e_score_correction_bias``
(``topk_method`` ``noaux_tc``, the default), and three norms in every layer: vLLM's
``AXK1DecoderLayer`` builds ``post_mlp_layernorm`` in the dense layers too (transformers only in
the MoE blocks: kvcalc's count is one norm per dense layer above transformers', as vLLM loads it).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import generic
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout

#: the MLA dimensions recorded (AXK1Config's): qk_nope_head_dim, qk_rope_head_dim, v_head_dim
_CHECKED_DIMS = (128, 64, 128)


def axk1_moe_layers(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """AXK1.py ``_get_mlp_layer_types``: ``mlp_layer_types`` (cut to the layers), else sparse from
    ``first_k_dense_replace`` every ``moe_layer_freq``-th layer."""
    kinds = r.list("mlp_layer_types")
    if kinds is not None:
        if len(kinds) < n:
            raise r.bad(r.path("mlp_layer_types"), f"[{len(kinds)} entries]", f"{n} entries")
        return tuple(k == "sparse" for k in kinds[:n])
    first = r.int("first_k_dense_replace", default=1, minimum=0)
    freq = r.int("moe_layer_freq", default=1)
    return tuple(i >= first and i % freq == 0 for i in range(n))


def read_axk1(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if not r.has("kv_lora_rank"):
        raise r.missing(("kv_lora_rank",))
    nope = r.int("qk_nope_head_dim", default=128, minimum=0)
    rope = r.int("qk_rope_head_dim", default=64, minimum=0)
    v_dim = r.int("v_head_dim", default=128, minimum=0)
    if (nope, rope, v_dim) != _CHECKED_DIMS and (nope or rope):
        raise ConfigError(
            f"{r.source}: MLA dimensions (qk_nope_head_dim {nope}, qk_rope_head_dim {rope}, "
            f"v_head_dim {v_dim}): vLLM 0.33's MLA prefill backends take fixed dimension sets "
            "(none for (128, 32, 128) on an H100: ValueError, seen on the reference harness); "
            "only AXK1Config's (128, 64, 128) was checked",
            code="config-unverified",
        )
    if nope == 0 and rope == 0:
        raise ConfigError(
            f"{r.source}: qk_nope_head_dim and qk_rope_head_dim are 0: vLLM 0.33's AXK1.py then "
            "builds plain multi-head attention (use_mha), which kvcalc has not checked",
            code="config-unverified",
        )
    layouts = generic.read_layouts(r, ctx)
    ctx.provenance["layer pattern"] = "A.X K1: MLA on every layer (vLLM 0.33 AXK1.py)"
    return layouts, (L.FULL,) * ctx.num_layers


FAMILIES = (
    Family(
        name="axk1",
        model_types={"axk1"},
        architectures={"AXK1ForCausalLM"},
        keys={
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "qk_head_dim",  # AXK1Config's qk_nope_head_dim + qk_rope_head_dim: vLLM sums them itself
            "mlp_layer_types",  # dense/sparse MLP per layer (weights)
        },
        layouts=read_axk1,
        note="A.X K1: MLA latent kv_lora_rank + qk_rope_head_dim per layer (vLLM 0.33 AXK1.py).",
    ),
)
