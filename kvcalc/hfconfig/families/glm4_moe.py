"""GLM-4.5 / GLM-4.6 / GLM-4.7 (``Glm4MoeForCausalLM``): full attention on every layer, MoE feed-forward.

vLLM 0.33 ``models/glm4_moe.py``: one attention layer per decoder layer, no window, heads
``config.head_dim`` wide (read as an attribute: a config without ``head_dim`` fails to build, as
transformers' ``Glm4MoeConfig`` sets none); the ``num_nextn_predict_layers`` MTP layers are not built
without speculative decoding, so they hold no cache.

GLM-4.5V (``glm4v_moe``: ``Glm4vMoeForConditionalGeneration``): ``glm4_1v.py`` builds its
``text_config`` as ``Glm4MoeForCausalLM``, the same cache; the vision tower holds none. Its
``text_config`` must say ``use_qk_norm`` (read as an attribute; transformers 5.20's
``Glm4vMoeTextConfig`` sets none, so its defaults fail to build, as they do without ``head_dim``).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import kv_heads
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def read_glm4_moe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, prov = ctx.num_layers, ctx.provenance
    if not r.has("head_dim"):
        raise ConfigError(
            f"{r.source}: no head_dim: vLLM 0.33 glm4_moe.py reads config.head_dim, and "
            "Glm4MoeConfig has no default (vLLM fails with AttributeError building the model)",
            hint="GLM-4.5 checkpoints set head_dim (128); add it to config.json",
            code="config-invalid",
        )
    if r.raw.get("model_type") == "glm4v_moe" and r.text.get("use_qk_norm") is None:
        raise ConfigError(
            f"{r.source}: no {r.prefix}use_qk_norm: vLLM 0.33 glm4_moe.py reads "
            "config.use_qk_norm, and transformers 5.20's Glm4vMoeTextConfig has no default (vLLM "
            "fails with AttributeError building the model)",
            hint="GLM-4.5V's config says use_qk_norm false (the older class default); add it",
            code="config-invalid",
        )
    width = r.int("head_dim")
    prov["head_dim"] = f"{r.path('head_dim')} = {width}"
    prov["layer pattern"] = "GLM-4.5: every layer full attention (MTP layers: no cache)"
    kv = kv_heads(r, ctx.num_attention_heads, n, prov)
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=k, k_dim=width, v_dim=width) for k in kv]
    )


FAMILIES = (
    Family(
        name="glm4-moe",
        model_types={"glm4_moe", "glm4v_moe"},
        architectures={"Glm4MoeForCausalLM", "Glm4vMoeForConditionalGeneration"},
        layouts=read_glm4_moe,
        note="full attention per layer, config.head_dim; MTP layers hold no cache",
    ),
)
