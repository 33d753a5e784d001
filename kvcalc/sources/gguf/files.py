"""GGUF files on disk: one file, or the shards of a split model read as one, and their weights.

A split model (``llama-gguf-split``) is ``NAME-00001-of-00003.gguf`` ... ``-00003-of-00003.gguf``;
the first shard holds the model's metadata, every shard its own tensors (``split.count``,
``split.no`` and ``split.tensors.count`` say how they fit). Passing any shard reads all of them.

Weights are exact: each tensor's bytes follow from its ggml type and shape (``ne[0] / block ×
block bytes × rows``, the ``gguf`` package's ``GGML_QUANT_SIZES``), summed per type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen
from kvcalc.sources.gguf.header import GgufHeader, TensorInfo, invalid, read_header
from kvcalc.sources.safetensors_meta import SafetensorsWeights, TensorEntry, summarize

SUFFIX = ".gguf"
SOURCE_LOCAL = "gguf header (local)"
SOURCE_HUB = "gguf header (hub)"
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def is_gguf_name(name: str) -> bool:
    return name.lower().endswith(SUFFIX)


def split_parts(name: str) -> tuple[str, int, int] | None:
    """``("NAME", no, count)`` for ``NAME-0000no-of-0000count.gguf``, else ``None``."""
    match = _SPLIT.match(name)
    if not match:
        return None
    return match["stem"], int(match["no"]), int(match["count"])


def shard_names(name: str) -> list[str]:
    """Every shard's file name for one shard's name (just ``name`` when it is not split)."""
    parts = split_parts(name)
    if parts is None:
        return [name]
    stem, _, count = parts
    return [f"{stem}-{i:05d}-of-{count:05d}{SUFFIX}" for i in range(1, count + 1)]


@frozen
class GgufModel:
    """The headers of every file of one model, the first holding its metadata."""

    headers: tuple[GgufHeader, ...]
    files: tuple[str, ...]
    where: str

    @property
    def metadata(self):
        return self.headers[0].metadata

    def tensors(self) -> Iterable[TensorInfo]:
        for header in self.headers:
            yield from header.tensors

    def weights(self, *, source: str) -> SafetensorsWeights:
        entries = (
            TensorEntry(
                name=t.name, dtype=t.ggml_type, shape=tuple(reversed(t.dims)), nbytes=t.nbytes
            )
            for t in self.tensors()
        )
        return summarize(entries, files=self.files, source=source)


def check_split(headers: list[GgufHeader], files: list[str], where: str) -> None:
    """Shards that agree with their ``split.*`` keys."""
    if len(headers) == 1 and "split.count" not in headers[0].metadata:
        return
    count = headers[0].metadata.get("split.count")
    if count != len(headers):
        raise invalid(where, f"split.count = {count!r} but {len(headers)} shard file(s) were found")
    declared = headers[0].metadata.get("split.tensors.count")
    found = sum(len(h.tensors) for h in headers)
    if declared is not None and declared != found:
        raise invalid(
            where, f"split.tensors.count = {declared!r} but the shards hold {found} tensors"
        )
    for i, header in enumerate(headers):
        if header.metadata.get("split.no", i) != i:
            raise invalid(files[i], f"split.no = {header.metadata.get('split.no')!r}, expected {i}")


def read_local(path: Path) -> GgufModel:
    """Read the header of ``path`` and, for a shard, of every shard beside it."""
    names = shard_names(path.name)
    paths = [path.with_name(name) for name in names]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise KvcalcError(
            f"{path} is shard {split_parts(path.name)[1] if split_parts(path.name) else 1} of "  # type: ignore[index]
            f"{len(names)}, but {len(missing)} shard(s) are missing, e.g. {missing[0]}",
            hint="download every shard into the same folder",
            code="gguf-missing-shard",
        )
    headers = [_read_file(p) for p in paths]
    check_split(headers, [str(p) for p in paths], str(path))
    return GgufModel(headers=tuple(headers), files=tuple(names), where=str(paths[0]))


def _read_file(path: Path) -> GgufHeader:
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            return read_header(f, size=size, where=str(path))
    except OSError as exc:
        raise KvcalcError(f"cannot read {path}: {exc.strerror or exc}",
                          hint="check the file's permissions", code="config-unreadable") from None  # fmt: skip
