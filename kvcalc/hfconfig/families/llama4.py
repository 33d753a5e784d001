"""Llama 4: chunked local attention (``attention_chunk_size``) with every 4th layer global (NoPE)."""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="llama4",
        model_types={"llama4", "llama4_text"},
        architectures={"Llama4ForConditionalGeneration", "Llama4ForCausalLM"},
        keys={"attention_chunk_size", "no_rope_layers", "no_rope_layer_interval"},
        note="chunked local layers; no_rope_layers (or every 4th layer) global",
    ),
)
