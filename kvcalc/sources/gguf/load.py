"""GGUF files as a model source: a local ``.gguf`` path, or ``org/name:TAG`` / ``org/name:FILE.gguf``
on the Hub, each turned into a :class:`~kvcalc.sources.resolve.LoadedModel` whose exact weights come
from the tensor infos of the header(s)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from kvcalc.sources.gguf.files import SOURCE_HUB, SOURCE_LOCAL, is_gguf_name, read_local

if TYPE_CHECKING:
    from kvcalc.sources import hub
    from kvcalc.sources.loaded import LoadedModel

#: ``org/name:Q4_K_M`` or ``org/name:Some-File-Q4_K_M.gguf`` (``@revision`` split off before)
HUB_GGUF = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}):(?P<choice>[^:@\\]+)$")


def is_gguf_path(path: Path) -> bool:
    return is_gguf_name(path.name) and path.is_file()


def _stem(name: str) -> str:
    return re.sub(r"(-\d{5}-of-\d{5})?\.gguf$", "", name, flags=re.IGNORECASE)


def load_gguf_path(path: Path) -> LoadedModel:
    from kvcalc.sources.gguf.model import parse_gguf
    from kvcalc.sources.loaded import LoadedModel

    model = read_local(path)
    shape = parse_gguf(model.metadata, name=_stem(path.name), where=model.where,
                       tensors={t.name: t.dims for t in model.tensors()})  # fmt: skip
    weights = model.weights(source=SOURCE_LOCAL)
    return LoadedModel(shape=shape, source="path", location=model.where,
                       _weights=lambda: weights)  # fmt: skip


def load_gguf_hub(
    repo_id: str, choice: str, *, revision: str | None, access: hub.HubAccess
) -> LoadedModel:
    """``choice``: a file name (ends in ``.gguf``) or a quant tag."""
    from kvcalc.sources.gguf.hub import hub_gguf
    from kvcalc.sources.gguf.model import parse_gguf
    from kvcalc.sources.loaded import LoadedModel

    is_file = is_gguf_name(choice)
    found = hub_gguf(repo_id, revision=revision, quant=None if is_file else choice,
                     filename=choice if is_file else None, access=access)  # fmt: skip
    label = f"{repo_id}@{found.revision}/{found.filename}"
    shape = parse_gguf(
        found.model.metadata,
        name=f"{repo_id}:{_stem(Path(found.filename).name)}",
        where=label,
        tensors={t.name: t.dims for t in found.model.tensors()},
    )
    weights = found.model.weights(source=SOURCE_HUB)
    return LoadedModel(shape=shape, source="hub", location=label, revision=found.revision,
                       commit_hash=found.commit, from_cache=found.from_cache,
                       _weights=lambda: weights)  # fmt: skip
