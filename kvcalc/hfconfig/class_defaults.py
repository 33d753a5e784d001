"""The KV heads and head width a config class fills in where config.json leaves them out.

vLLM builds its model from the config object transformers' (or its own) class makes, so a key the
file leaves out takes the class's default: ``MistralConfig``'s 8 KV heads, ``Qwen2Config``'s 32
(whatever the query heads), ``GemmaConfig``'s head width of 256. Recorded per model type from
transformers 5.20 and vLLM 0.33's classes (``kvcalc/data/class_attention_defaults.json``,
``scripts/class_attention_defaults.py``); a type not listed follows the query heads and
``hidden_size / heads``, which is the readers' own fallback.
"""

from __future__ import annotations

import json
import pkgutil
from functools import cache
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.reader import ConfigReader

__all__ = ["class_default"]


@cache
def _table() -> dict[str, dict[str, Any]]:
    data = pkgutil.get_data("kvcalc", "data/class_attention_defaults.json")
    assert data is not None
    table: dict[str, dict[str, Any]] = json.loads(data)["defaults"]
    return table


def class_default(r: ConfigReader, key: str) -> int | None:
    """The class default of ``key`` (``num_key_value_heads`` or ``head_dim``) for the config's
    text model type (else its own), ``None`` where the class follows the heads; a class that
    derives it some other way is refused rather than guessed."""
    for model_type in (r.text.get("model_type"), r.raw.get("model_type")):
        entry = _table().get(model_type) if isinstance(model_type, str) else None
        if entry is None:
            continue
        value = entry.get(key)
        if value == "derived":
            raise ConfigError(
                f"{r.source}: no {key}: {model_type}'s config class derives it from other keys, "
                "which kvcalc has not read",
                hint=f"give {key} in config.json",
                code="config-missing-key",
            )
        return value if isinstance(value, int) else None
    return None
