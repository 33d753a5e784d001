"""Granite 3 dense (``GraniteForCausalLM``), MoE (``GraniteMoeForCausalLM``) and MoE with a shared
MLP (``GraniteMoeSharedForCausalLM``), and Granite Speech and Speech Plus (``granite_speech``,
``granite_speech_plus``: ``granite_speech.py`` builds the Granite ``text_config``; the audio tower
holds no cache): full attention on every layer; the Granite multipliers
(embedding, residual, attention, logits) shape no cache.

vLLM 0.33: ``models/granite.py`` takes ``head_dim`` from config.json (else ``hidden_size /
num_attention_heads``); ``models/granitemoe.py`` always ``hidden_size / num_attention_heads``, and
``models/granitemoeshared.py`` builds that same ``GraniteMoeAttention`` (with the
``num_key_value_heads`` KV heads), beside a shared MLP ``shared_intermediate_size`` wide (none when
0, the config class's default; weights). All
take a window only where ``layer_types`` marks a layer sliding (``granite_layer_attn_params``):
Granite 3 configs have none, and a config that has one is refused here (not checked).
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import full_split_heads
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_granitemoe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return full_split_heads(r, ctx, "granitemoe.py", "Granite MoE: every layer full attention")


def read_granitemoeshared(
    r: ConfigReader, ctx: LayoutContext
) -> tuple[list[Layout], tuple[str, ...]]:
    return full_split_heads(
        r, ctx, "granitemoe.py", "Granite MoE (shared MLP): every layer full attention "
        "(vLLM 0.33 granitemoeshared.py builds granitemoe.py's attention)"
    )  # fmt: skip


FAMILIES = (
    Family(
        name="granite",
        # and Granite Speech (granite_speech.py: the Granite text_config, an audio tower beside)
        model_types={"granite", "granite_speech", "granite_speech_plus"},
        architectures={
            "GraniteForCausalLM",
            "GraniteSpeechForConditionalGeneration",
            "GraniteSpeechPlusForConditionalGeneration",
        },  # fmt: skip
        note="Granite 3 dense: full attention per layer",
    ),
    Family(
        name="granitemoe",
        model_types={"granitemoe"},
        architectures={"GraniteMoeForCausalLM"},
        layouts=read_granitemoe,
        note="Granite 3 MoE: full attention per layer, heads hidden_size / num_attention_heads wide",
    ),
    Family(
        name="granitemoeshared",
        model_types={"granitemoeshared"},
        # registry.py maps GraniteMoeSWAForCausalLM to the same class: its granitemoe_swa configs
        # are families/granite_swa.py's
        architectures={"GraniteMoeSharedForCausalLM"},
        layouts=read_granitemoeshared,
        note="Granite 3 MoE with a shared MLP: full attention per layer, heads hidden_size / "
        "num_attention_heads wide",
    ),
)
