"""openPangu Ultra MoE (``PanguUltraMoEForCausalLM``, ``pangu_ultra_moe``): vLLM 0.33
``models/openpangu.py``, a DeepSeek-V3-shaped MoE; its config class is the checkpoints' remote
code (``families/_remote.py``).

``OpenPanguDecoderLayer`` builds ``OpenPanguMLAAttention`` when the config has
``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim`` and ``kv_lora_rank``, and vLLM's
``is_deepseek_mla`` lists ``pangu_ultra_moe``: one latent of ``kv_lora_rank + qk_rope_head_dim`` per
token and layer, whole on every TP rank; TP must divide ``num_attention_heads``. Without those keys
it builds sink or plain attention (with ``interleaved_sliding_window``), which was not recorded:
refused, as are MLA dimensions other than (128, 64, 128). Weights are not counted from
config.json. (``PanguEmbeddedForCausalLM`` and ``PanguProMoEV2ForCausalLM`` share the model file;
their model types are not known here: not planned.)
"""

from __future__ import annotations

from kvcalc.hfconfig.families._mla_checked import mla_every_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_pangu_ultra_moe(
    r: ConfigReader, ctx: LayoutContext
) -> tuple[list[Layout], tuple[str, ...]]:
    return mla_every_layer(r, ctx, "openPangu Ultra MoE", "openpangu.py")


FAMILIES = (
    Family(
        name="pangu-ultra-moe",
        model_types={"pangu_ultra_moe"},
        architectures={"PanguUltraMoEForCausalLM"},
        keys={
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
        },
        layouts=read_pangu_ultra_moe,
        note="openPangu Ultra MoE: MLA latent kv_lora_rank + qk_rope_head_dim per layer (vLLM "
        "0.33 openpangu.py).",
    ),
)
