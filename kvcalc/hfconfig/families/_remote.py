"""What the families whose config class is the checkpoint's remote code share (InternLM2, InternLM3,
MiniCPM, EXAONE 3, Solar, Orion, DeepSeek V1, Bailing MoE): their ``config.json`` names its class
in ``auto_map`` (``trust_remote_code``), which neither transformers 5.20 nor vLLM 0.33's config
registry has. They were recorded with the vLLM reference harness over a stand-in class that
stores the config's keys and nothing else (``scripts/vllm_remote_configs.py``), so a key the model
file needs is read from ``config.json`` alone: where the published class would fill in a default,
kvcalc does not know it and refuses the config instead of guessing."""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def required(r: ConfigReader, key: str, model_file: str) -> int:
    """``key``, which ``model_file`` reads from the config and config.json must carry."""
    if r.value(key) is None:
        raise ConfigError(
            f"{r.source}: missing {key}, which vLLM 0.33 {model_file} reads; the checkpoint's "
            "remote config class fills in its own default, which kvcalc does not know",
            hint=f"set {key} in config.json as the published checkpoints do",
            code="config-missing-key",
        )
    return r.int(key)


def head_width(r: ConfigReader, ctx: LayoutContext, model_file: str) -> int:
    """``head_dim``, which the config must carry; 0 (or null) means ``hidden_size //
    num_attention_heads``, as ``model_file`` derives it."""
    heads, hidden = ctx.num_attention_heads, ctx.hidden_size
    if "head_dim" not in r.raw:
        required(r, "head_dim", model_file)
    width = r.int("head_dim", default=0, minimum=0)
    if width:
        ctx.provenance["head_dim"] = f"head_dim = {width}"
        return width
    if hidden <= 0 or hidden % heads:
        raise r.missing(("head_dim", "hidden_size"))
    width = hidden // heads
    ctx.provenance["head_dim"] = (
        f"head_dim {r.raw['head_dim']}: hidden_size // num_attention_heads = {hidden} // "
        f"{heads} = {width} ({model_file})"
    )
    return width


def full_uncounted(
    ctx: LayoutContext, kv: int, width: int, pattern: str
) -> tuple[list[Layout], tuple[str, ...]]:
    """Every layer one full-attention cache of ``kv`` heads ``width`` wide; weights not counted."""
    ctx.provenance["num_kv_heads"] = f"num_key_value_heads = {kv} on every layer"
    ctx.provenance["layer pattern"] = pattern
    layer = FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)
    return [layer] * ctx.num_layers, (L.UNCOUNTED,) * ctx.num_layers
