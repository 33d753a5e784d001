"""vLLM 0.33's model registry as recorded (``kvcalc/data/vllm_registry.json``, written by
``scripts/vllm_registry.py`` from ``vllm/model_executor/models/registry.py``): every architecture
vLLM serves, by category (``text-generation``, ``multimodal``, ``speculative``, ``pooling``,
``transformers-backend``), and those it no longer builds (``removed``, with the last release that
did)."""

from __future__ import annotations

import functools
import json
import pkgutil

from kvcalc.frozen import frozen

#: the categories, in the order ``kvcalc models --architectures`` lists them
CATEGORIES = ("text-generation", "multimodal", "speculative", "pooling", "transformers-backend",
              "removed")  # fmt: skip


@frozen
class RegisteredArchitecture:
    """One entry of vLLM's registry."""

    architecture: str
    category: str
    #: vLLM's model module and class (empty for ``removed``)
    module: str = ""
    class_name: str = ""
    #: for ``removed``: the last vLLM release that built it
    last_release: str | None = None


@frozen
class Registry:
    engine_version: str
    entries: tuple[RegisteredArchitecture, ...]


@functools.cache
def vllm_registry() -> Registry:
    """The recorded registry, categories in :data:`CATEGORIES` order, names sorted."""
    data = pkgutil.get_data("kvcalc", "data/vllm_registry.json")
    assert data is not None  # the package's own loader reads files
    record = json.loads(data)
    rows = []
    for category in CATEGORIES:
        for arch, entry in record["categories"].get(category, {}).items():
            rows.append(RegisteredArchitecture(
                architecture=arch, category=category, module=entry.get("module", ""),
                class_name=entry.get("class", ""), last_release=entry.get("last_release"),
            ))  # fmt: skip
    return Registry(engine_version=record["engine_version"], entries=tuple(rows))


@functools.cache
def config_sources() -> dict[str, dict[str, str]]:
    """``kvcalc/data/architecture_configs.json``: architecture → where a public configuration of
    it exists (``source``: ``config-class``, ``published``, ``unlocated`` or ``none``), for the
    text-generation and multimodal architectures no family reads."""
    data = pkgutil.get_data("kvcalc", "data/architecture_configs.json")
    assert data is not None  # the package's own loader reads files
    return json.loads(data)["architectures"]
