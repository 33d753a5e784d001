"""The bundled models as a listing (``kvcalc models``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kvcalc.frozen import frozen
from kvcalc.hfconfig import parse_config
from kvcalc.sources.bundled import bundled_models


@frozen
class BundledRow:
    """One bundled model in ``kvcalc models --json``."""

    #: the name to type (``kvcalc plan ALIAS``)
    alias: str
    #: its Hub id
    model: str
    model_type: str
    attention_kind: str
    num_layers: int
    #: all layers, as if each held every token, at the model's own dtype (``auto``)
    kv_bytes_per_token: int
    #: the recurrent layers' state per request (0 without recurrent layers)
    state_bytes_per_request: int
    #: the config's own maximum (vLLM's derived ``max_model_len``)
    max_model_len: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_bundled() -> list[BundledRow]:
    rows = []
    for bundled in bundled_models():
        shape = parse_config(bundled.load(), name=bundled.hf_id, source=bundled.path.name)
        rows.append(
            BundledRow(
                alias=bundled.alias,
                model=bundled.hf_id,
                model_type=shape.model_type,
                attention_kind=shape.attention_kind,
                num_layers=shape.num_layers,
                kv_bytes_per_token=shape.bytes_per_token,
                state_bytes_per_request=shape.state_bytes_per_sequence,
                max_model_len=shape.max_model_len,
            )
        )
    return rows
