"""GGUF files on the Hub: only their headers, read with ranged requests and cached.

``org/name --gguf-file NAME.gguf`` names the file; ``org/name:Q4_K_M`` picks it by its quant tag
among the repository's ``.gguf`` files (``mmproj`` projector files left out; the shards of a split
file count as one). The repository's file list and commit come from ``HfApi.model_info``, each
file's size from one bounded ``HEAD``, and the header from ``HfFileSystem`` (``huggingface_hub``'s
fsspec file system), which reads a file in ranged ``GET`` requests: a model of tens of GB costs the
first megabytes of each shard.

Cache: the header bytes of each file, with the file's size, under ``$KVCALC_CACHE_DIR`` (default
``$XDG_CACHE_HOME/kvcalc``, i.e. ``~/.cache/kvcalc``) as ``gguf/models--org--name/headers/<commit>/
<file>`` plus ``refs/<revision>`` → commit — beside, not inside, the Hub cache, whose scanner
would call a folder without snapshots corrupt. Offline (``--offline``, ``HF_HUB_OFFLINE=1``) and
when the Hub cannot be reached, the cached headers are read and the network is not touched.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import BinaryIO

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen
from kvcalc.sources import hub
from kvcalc.sources.gguf.files import GgufModel, check_split, is_gguf_name, shard_names, split_parts
from kvcalc.sources.gguf.header import GgufHeader, read_header
from kvcalc.sources.hub_errors import hub_error, hub_exceptions, is_transient, not_cached

#: fsspec's block size; with ``cache_type='none'`` each read is one ranged GET of what it asks
READ_BLOCK_BYTES = 64 * 1024
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@frozen
class HubGguf:
    model: GgufModel
    repo_id: str
    revision: str
    commit: str
    filename: str
    from_cache: bool


def cache_root() -> Path:
    explicit = os.environ.get("KVCALC_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "kvcalc"


def _repo_dir(repo_id: str) -> Path:
    return cache_root() / "gguf" / ("models--" + repo_id.replace("/", "--"))


class _Recorder:
    """A binary file that keeps a copy of every byte read from it."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.data = bytearray()

    def read(self, size: int = -1) -> bytes:
        piece = self.source.read(size)
        self.data += piece
        return piece


# -- choosing the file ----------------------------------------------------------------------
def pick_file(files: list[str], *, quant: str | None, filename: str | None, where: str) -> str:
    """The (first shard's) name of the GGUF model asked for among ``files``."""
    ggufs = [f for f in files if is_gguf_name(f) and "mmproj" not in f.lower()]
    if filename is not None:
        if filename not in files:
            raise KvcalcError(f"{where} has no file {filename!r}",
                              hint=_listing(ggufs), code="gguf-file-not-found")  # fmt: skip
        return shard_names(filename)[0] if split_parts(Path(filename).name) else filename
    firsts = sorted({_first(f) for f in ggufs})
    if quant is None:
        if len(firsts) == 1:
            return firsts[0]
        raise KvcalcError(f"{where} holds {len(firsts)} GGUF models", hint=_listing(ggufs),
                          code="gguf-ambiguous")  # fmt: skip
    tag = re.compile(rf"(?:^|[-._/]){re.escape(quant)}(?:[-._/]|$)", re.IGNORECASE)
    found = [f for f in firsts if tag.search(_stem(f))]
    if len(found) == 1:
        return found[0]
    if not found:
        raise KvcalcError(f"{where} has no GGUF file with quant tag {quant!r}", hint=_listing(ggufs),
                          code="gguf-file-not-found")  # fmt: skip
    raise KvcalcError(f"{where}: {len(found)} GGUF files match {quant!r}: {', '.join(found[:4])}",
                      hint="name one with --gguf-file", code="gguf-ambiguous")  # fmt: skip


def _first(name: str) -> str:
    folder, _, base = name.rpartition("/")
    first = shard_names(base)[0]
    return f"{folder}/{first}" if folder else first


def _stem(name: str) -> str:
    base = name[: -len(".gguf")]
    return re.sub(r"-\d{5}-of-\d{5}$", "", base)


def _listing(ggufs: list[str]) -> str:
    if not ggufs:
        return "the repository has no .gguf files"
    shown = sorted({_first(f) for f in ggufs})
    more = f" (+{len(shown) - 6} more)" if len(shown) > 6 else ""
    return (
        "GGUF files: " + ", ".join(shown[:6]) + more + "; pick one with --gguf-file or org/name:TAG"
    )


def _shards(first: str) -> list[str]:
    folder, _, base = first.rpartition("/")
    return [f"{folder}/{n}" if folder else n for n in shard_names(base)]


