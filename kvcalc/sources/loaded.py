"""A resolved model: its parsed shape, where it came from, and (lazily) its exact weights.

Every source (:mod:`kvcalc.sources.resolve` for folders, bundled configs and the Hub,
:mod:`kvcalc.sources.gguf` for GGUF files) returns one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape

if TYPE_CHECKING:
    from kvcalc.sources.safetensors_meta import SafetensorsWeights

Source = Literal["path", "bundled", "hub"]


def no_weights() -> SafetensorsWeights | None:
    return None


@frozen
class LoadedModel:
    """A model's parsed config, where it came from, and (lazily) its exact weights."""

    shape: ModelShape
    source: Source
    #: the config's path, or ``org/name@revision`` for the Hub
    location: str
    #: the revision asked for (``"main"`` by default); ``None`` unless ``source == "hub"``
    revision: str | None = None
    #: the commit the Hub config belongs to
    commit_hash: str | None = None
    #: the ``config.json`` read (in the Hub cache for Hub models)
    config_path: Path | None = None
    #: ``True`` when a Hub config came from the cache without the Hub confirming it
    from_cache: bool = False
    _weights: Callable[[], SafetensorsWeights | None] = field(
        default=no_weights, repr=False, compare=False
    )

    def weights_metadata(self) -> SafetensorsWeights | None:
        """Exact weights from safetensors headers, read on first call and then remembered.

        Local models: the safetensors files beside their ``config.json``. Hub models: the Hub's
        headers at the config's commit, unless offline or the config came from the cache because
        the Hub could not be reached. Bundled models: ``None``. Also ``None`` when there are no
        safetensors files; unreadable ones raise a ``KvcalcError``.
        """
        return self._weights()
