"""InternLM2 (``InternLM2ForCausalLM``, ``internlm2``) and InternLM3 (``InternLM3ForCausalLM``,
``internlm3``): full attention on every layer; both config classes are the checkpoints' remote
code (``families/_remote.py``).

vLLM 0.33 ``models/internlm2.py`` gives every head ``hidden_size // num_attention_heads`` (a
``head_dim`` in config.json is not read) and caches ``config.num_key_value_heads`` KV heads.
InternLM3 is built as ``LlamaForCausalLM`` (``registry.py``): heads ``head_dim`` wide (else
``hidden_size // num_attention_heads``), ``num_key_value_heads`` KV heads, which config.json must
carry for both (``llama.py``'s ``getattr`` default would be one per query head, but the remote
class's own default is not known); ``qkv_bias`` is only the projections' bias. Weights are not
counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.families._remote import full_uncounted, required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import head_dims
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_internlm2(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    width = split_head_width(r, ctx, "internlm2.py")
    kv = required(r, "num_key_value_heads", "internlm2.py")
    return full_uncounted(ctx, kv, width, "InternLM2: every layer full attention (internlm2.py)")


def read_internlm3(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    (width,) = head_dims(r, ctx.num_attention_heads, ctx.hidden_size, 1, ctx.provenance)
    kv = required(r, "num_key_value_heads", "llama.py")
    return full_uncounted(
        ctx, kv, width, "InternLM3: every layer full attention (llama.py, LlamaForCausalLM)"
    )


FAMILIES = (
    Family(
        name="internlm2",
        model_types={"internlm2"},
        architectures={"InternLM2ForCausalLM"},
        layouts=read_internlm2,
        note="InternLM2: full attention, num_key_value_heads of hidden_size / num_attention_heads "
        "(vLLM 0.33 internlm2.py).",
    ),
    Family(
        name="internlm3",
        model_types={"internlm3"},
        architectures={"InternLM3ForCausalLM"},
        layouts=read_internlm3,
        note="InternLM3: full attention, num_key_value_heads of head_dim (vLLM 0.33 llama.py).",
    ),
)
