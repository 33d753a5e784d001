"""HRM-Text (``HrmTextForCausalLM``, ``hrm_text``): vLLM 0.33 ``models/hrm_text.py`` over
transformers' ``HrmTextConfig``.

Two stacks of ``num_layers_per_stack`` layers (L and H) run recurrently, ``H_cycles`` times with
``L_cycles`` L-steps and one H-step each; their weights are shared across steps, but every step's
attention keeps its own KV cache (``attn_per_step``): ``num_layers_per_stack · H_cycles · (L_cycles
+ 1)`` full-attention caches, which is what ``HrmTextConfig`` writes as ``num_hidden_layers`` (it
sets ``num_layers_per_stack`` from the ``num_hidden_layers`` passed in, then multiplies). A
config.json with both keys is read as written; one without ``num_layers_per_stack`` (or whose
``num_hidden_layers`` is not that product) is refused. Attention is multi-head (the model file
hard-codes ``num_kv_heads = num_attention_heads``), ``head_dim`` wide (the class's default 128); the prompt attends bidirectionally at prefill, which shapes no cache.
Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout


def read_hrm_text(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    per_stack = r.int("num_layers_per_stack", default=None)
    h_cycles = r.int("H_cycles", default=2)
    l_cycles = r.int("L_cycles", default=3)
    if per_stack is None or per_stack * h_cycles * (l_cycles + 1) != n:
        raise ConfigError(
            f"{r.source}: num_hidden_layers {n} is not num_layers_per_stack × H_cycles × "
            f"(L_cycles + 1) = {per_stack} × {h_cycles} × {l_cycles + 1}: HrmTextConfig derives "
            "the cached layers from them (a config.json without num_layers_per_stack is multiplied "
            "again on loading), and kvcalc reads only the form it saves",
            hint="save the config with transformers' HrmTextConfig (it writes both keys)",
            code="config-unverified",
        )
    width = r.int("head_dim", default=128)  # HrmTextConfig's default (getattr finds it)
    prov["head_dim"] = f"head_dim = {width} (HrmTextConfig's default 128)"
    prov["num_kv_heads"] = (
        f"num_attention_heads = {heads}: hrm_text.py builds multi-head attention (num_key_value_heads "
        "is not read)"
    )
    prov["layer pattern"] = (
        f"{per_stack} layers per stack × {h_cycles} H-cycles × ({l_cycles} L-steps + 1 H-step) = "
        f"{n} full-attention caches, one per recurrence step and layer (hrm_text.py attn_per_step)"
    )
    layout: list[Layout] = [
        FullAttention(dtype=ctx.dtype, kv_heads=heads, k_dim=width, v_dim=width)
    ]
    return layout * n, (L.UNCOUNTED,) * n


FAMILIES = (
    Family(
        name="hrm-text",
        model_types={"hrm_text"},
        architectures={"HrmTextForCausalLM"},
        keys={
            "num_layers_per_stack",
            "H_cycles",
            "L_cycles",
            "L_bp_cycles",  # the training-time backpropagated L-cycles: not cache
            "prefix_lm",  # bidirectional prefill attention: not cache
        },
        layouts=read_hrm_text,
        note="HRM-Text: one full-attention cache per recurrence step and layer, multi-head "
        "(vLLM 0.33 hrm_text.py).",
    ),
)
