"""EXAONE 3 (``ExaoneForCausalLM``, ``exaone``: EXAONE 3.0 and 3.5) and Solar (``SolarForCausalLM``,
``solar``: Solar Pro): full attention on every layer; both config classes are the checkpoints'
remote code (``families/_remote.py``).

vLLM 0.33 ``models/exaone.py`` and ``models/solar.py`` (Llama's attention) give every head
``head_dim`` (``getattr``'s default None: ``hidden_size // num_attention_heads``) and cache
``num_key_value_heads`` KV heads, which config.json must carry (the remote class's default is not
known); TP must divide them, or they it. EXAONE's ``num_layers`` is its layer count; Solar's
``bskcn_*`` skip connections shape no cache. Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._remote import full_uncounted, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import head_dims
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def _read(r: ConfigReader, ctx: LayoutContext, what: str, model_file: str):
    (width,) = head_dims(r, ctx.num_attention_heads, ctx.hidden_size, 1, ctx.provenance)
    kv = required(r, "num_key_value_heads", model_file)
    return full_uncounted(ctx, kv, width, f"{what}: every layer full attention ({model_file})")


def read_exaone(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return _read(r, ctx, "EXAONE 3", "exaone.py")


def read_solar(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return _read(r, ctx, "Solar", "solar.py")


FAMILIES = (
    Family(
        name="exaone",
        model_types={"exaone"},
        architectures={"ExaoneForCausalLM"},
        layouts=read_exaone,
        note="EXAONE 3: full attention, num_key_value_heads of head_dim (vLLM 0.33 exaone.py).",
    ),
    Family(
        name="solar",
        model_types={"solar"},
        architectures={"SolarForCausalLM"},
        layouts=read_solar,
        note="Solar: full attention, num_key_value_heads of head_dim (vLLM 0.33 solar.py).",
    ),
)
