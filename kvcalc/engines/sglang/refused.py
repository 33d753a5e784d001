"""What kvcalc refuses under SGLang, by name, rather than guess.

Architectures whose pool SGLang 0.5.23's own sizing code (sglang_reference, emulated H100, 20 GiB)
sizes differently from this package, reason not yet modelled. Gemma 4 (per-type KV heads/head dims
in the hybrid SWA pool): 28,984 tokens vs 29,127 here; Kimi-K2.5, an MLA text stack inside a
multimodal wrapper: 304,103 vs 305,595 here.
"""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.model.layouts import MLALatent, RecurrentState
from kvcalc.model.shape import ModelShape

UNVERIFIED_ARCHS = {
    "Gemma4ForConditionalGeneration": "Gemma 4 (sliding and global layers of different shapes)",
    "Gemma4ForCausalLM": "Gemma 4 (sliding and global layers of different shapes)",
}


def refuse_unverified(model: ModelShape) -> None:
    """Refuse what SGLang's recorded sizing shows kvcalc does not reproduce yet."""
    what = next((UNVERIFIED_ARCHS[a] for a in model.architectures if a in UNVERIFIED_ARCHS), None)
    wrapped = any(k.startswith("text_config.") for k in model.config_keys)
    if what is None and wrapped and any(isinstance(x, MLALatent) for x in model.layers):
        what = "an MLA text stack inside a multimodal config (Kimi-K2.5)"
    if what is not None:
        raise InputError(
            f"sglang: {what} ({model.model_type}): SGLang 0.5.23 sizes this pool differently "
            "from kvcalc's model, which is not yet checked",
            hint="plan it with --engine vllm; under SGLang it is not yet modelled",
            code="unsupported-model",
        )


def refuse_recurrent(model: ModelShape) -> None:
    """Mamba/linear-attention hybrids: SGLang's state-slot split is not modelled."""
    if any(isinstance(x, RecurrentState) for x in model.layers):
        raise InputError(
            "SGLang's Mamba/linear-attention pool split (handle_max_mamba_cache) is not modelled",
            code="unsupported-model",
        )
