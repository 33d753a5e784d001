"""The safetensors files of a local checkpoint: which files hold the weights (the index's shards,
else ``model.safetensors``, else every ``*.safetensors``), and their headers, read without the data.
Parsing is :mod:`kvcalc.sources.safetensors_meta`'s.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvcalc.errors import KvcalcError
from kvcalc.sources.safetensors_meta import (
    INDEX_FILE,
    LENGTH_PREFIX_BYTES,
    MAX_INDEX_BYTES,
    SINGLE_FILE,
    SOURCE_LOCAL,
    SafetensorsWeights,
    TensorEntry,
    header_length,
    invalid,
    parse_header,
    shown_value,
    summarize,
    unreadable,
)


def read_header(path: Path) -> tuple[TensorEntry, ...]:
    """Read only the header of one ``.safetensors`` file (never its data)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            length = header_length(
                f.read(LENGTH_PREFIX_BYTES), where=str(path), file_size_bytes=size
            )
            raw = f.read(length)
    except OSError as exc:
        raise unreadable(path, exc) from None
    if len(raw) < length:
        raise invalid(str(path), "file is truncated")
    return parse_header(raw, where=str(path), data_size_bytes=size - LENGTH_PREFIX_BYTES - length)


def local_weight_files(folder: Path) -> list[Path]:
    """The checkpoint files of ``folder``: the index's shards, else ``model.safetensors``, else
    every ``*.safetensors`` file. Empty when there are none."""
    index = folder / INDEX_FILE
    if index.is_file():
        shards = _index_shards(index)
        missing = [name for name in shards if not _is_file(folder / name)]
        if missing:
            raise KvcalcError(
                f"{index} lists {len(missing)} shard(s) missing from the folder, "
                f"e.g. {shown_value(missing[0])}",
                hint="download every shard, or remove the index to size only the files present",
                code="safetensors-missing-shard",
            )
        return [folder / name for name in shards]
    if (folder / SINGLE_FILE).is_file():
        return [folder / SINGLE_FILE]
    return sorted(p for p in folder.glob("*.safetensors") if p.is_file())


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte...
        return False


def _index_shards(index: Path) -> list[str]:
    try:
        if index.stat().st_size > MAX_INDEX_BYTES:
            raise invalid(str(index), f"index over {MAX_INDEX_BYTES:,} bytes")
        data = json.loads(index.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise unreadable(index, exc) from None
    except ValueError as exc:  # includes UnicodeDecodeError
        raise invalid(str(index), f"index is not JSON: {exc}") from None
    except RecursionError:
        raise invalid(str(index), "index JSON nested too deeply") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise invalid(str(index), "index has no weight_map of tensor -> file")
    shards = sorted(set(weight_map.values()))
    if any(Path(name).is_absolute() or ".." in Path(name).parts for name in shards):
        raise invalid(str(index), "a shard path leaves the model folder")
    return shards


def read_local_weights(folder: Path) -> SafetensorsWeights | None:
    """Exact weights of the checkpoint in ``folder``; ``None`` when it has no safetensors files."""
    files = local_weight_files(folder)
    if not files:
        return None
    tensors = [tensor for path in files for tensor in read_header(path)]
    return summarize(tensors, files=[p.name for p in files], source=SOURCE_LOCAL)
