"""Param-2 MoE (``Param2MoEForCausalLM``, ``param2moe``): vLLM 0.33 ``models/param2moe.py``; its
config class is the checkpoints' remote code (``families/_remote.py``).

Every layer is full attention with ``num_key_value_heads`` KV heads ``head_dim`` wide (0 or null:
``hidden_size // num_attention_heads``), both read as attributes (config.json must carry them).
Unlike most model files it does not replicate KV heads: it asserts ``num_key_value_heads %
tensor_parallel_size == 0``, so TP above the KV-head count is refused (recorded). The q/k norms,
partial RoPE and MoE layers shape no cache. Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._remote import full_uncounted, head_width, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_param2moe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    width = head_width(r, ctx, "param2moe.py")
    kv = required(r, "num_key_value_heads", "param2moe.py")
    ctx.tp_limit[kv] = (
        f"num_key_value_heads ({kv}) must be divisible by tensor-parallel world size "
        "(vLLM 0.33 param2moe.py does not replicate KV heads)",
        "invalid-parallelism",
    )
    return full_uncounted(ctx, kv, width, "Param-2 MoE: every layer full attention (param2moe.py)")


FAMILIES = (
    Family(
        name="param2moe",
        model_types={"param2moe"},
        architectures={"Param2MoEForCausalLM"},
        layouts=read_param2moe,
        note="Param-2 MoE: full attention, num_key_value_heads of head_dim, KV heads split by TP, "
        "never replicated (vLLM 0.33 param2moe.py).",
    ),
)
