"""GLM-4.7-Flash (``Glm4MoeLiteForCausalLM``): MLA, one latent per layer, as DeepSeek-V2/V3.

vLLM 0.33 ``models/glm4_moe_lite.py`` builds DeepSeek-V2's MLA attention (``use_mla``: vLLM's
``model_arch_config_convertor.py`` counts ``glm4_moe_lite`` among the MLA model types): a latent
``kv_lora_rank + qk_rope_head_dim`` wide per layer, no window. Its decoder layers read
``config.first_k_dense_replace``, which transformers' ``Glm4MoeLiteConfig`` does not define (it
writes ``mlp_layer_types``): a config without it fails to build (``AttributeError``), and is refused
here. ``mlp_layer_types`` picks the dense and the MoE layers of transformers' build (weights);
shared experts ``n_shared_experts × moe_intermediate_size``.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import read_layouts
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_glm4_moe_lite(r: ConfigReader, ctx: LayoutContext) -> list[Layout]:
    if not r.has("first_k_dense_replace"):
        raise ConfigError(
            f"{r.source}: no first_k_dense_replace, which vLLM 0.33's glm4_moe_lite.py reads "
            "(Glm4MoeLiteConfig does not define it): vLLM fails to build the model",
            hint="GLM-4.7-Flash checkpoints set first_k_dense_replace (1); add it to config.json",
            code="config-invalid",
        )
    return read_layouts(r, ctx)


FAMILIES = (
    Family(
        name="glm4_moe_lite",
        model_types={"glm4_moe_lite"},
        architectures={"Glm4MoeLiteForCausalLM"},
        keys={
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            # the MLP of each layer (dense or MoE): weights, not the cache
            "mlp_layer_types",
            # qk_nope_head_dim + qk_rope_head_dim, which Glm4MoeLiteConfig writes: the query
            # width, not the latent
            "qk_head_dim",
        },
        layouts=read_glm4_moe_lite,
        note="GLM-4.7-Flash: MLA latent kv_lora_rank + qk_rope_head_dim per layer",
    ),
)
