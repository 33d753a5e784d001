"""K2 Horizon (``K2HorizonForCausalLM``, ``k2_horizon``): vLLM 0.33 ``models/k2_horizon.py``, a MoE
whose sparse layers may route attention too (MoVA); its config class is the checkpoints' remote
code (``families/_remote.py``).

Every layer is full attention, plain (``K2HorizonAttention``) or, on the sparse layers with
``mova_num_experts > 0``, mixture-of-value-attention (``K2HorizonMoVAAttention``), whose experts
share one cache: both keep ``num_key_value_heads`` KV heads ``head_dim`` wide (0 or null:
``hidden_size // num_attention_heads``), which config.json must carry (the model file reads them
as attributes). The partial RoPE (``rope_head_dim``), q/k norms and the output gate shape no
cache. ``dual_chunk_attention_config`` (another attention backend) was not recorded: refused.
Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.families._remote import full_uncounted, head_width, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_k2_horizon(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if r.value("dual_chunk_attention_config") is not None:
        raise ConfigError(
            f"{r.source}: dual_chunk_attention_config: vLLM 0.33 k2_horizon.py then serves "
            "dual-chunk attention, which kvcalc has not checked",
            code="config-unverified",
        )
    width = head_width(r, ctx, "k2_horizon.py")
    kv = required(r, "num_key_value_heads", "k2_horizon.py")
    return full_uncounted(
        ctx, kv, width, "K2 Horizon: every layer full attention, MoVA layers one cache each"
    )


FAMILIES = (
    Family(
        name="k2-horizon",
        model_types={"k2_horizon"},
        architectures={"K2HorizonForCausalLM"},
        keys={
            "dual_chunk_attention_config",  # read: refused when set
            "rope_head_dim",  # the rotated part of each head (partial RoPE): no cache
        },
        layouts=read_k2_horizon,
        note="K2 Horizon: full attention (MoVA experts share one cache), num_key_value_heads of "
        "head_dim (vLLM 0.33 k2_horizon.py).",
    ),
)
