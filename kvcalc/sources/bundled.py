"""Bundled model configs: found beside the package's modules, addressable by HF id or short alias.

The configs ship in the package (``kvcalc/model_configs`` in a wheel; ``model_configs/`` at the top
of a source checkout). Each file is named ``<org>--<name>.json`` after its Hub id.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.frozen import frozen


@frozen
class BundledModel:
    hf_id: str
    alias: str
    path: Path

    def load(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # pragma: no cover - shipped files are valid
            raise ConfigError(f"bundled config {self.path.name} is unreadable: {exc}") from exc


def configs_dir() -> Path:
    """The folder of bundled configs, in a wheel or in a source checkout."""
    here = Path(__file__).resolve().parents[1]  # the kvcalc package
    packaged = here / "model_configs"
    if packaged.is_dir():
        return packaged
    return here.parent / "model_configs"


@lru_cache(maxsize=1)
def bundled_models() -> tuple[BundledModel, ...]:
    found = []
    for path in sorted(configs_dir().glob("*--*.json")):
        org, _, name = path.stem.partition("--")
        found.append(BundledModel(hf_id=f"{org}/{name}", alias=name.lower(), path=path))
    return tuple(found)


def find_bundled(reference: str) -> BundledModel | None:
    """The bundled model named ``reference`` (HF id or alias, any case), else ``None``."""
    key = reference.strip().lower()
    for model in bundled_models():
        if key in (model.hf_id.lower(), model.alias):
            return model
    return None
