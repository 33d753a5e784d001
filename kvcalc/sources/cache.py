"""Loaded models remembered by what was read, not by what was asked for.

``kvcalc check`` plans many deployments of few models, so one process loads each model once. The
key is the reference with its revision, token and offline mode *and*, for a local model, the path,
modification time and size of its ``config.json`` and of the weight files beside it: after a file
is edited, the same process reads it again. Hub models are keyed on the revision asked for (the
Hub cache itself is keyed on the commit); bundled configs ship with the package and never change.

The cache is an object its owner holds (:data:`kvcalc.planning.api.MODELS` for the CLI and the
library calls that take a reference); a caller that wants its own lifetime makes its own.
"""

from __future__ import annotations

from pathlib import Path

from kvcalc.sources.files import CONFIG_FILE
from kvcalc.sources.resolve import LoadedModel, load_model

#: a file's identity as the cache sees it: resolved path, mtime (ns), size (bytes)
FileStamp = tuple[str, int, int]
_WEIGHT_SUFFIXES = (".safetensors", ".safetensors.index.json")


def file_stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    return str(path.resolve()), st.st_mtime_ns, st.st_size


def local_stamps(reference: str) -> tuple[FileStamp, ...]:
    """What a local reference reads: its config and, for a folder's ``config.json``, the weight
    files beside it. Empty for anything that is not a local file or folder."""
    path = Path(reference.strip()).expanduser()
    try:
        if not path.exists():
            return ()
    except (OSError, ValueError):
        return ()
    config = path / CONFIG_FILE if path.is_dir() else path
    stamps = [file_stamp(config)]
    if config.name == CONFIG_FILE:
        try:
            beside = sorted(config.parent.iterdir())
        except OSError:
            beside = []
        stamps += [file_stamp(p) for p in beside if p.name.endswith(_WEIGHT_SUFFIXES)]
    return tuple(s for s in stamps if s is not None)


class ModelCache:
    """Loaded models, keyed on the reference and on the files a local reference reads."""

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[object, ...], LoadedModel] = {}

    def load(
        self,
        reference: str,
        *,
        revision: str | None = None,
        token: str | None = None,
        offline: bool | None = None,
        trust_layout: bool = False,
    ) -> LoadedModel:
        """:func:`~kvcalc.sources.resolve.load_model`, remembered while the files stay the same."""
        key = (reference, revision, bool(token), offline, trust_layout, local_stamps(reference))
        found = self._entries.get(key)
        if found is None:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            found = load_model(reference, revision=revision, token=token, offline=offline,
                               trust_layout=trust_layout)  # fmt: skip
            self._entries[key] = found
        return found

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
