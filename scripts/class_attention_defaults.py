"""Record what each config class gives for ``num_key_value_heads`` and ``head_dim`` when a
config.json leaves them out (a recording tool; run it with the vLLM reference venv's Python, whose
transformers 5.20 and vLLM 0.33 config classes are the ones vLLM builds its model from)::

    python scripts/class_attention_defaults.py MODEL_TYPE ... > kvcalc/data/class_attention_defaults.json

For each model type: the class's own config (its defaults) with the two keys removed from the
text config is rebuilt twice, with ``num_attention_heads`` as the class has it and doubled. A
value that stays the same is a *fixed* class default (MistralConfig's 8 KV
heads, GemmaConfig's head width 256) and is recorded; one that follows the heads (or
``hidden_size / heads``) is what kvcalc's reader does without a table, and is not recorded; any
other rule is recorded as ``"derived"`` (kvcalc then refuses a config without the key).
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import date
from importlib import metadata
from typing import Any

TEXT_KEYS = ("text_config", "llm_config", "language_config")


def _text(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _class(model_type: str) -> Any:
    """The class vLLM builds the config with: its own registry's first (``get_config`` reads
    ``_CONFIG_REGISTRY`` before transformers' ``AutoConfig``: ``beam``), then transformers'."""
    from transformers import AutoConfig
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    if model_type in _CONFIG_REGISTRY:
        return _CONFIG_REGISTRY[model_type]
    return type(AutoConfig.for_model(model_type))


def _rebuild(model_type: str, d: dict, scale: int) -> tuple[Any, Any, Any, Any]:
    d = json.loads(json.dumps(d, default=str))
    key = next((k for k in TEXT_KEYS if isinstance(d.get(k), dict)), None)
    text = d[key] if key else d
    for k in ("num_key_value_heads", "head_dim"):
        text.pop(k, None)
    if scale != 1 and isinstance(text.get("num_attention_heads"), int):
        # the query heads alone: a fixed head width then differs from hidden_size / heads
        text["num_attention_heads"] *= scale
    rebuilt = _text(_class(model_type)(**{k: v for k, v in d.items() if k != "model_type"}))
    return (getattr(rebuilt, "num_key_value_heads", None), getattr(rebuilt, "head_dim", None),
            getattr(rebuilt, "num_attention_heads", None), getattr(rebuilt, "hidden_size", None))  # fmt: skip


def _rule(value: Any, other: Any, follows: Any, follows_other: Any) -> Any:
    """The recorded entry: ``None`` (follows the heads, or absent), the fixed value, "derived"."""
    if value is None or (value == follows and other == follows_other):
        return None
    if value == other:
        return value
    return "derived"


def main() -> None:
    out: dict[str, dict[str, Any]] = {}
    for model_type in sys.argv[1:]:
        try:
            d = _class(model_type)().to_dict()
            kv, hd, heads, hidden = _rebuild(model_type, d, 1)
            kv2, hd2, heads2, hidden2 = _rebuild(model_type, d, 2)
        except Exception:  # noqa: BLE001 - a class that cannot be built alone: not recorded
            continue
        entry = {
            "num_key_value_heads": _rule(kv, kv2, heads, heads2),
            "head_dim": _rule(
                hd,
                hd2,
                hidden // heads if heads and hidden else None,
                hidden2 // heads2 if heads2 and hidden2 else None,
            ),  # fmt: skip
        }
        if any(v is not None for v in entry.values()):
            out[model_type] = entry
    me = open(__file__, "rb").read()
    json.dump({
        "provenance": {
            "kind": "engine-recording",
            "engine": f"vLLM {metadata.version('vllm')} (its config classes)",
            "torch": metadata.version("torch"),
            "transformers": metadata.version("transformers"),
            "tool": f"scripts/class_attention_defaults.py sha256:{hashlib.sha256(me).hexdigest()[:12]}",
            "recorded": date.today().isoformat(),
            "command": "$VLLMENV/bin/python scripts/class_attention_defaults.py MODEL_TYPES "
            "(every model type a kvcalc family reads)",
        },
        "defaults": out,
    }, sys.stdout, indent=1, sort_keys=True)  # fmt: skip
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
