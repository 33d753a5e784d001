"""Sarvam-MLA (``SarvamMLAForCausalLM``, ``sarvam_mla``): vLLM 0.33 ``models/sarvam.py``, a MoE with
MLA on every layer; its config class is the checkpoints' remote code (``families/_remote.py``).

``SarvamMLAAttention`` reads ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim`` and
``kv_lora_rank`` as attributes (config.json must carry them) and builds vLLM's MLA wrapper: one
latent of ``kv_lora_rank + qk_rope_head_dim`` per token and layer, whole on every TP rank (recorded,
though ``is_deepseek_mla`` does not list ``sarvam_mla``); MLA dimensions other than (128, 64, 128)
are refused. Weights are not counted from config.json. (``SarvamMoEForCausalLM`` is Bailing MoE's
class; its model type is not known here: not planned.)
"""

from __future__ import annotations

from kvcalc.hfconfig.families._mla_checked import mla_every_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_sarvam_mla(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return mla_every_layer(r, ctx, "Sarvam-MLA", "sarvam.py")


FAMILIES = (
    Family(
        name="sarvam-mla",
        model_types={"sarvam_mla"},
        architectures={"SarvamMLAForCausalLM"},
        keys={
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
        },
        layouts=read_sarvam_mla,
        note="Sarvam-MLA: MLA latent kv_lora_rank + qk_rope_head_dim per layer (vLLM 0.33 "
        "sarvam.py).",
    ),
)
