"""K-EXAONE (``ExaoneMoeForCausalLM``): sliding and full attention layers of one shape, MoE MLPs.

vLLM 0.33 ``models/exaone_moe.py`` reads ``config.layer_types`` (a layer slides where it says
``sliding_attention``, over ``config.sliding_window``; a per-layer ``sliding_windows`` list, which
newer checkpoints carry, is not read here: refused), heads ``head_dim`` wide, else ``hidden_size /
num_attention_heads``; transformers' ``ExaoneMoeConfig`` writes ``layer_types`` (from
``sliding_window_pattern``), and a config without it is refused here (not recorded).
``mlp_layer_types`` picks the dense and the MoE layers (weights): ``num_experts`` routed experts
``moe_intermediate_size`` wide, ``num_shared_experts`` shared ones, per-head q/k RMSNorm.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.families.exaone4 import read_exaone4
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_exaone_moe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if r.list("layer_types") is None:
        raise ConfigError(
            f"{r.source}: K-EXAONE without layer_types was not checked against vLLM 0.33",
            hint="ExaoneMoeConfig writes layer_types; add it to config.json",
            code="config-unverified",
        )
    return read_exaone4(r, ctx)


FAMILIES = (
    Family(
        name="exaone_moe",
        model_types={"exaone_moe"},
        # registry.py maps both spellings to exaone_moe.py's ExaoneMoeForCausalLM
        architectures={"ExaoneMoeForCausalLM", "ExaoneMoEForCausalLM"},
        # sliding_window_pattern: what transformers built layer_types from (read: layer_types);
        # mlp_layer_types: the MLP of each layer (weights)
        keys={"sliding_window", "sliding_window_pattern", "layer_types", "mlp_layer_types"},
        layer_types={"sliding_attention", "full_attention"},
        layouts=read_exaone_moe,
        note="K-EXAONE: layer_types sliding/full, one KV shape (vLLM 0.33 exaone_moe.py)",
    ),
)
