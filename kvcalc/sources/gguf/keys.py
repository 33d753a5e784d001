"""Typed, recorded reads of a GGUF file's ``{arch}.*`` keys, for :mod:`kvcalc.sources.gguf.model`
and :mod:`kvcalc.sources.gguf.recurrent`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.errors import ConfigError

_MAX_DIM = 1 << 24


class GgufKeys:
    """Typed, recorded reads of ``{arch}.*`` keys (like :class:`~kvcalc.hfconfig.ConfigReader`)."""

    def __init__(self, metadata: Mapping[str, Any], *, arch: str, where: str) -> None:
        self.metadata = metadata
        self.arch = arch
        self.where = where
        self.used: dict[str, Any] = {}

    def raw(self, key: str) -> Any:
        name = f"{self.arch}.{key}"
        value = self.metadata.get(name)
        if value is not None:
            self.used[name] = value
        return value

    def num(self, key: str, default: int | None = None, *, minimum: int = 0) -> int:
        value = self.raw(key)
        if value is None:
            if default is None:
                raise ConfigError(f"{self.where}: {self.arch}.{key} is missing",
                                  hint="the GGUF was not written by llama.cpp's converter, or is damaged",
                                  code="config-missing-key")  # fmt: skip
            return default
        return self._check(key, value, minimum)

    def per_layer(self, key: str, n: int, default: int) -> tuple[int, ...]:
        """A number for every layer, or an array of exactly ``n`` (``get_key_or_arr``)."""
        value = self.raw(key)
        if value is None:
            return (default,) * n
        if isinstance(value, tuple):
            if len(value) != n:
                raise self.bad(key, value, f"{n} values, one per layer")
            return tuple(self._check(key, v, 0) for v in value)
        return (self._check(key, value, 0),) * n

    def _check(self, key: str, value: Any, minimum: int) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value < _MAX_DIM:
            raise self.bad(key, value, f"a whole number from {minimum} to {_MAX_DIM:,}")
        return value

    def bad(self, key: str, value: Any, expected: str) -> ConfigError:
        shown = repr(value) if not isinstance(value, tuple) else f"an array of {len(value)}"
        return ConfigError(f"{self.where}: {self.arch}.{key} = {shown[:60]}, expected {expected}",
                           code="config-invalid")  # fmt: skip
