"""MiniMax-M2 / M2.5: full attention on every layer (MoE; MTP modules not built without speculation)."""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="minimax-m2",
        model_types={"minimax_m2"},
        architectures={"MiniMaxM2ForCausalLM"},
        note="full attention per layer",
    ),
)