# -- reading --------------------------------------------------------------------------------
def hub_gguf(
    repo_id: str,
    *,
    revision: str | None,
    quant: str | None,
    filename: str | None,
    access: hub.HubAccess,
) -> HubGguf:
    rev = revision or hub.DEFAULT_REVISION
    where = f"{repo_id}@{rev}"
    hub.import_client()
    if access.offline:
        return _from_cache(repo_id, rev, quant, filename, access)
    hub.check_endpoint(access.endpoint)
    try:
        with hub.quiet_client():
            return _online(repo_id, rev, quant, filename, access, where)
    except hub_exceptions() as exc:
        if is_transient(exc):
            try:
                return _from_cache(repo_id, rev, quant, filename, access)
            except KvcalcError:
                pass
        raise hub_error(exc, repo_id=repo_id, revision=rev, access=access,
                        filename=filename or "*.gguf") from None  # fmt: skip


def _online(repo_id: str, rev: str, quant: str | None, filename: str | None,
            access: hub.HubAccess, where: str) -> HubGguf:  # fmt: skip
    from huggingface_hub import HfApi, HfFileSystem, get_hf_file_metadata, hf_hub_url

    api = HfApi(endpoint=access.endpoint, token=access.token, library_name="kvcalc")
    info = api.model_info(repo_id, revision=rev, timeout=access.timeout_s)
    commit = info.sha or rev
    files = [s.rfilename for s in (info.siblings or [])]
    first = pick_file(files, quant=quant, filename=filename, where=where)
    names = _shards(first)
    missing = [n for n in names if n not in files]
    if missing:
        raise KvcalcError(f"{where}: {first} is split in {len(names)} but {missing[0]} is missing",
                          hint="the repository is incomplete; pick another file", code="gguf-missing-shard")  # fmt: skip
    fs = HfFileSystem(endpoint=access.endpoint, token=access.token, skip_instance_cache=True)
    headers, folder = [], _repo_dir(repo_id) / "headers" / commit
    for name in names:
        url = hf_hub_url(repo_id, name, revision=commit, endpoint=access.endpoint)
        meta = get_hf_file_metadata(url, token=access.token, timeout=access.timeout_s,
                                    endpoint=access.endpoint, library_name="kvcalc")  # fmt: skip
        size = int(meta.size or 0)
        label = f"{where}/{name}"
        with fs.open(f"{repo_id}/{name}", "rb", revision=commit, size=size,
                     block_size=READ_BLOCK_BYTES, cache_type="none") as remote:  # fmt: skip
            recorder = _Recorder(remote)
            header = read_header(recorder, size=size, where=label)  # type: ignore[arg-type]
        headers.append(header)
        _store(folder / name, bytes(recorder.data[: header.header_bytes]), size)
    check_split(headers, names, where)
    refs = _repo_dir(repo_id) / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    (refs / _ref_name(rev, quant, filename)).write_text(commit)
    return HubGguf(model=GgufModel(headers=tuple(headers), files=tuple(names), where=f"{where}/{first}"),
                   repo_id=repo_id, revision=rev, commit=commit, filename=first, from_cache=False)  # fmt: skip


def _ref_name(rev: str, quant: str | None, filename: str | None) -> str:
    """One ref per revision and choice, so an offline ``org/name:Q8_0`` finds what it picked."""
    choice = f"file={filename}" if filename else f"quant={quant}" if quant else "only"
    return re.sub(r"[^\w.=-]", "_", f"{rev}@{choice}")


def _store(path: Path, data: bytes, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.with_name(path.name + ".json").write_text(json.dumps({"size": size}))


def _from_cache(repo_id: str, rev: str, quant: str | None, filename: str | None,
                access: hub.HubAccess) -> HubGguf:  # fmt: skip
    base = _repo_dir(repo_id)
    ref = base / "refs" / _ref_name(rev, quant, filename)
    commit = rev if _COMMIT.match(rev) else (ref.read_text().strip() if ref.is_file() else None)
    folder = base / "headers" / commit if commit else None
    if folder is None or not folder.is_dir():
        raise not_cached(repo_id, rev, access)
    files = [p.relative_to(folder).as_posix() for p in folder.rglob("*.gguf")]
    first = pick_file(files, quant=quant, filename=filename, where=f"{repo_id}@{rev} (cached)")
    headers: list[GgufHeader] = []
    for name in _shards(first):
        path = folder / name
        try:
            size = int(json.loads(path.with_name(path.name + ".json").read_text())["size"])
            with path.open("rb") as f:
                headers.append(read_header(f, size=size, where=f"{repo_id}@{rev}/{name} (cached)"))
        except (OSError, ValueError, KeyError, TypeError):
            raise not_cached(repo_id, rev, access) from None
    names = _shards(first)
    check_split(headers, names, f"{repo_id}@{rev}")
    return HubGguf(model=GgufModel(headers=tuple(headers), files=tuple(names), where=f"{repo_id}@{rev}/{first}"),
                   repo_id=repo_id, revision=rev, commit=str(commit), filename=first, from_cache=True)  # fmt: skip
