"""GPT-2 (multi-head attention) and GPT-BigCode (``multi_query``: one KV head)."""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="gpt2",
        model_types={"gpt2", "gpt_bigcode"},
        architectures={"GPT2LMHeadModel", "GPTBigCodeForCausalLM"},
        keys={"multi_query"},
        note="full attention; multi_query means one KV head",
    ),
)
