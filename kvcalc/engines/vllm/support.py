"""Architectures vLLM 0.33 cannot build, with the error it stops with.

``vllm/model_executor/models/registry.py`` (0.33.0) no longer registers some hybrids; its
``_PREVIOUSLY_SUPPORTED_MODELS`` names the last release that had them. What happens next depends on
transformers (checked by running vLLM 0.33.0's own ``create_engine_config`` and model construction):

- the class is not a transformers class (``MiniMaxText01ForCausalLM``, ``MiniMaxM1ForCausalLM``):
  ``_raise_for_unsupported`` refuses while the engine config is built —
  "Model architecture {arch} was supported in vLLM until v0.23.0, and is not supported anymore. ...";
- transformers defines it (``BambaForCausalLM``, ``MiniMaxForCausalLM``): vLLM falls back to its
  Transformers backend, which stops while building the model at the first Mamba/linear-attention
  layer — "Layer {i} (linear_attention) does not dispatch through the Transformers attention
  interface and vLLM has no other way to handle it."

Only architectures checked that way are listed; others removed from vLLM may still run through the
Transformers backend.
"""

from __future__ import annotations

from kvcalc.model.layouts import RecurrentState
from kvcalc.model.shape import ModelShape

#: architecture -> last vLLM release that built it (``_PREVIOUSLY_SUPPORTED_MODELS``, 0.33.0)
REMOVED: dict[str, str] = {
    "MiniMaxText01ForCausalLM": "0.23.0",
    "MiniMaxM1ForCausalLM": "0.23.0",
}
#: removed architectures transformers defines: vLLM 0.33 tries its Transformers backend instead
TRANSFORMERS_FALLBACK: dict[str, str] = {
    "BambaForCausalLM": "0.23.0",
    "MiniMaxForCausalLM": "0.23.0",
}


def unbuildable_reason(model: ModelShape) -> str | None:
    """vLLM 0.33's own error for a model it cannot build, or None."""
    archs = model.architectures
    if not archs or any(a not in REMOVED and a not in TRANSFORMERS_FALLBACK for a in archs):
        return None
    first = archs[0]
    if first in TRANSFORMERS_FALLBACK:
        layer = next((i for i, x in enumerate(model.layers) if isinstance(x, RecurrentState)), None)
        if layer is None:
            return None  # nothing the Transformers backend cannot run (not checked: no refusal)
        return (
            f"Layer {layer} (linear_attention) does not dispatch through the Transformers "
            "attention interface and vLLM has no other way to handle it."
        )
    return (
        f"Model architecture {first} was supported in vLLM until v{REMOVED[first]}, and is not "
        "supported anymore. Please use an older version of vLLM if you want to use this model "
        "architecture."
    )


def unbuildable_hint(model: ModelShape) -> str:
    first = model.architectures[0]
    last = REMOVED.get(first) or TRANSFORMERS_FALLBACK.get(first)
    return f"vLLM served {first} up to v{last}; vLLM 0.33 cannot build it"
