"""What the MLA families whose sizing was recorded only at DeepSeek-V3's head shape share (openPangu
Ultra MoE, Sarvam-MLA): one latent of ``kv_lora_rank + qk_rope_head_dim`` per token and layer,
whole on every TP rank (the generic MLA reader), and a refusal of other MLA dimensions, which vLLM
0.33's MLA prefill backends take only in fixed sets (none for (128, 32, 128) on an H100)."""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import generic
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._remote import required
from kvcalc.hfconfig.family import LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout

#: the MLA dimensions recorded: qk_nope_head_dim, qk_rope_head_dim, v_head_dim
CHECKED_DIMS = (128, 64, 128)
MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def mla_every_layer(
    r: ConfigReader, ctx: LayoutContext, what: str, model_file: str
) -> tuple[list[Layout], tuple[str, ...]]:
    """MLA on every layer, its four keys read from config.json (none defaulted)."""
    for key in MLA_KEYS:
        required(r, key, model_file)
    dims = tuple(r.int(k, minimum=0) for k in MLA_KEYS[1:])
    if dims != CHECKED_DIMS:
        raise ConfigError(
            f"{r.source}: MLA dimensions (qk_nope_head_dim, qk_rope_head_dim, v_head_dim) "
            f"{dims}: vLLM 0.33's MLA prefill backends take fixed dimension sets; only "
            f"{CHECKED_DIMS} was recorded for {what}",
            code="config-unverified",
        )
    layouts = generic.read_layouts(r, ctx)
    ctx.provenance["layer pattern"] = f"{what}: MLA on every layer (vLLM 0.33 {model_file})"
    return layouts, (L.UNCOUNTED,) * ctx.num_layers
