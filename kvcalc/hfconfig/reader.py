"""Typed, recorded access to a ``config.json`` mapping.

Every key kvcalc reads goes through :class:`ConfigReader`, which checks its type and remembers
which keys were read and what they said, so ``kvcalc inspect --explain`` can show where each figure
came from.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Mapping
from typing import Any

from kvcalc.errors import ConfigError

_MISSING: Any = object()
#: Sub-configs that hold the language model of multimodal configs.
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")
#: Sub-configs holding the ``text_config`` one level down (Qwen3-ASR's ``thinker_config``)
NESTED_TEXT_CONFIG_KEYS = ("thinker_config",)
#: No real model has more layers, heads or values than this; larger numbers are corrupt input.
MAX_DIM = 1 << 24


class ConfigReader:
    """Read keys of one model config, preferring the text sub-config of multimodal models."""

    def __init__(self, raw: Mapping[str, Any], *, source: str) -> None:
        if not isinstance(raw, Mapping):
            raise ConfigError(
                f"{source}: config.json must hold a JSON object, not {type(raw).__name__}",
                code="config-invalid",
            )
        self.raw = raw
        self.source = source
        self.prefix = ""
        self.text: Mapping[str, Any] = raw
        for key in TEXT_CONFIG_KEYS:
            sub = raw.get(key)
            if isinstance(sub, Mapping) and sub:
                self.text = sub
                self.prefix = f"{key}."
                break
        for key in NESTED_TEXT_CONFIG_KEYS:
            outer = raw.get(key)
            sub = outer.get("text_config") if isinstance(outer, Mapping) else None
            if self.prefix == "" and isinstance(sub, Mapping) and sub:
                self.text = sub
                self.prefix = f"{key}.text_config."
        #: ``key path -> value`` for every key read, in reading order
        self.used: dict[str, Any] = {}

    # -- raw access -------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return self.text.get(key) is not None or (
            self.prefix != "" and self.raw.get(key) is not None
        )

    def _lookup(self, key: str) -> tuple[str, Any]:
        if self.text.get(key) is not None:
            return self.prefix + key, self.text[key]
        if self.prefix and self.raw.get(key) is not None:
            return key, self.raw[key]
        return key, None

    def value(self, key: str, default: Any = None) -> Any:
        """The raw value of ``key`` (text config first, then the top level), recorded."""
        path, value = self._lookup(key)
        if value is None:
            return default
        self.used[path] = value
        return value

    def path(self, key: str) -> str:
        return self._lookup(key)[0]

    # -- typed access -----------------------------------------------------------------------
    def int(self, *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """The first of ``keys`` that is set, as an int ``>= minimum``."""
        for key in keys:
            path, value = self._lookup(key)
            if value is None:
                continue
            self.used[path] = value
            return self._as_int(path, value, minimum)
        if default is _MISSING:
            raise self.missing(keys)
        return default

    def _as_int(self, path: builtins.str, value: Any, minimum: builtins.int) -> builtins.int:
        if isinstance(value, bool):
            raise self.bad(path, value, "an integer")
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise self.bad(path, value, "an integer")
        if value < minimum or value > MAX_DIM * 1024:
            raise self.bad(path, value, f"an integer >= {minimum}")
        return value

    def int_or_list(
        self, key: builtins.str, length: builtins.int, *, minimum: builtins.int = 1
    ) -> tuple[builtins.int, ...] | None:
        """An int, or a per-layer list of ints of ``length`` entries (e.g. OpenELM's heads)."""
        path, value = self._lookup(key)
        if value is None:
            return None
        self.used[path] = value
        if isinstance(value, list):
            if len(value) != length:
                raise ConfigError(
                    f"{self.source}: {path} lists {len(value)} values for {length} layers",
                    code="config-invalid",
                )
            return tuple(self._as_int(path, v, minimum) for v in value)
        return (self._as_int(path, value, minimum),) * length

    def bool(self, key: str, default: bool = False) -> bool:
        path, value = self._lookup(key)
        if value is None:
            return default
        self.used[path] = value
        if not isinstance(value, bool):
            raise self.bad(path, value, "true or false")
        return value

    def str(self, key: str, default: Any = None) -> Any:
        path, value = self._lookup(key)
        if value is None:
            return default
        self.used[path] = value
        if not isinstance(value, str):
            raise self.bad(path, value, "a string")
        return value

    def list(self, key: builtins.str) -> builtins.list[Any] | None:
        path, value = self._lookup(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.bad(path, value, "a list")
        self.used[path] = value if len(value) <= 16 else f"[{len(value)} entries]"
        return value

    def index_list(self, key: builtins.str) -> tuple[builtins.int, ...] | None:
        """A list of layer indices (``mlp_only_layers``, ``moe_layers``): ints ``>= 0``."""
        values = self.list(key)
        if values is None:
            return None
        return tuple(self._as_int(self.path(key), v, 0) for v in values)

    def mapping(self, key: builtins.str) -> Mapping[builtins.str, Any] | None:
        path, value = self._lookup(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.bad(path, value, "an object")
        self.used[path] = dict(value)
        return value

    # -- errors -----------------------------------------------------------------------------
    def missing(self, keys: tuple[builtins.str, ...]) -> ConfigError:
        names = " or ".join(self.prefix + k for k in keys)
        return ConfigError(
            f"{self.source}: missing {names}",
            hint="kvcalc needs the model's layer count, head counts and sizes from config.json",
            code="config-missing-key",
        )

    def bad(self, path: builtins.str, value: Any, expected: builtins.str) -> ConfigError:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return ConfigError(
            f"{self.source}: {path} is {shown}, expected {expected}", code="config-invalid"
        )
