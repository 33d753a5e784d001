"""MiniMax-Text-01 / MiniMax-M1 (``model_type: minimax``): lightning-attention layers. vLLM 0.33
removed them and transformers' cache for them is not modelled: refused by name, with the reason.
"""

from __future__ import annotations

from typing import NoReturn

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def refuse_minimax01(r: ConfigReader) -> NoReturn:
    arch = r.raw.get("architectures")
    raise ConfigError(
        f"{r.source}: model_type 'minimax' ({', '.join(arch) if isinstance(arch, list) else 'MiniMax-01'}) "
        "keeps lightning-attention state kvcalc does not model; vLLM 0.33 no longer serves it "
        "(MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM were supported until v0.23.0)",
        hint="kvcalc refuses layouts it cannot size exactly; please file an issue",
        code="config-unsupported",
    )


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    refuse_minimax01(r)


FAMILIES = (
    Family(
        name="minimax-01",
        model_types={"minimax"},
        architectures={"MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxForCausalLM"},
        # the reader refuses this family with its reason, whatever the keys say
        keys={
            "layer_types",
            "attn_type_list",
            "block_size",
            "linear_attn_type",
            "linear_attn_alpha_factor",
            "linear_attn_beta_factor",
        },  # fmt: skip
        layer_types={"full_attention", "linear_attention"},
        layouts=_layouts,
        note="MiniMax-Text-01 lightning attention: refused with the reason.",
    ),
)
