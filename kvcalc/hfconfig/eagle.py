"""The EAGLE-3 head fields of a draft ``config.json`` (:class:`~kvcalc.model.drafts.EagleHead`).

From vLLM 0.33's ``model_executor/models/llama_eagle3.py`` (``Eagle3LlamaForCausalLM``, the head
vLLM builds for a Llama-type EAGLE-3 config, ``LlamaForCausalLM`` renamed by ``EAGLEConfig`` or
``LlamaForCausalLMEagle3`` as published): ``draft_vocab_size`` (default ``vocab_size``) rows of its
own ``lm_head`` and as many ``draft_id_to_target_id`` int64 entries when it differs from the target's;
``target_hidden_size`` (default ``hidden_size``) × the auxiliary hidden states (``num_aux_hidden_states``,
else the length of ``eagle_config.eagle_aux_hidden_state_layer_ids``, else 3) into ``fc``; ``fc_norm``
(one norm per auxiliary state), ``eagle_config.norm_before_fc`` (one norm over fc's input).
"""

from __future__ import annotations

from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.drafts import EagleHead

#: head architectures vLLM 0.33 builds as ``Eagle3LlamaForCausalLM`` for method eagle3
EAGLE3_ARCHITECTURES = frozenset(
    {"LlamaForCausalLM", "LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"}
)


def read_eagle_head(
    r: ConfigReader, model_type: str, architectures: tuple[str, ...]
) -> EagleHead | None:
    """The EAGLE-3 fields, for a Llama-type config (any may be read as a head); else None."""
    if model_type != "llama" or not set(architectures) & EAGLE3_ARCHITECTURES:
        return None
    eagle = r.mapping("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    aux = r.int("num_aux_hidden_states", default=None)
    if aux is None:
        aux = len(ids) if isinstance(ids, list) and ids else 3
    return EagleHead(
        draft_vocab_size=r.int("draft_vocab_size", default=None, minimum=1),
        target_hidden_size=r.int("target_hidden_size", default=None, minimum=1),
        aux_hidden_states=aux,
        fc_norm=r.bool("fc_norm"),
        norm_before_fc=bool(eagle.get("norm_before_fc", r.bool("norm_before_fc"))),
    )
