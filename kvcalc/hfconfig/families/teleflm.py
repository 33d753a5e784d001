"""TeleFLM (``TeleFLMForCausalLM``, ``teleflm``: FLM-2): full attention on every layer; the config
class is the checkpoints' remote code (``families/_remote.py``).

vLLM 0.33 ``models/teleflm.py`` is ``LlamaForCausalLM`` with muP logit scaling (``use_mup``,
``mup_scale_factor``, ``output_mult``: no cache): heads ``head_dim`` wide (else ``hidden_size //
num_attention_heads``), ``num_key_value_heads`` KV heads, which config.json must carry (the remote
class's default is not known). Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._remote import full_uncounted, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import head_dims
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_teleflm(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    (width,) = head_dims(r, ctx.num_attention_heads, ctx.hidden_size, 1, ctx.provenance)
    kv = required(r, "num_key_value_heads", "teleflm.py (llama.py)")
    return full_uncounted(
        ctx, kv, width, "TeleFLM: every layer full attention (teleflm.py, LlamaForCausalLM)"
    )


FAMILIES = (
    Family(
        name="teleflm",
        model_types={"teleflm"},
        architectures={"TeleFLMForCausalLM"},
        layouts=read_teleflm,
        note="TeleFLM: full attention, num_key_value_heads of head_dim (vLLM 0.33 teleflm.py).",
    ),
)
