"""Nemotron (``NemotronForCausalLM``: Nemotron-4, Minitron): full attention on every layer.

vLLM 0.33 ``models/nemotron.py``: ``head_dim`` from config.json (else ``hidden_size /
num_attention_heads``), ``num_key_value_heads`` KV heads (split over TP, or replicated when fewer
than TP), no window. ``NemotronConfig`` leaves ``num_key_value_heads`` unset (None) by default,
and vLLM's ``ModelConfig`` then refuses the config before anything else (``total_num_kv_heads``:
"Input should be a valid integer", recorded at every length and TP): refused here. Weights (``modeling_nemotron.py``):
LayerNorm1P (weight and bias), a non-gated ``relu2`` MLP, biases from ``attention_bias`` and
``mlp_bias``.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import head_dims
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def read_nemotron(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if not r.has("num_key_value_heads"):
        raise ConfigError(
            f"{r.source}: num_key_value_heads is not set: vLLM 0.33's ModelConfig refuses "
            "NemotronConfig's None as its KV-head count (total_num_kv_heads must be an integer)",
            hint="set num_key_value_heads in config.json (Nemotron-4 checkpoints do)",
            code="config-invalid",
        )
    n = ctx.num_layers
    kv = r.int("num_key_value_heads")
    ctx.provenance["num_kv_heads"] = f"{r.path('num_key_value_heads')} = {kv}"
    ctx.provenance["layer pattern"] = "Nemotron: every layer full attention (vLLM 0.33 nemotron.py)"
    width = head_dims(r, ctx.num_attention_heads, ctx.hidden_size, n, ctx.provenance)[0]
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)] * n
    )


FAMILIES = (
    Family(
        name="nemotron",
        model_types={"nemotron"},
        architectures={"NemotronForCausalLM"},
        layouts=read_nemotron,
        note="Nemotron-4: full attention per layer (vLLM 0.33 nemotron.py)",
    ),
)
