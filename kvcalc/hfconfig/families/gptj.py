"""GPT-J (``GPTJForCausalLM``): full multi-head attention on every layer.

vLLM 0.33 ``models/gpt_j.py``: ``n_head`` heads of ``n_embd / n_head`` (KV as many), rotary on
``rotary_dim`` of each head, no window. Weights (``modeling_gptj.py``): one LayerNorm (``ln_1``)
per layer feeding attention and MLP in parallel, q/k/v/out_proj without bias, ``fc_in``/``fc_out``
with bias (``n_inner`` else 4 × ``n_embd``), a biased lm_head not tied to the embedding.
"""

from __future__ import annotations

from kvcalc.hfconfig.families._mha import full_mha
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_gptj(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return full_mha(r, ctx, "gpt_j.py", "GPT-J")


FAMILIES = (
    Family(
        name="gptj",
        model_types={"gptj"},
        architectures={"GPTJForCausalLM"},
        layouts=read_gptj,
        note="GPT-J: full multi-head attention per layer (vLLM 0.33 gpt_j.py)",
    ),
)
