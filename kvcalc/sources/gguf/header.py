"""The header of a GGUF file — metadata and tensor infos, never tensor data — read in bounded memory.

A GGUF file (``ggml/src/gguf.cpp``, ``gguf-py``'s ``GGUFReader``) is::

    magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
    kv_count × (key: string, value_type u32, value)
    tensor_count × (name: string, n_dims u32, n_dims × u64, ggml_type u32, offset u64)
    padding to general.alignment (32 by default) | tensor data

Strings are a u64 length and that many UTF-8 bytes; arrays a u32 item type, a u64 count and the
items. Value types, ggml type numbers, block sizes and the magic come from the ``gguf`` package's
own tables (:mod:`gguf.constants`). Its ``GGUFReader`` is not used to read: it memory-maps the
whole file and builds a view of every tensor's data, so it cannot read a header alone (the Hub
case, where only the first megabytes are fetched), and it walks an array's declared count before
looking at what is left of the file. This reader checks every declared length and count against
the bytes that remain before it reads, so a lying file costs one error, not gigabytes; big arrays
(the tokenizer's vocabulary and merges) are skipped, keeping only their type and length.

Errors are ``gguf-not-gguf`` (wrong magic), ``gguf-truncated`` (the file ends inside the header)
and ``gguf-invalid`` (anything else malformed), each one line naming the file and the offset.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen

#: arrays longer than this keep only their type and length (per-layer arrays are far shorter)
MAX_KEPT_ARRAY = 4096
#: strings longer than this keep only their length (chat templates are tens of kB)
MAX_KEPT_STRING = 1 << 20
#: a header larger than this is refused (real ones, tokenizer included, are under 50 MB)
MAX_HEADER_BYTES = 512 * 1024 * 1024
#: tensor names, keys: far below this in every real file
MAX_NAME_BYTES = 64 * 1024
#: read from the source in pieces of this size at first, doubling up to MAX_CHUNK_BYTES (one
#: ranged request each on the Hub: a small header costs one request, a 10 MB vocabulary a few)
CHUNK_BYTES = 64 * 1024
MAX_CHUNK_BYTES = 4 << 20
#: GGML_MAX_DIMS
MAX_DIMS = 4
#: general.alignment when the file does not set it (GGUF_DEFAULT_ALIGNMENT)
DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class Skipped:
    """A value too long to keep (a tokenizer list, a long string): its type name and length."""

    value_type: str
    length: int


@frozen
class TensorInfo:
    """One tensor's entry: name, ggml type, dimensions (ggml order: ``ne[0]`` first), offset."""

    name: str
    ggml_type: str
    dims: tuple[int, ...]
    offset: int
    nbytes: int

    @property
    def num_elements(self) -> int:
        count = 1
        for dim in self.dims:
            count *= dim
        return count


@frozen
class GgufHeader:
    version: int
    metadata: Mapping[str, Any]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    #: bytes from the start of the file to the end of the tensor infos (the header proper)
    header_bytes: int
    #: where tensor data begins (``header_bytes`` rounded up to ``alignment``)
    data_offset: int


_HINT = "the file may be truncated or damaged; re-download it (gguf-dump shows its header)"


def invalid(where: str, problem: str) -> KvcalcError:
    return KvcalcError(
        f"{where}: not a valid GGUF file ({problem})", hint=_HINT, code="gguf-invalid"
    )


def truncated(where: str, problem: str) -> KvcalcError:
    return KvcalcError(
        f"{where}: not a valid GGUF file ({problem})", hint=_HINT, code="gguf-truncated"
    )


def not_gguf(where: str) -> KvcalcError:
    return KvcalcError(f"{where}: not a GGUF file (it does not start with the GGUF magic)",
                       hint="check that the file is a GGUF model (not an HTML page or another format)",
                       code="gguf-not-gguf")  # fmt: skip


class _Cursor:
    """Sequential reads from a binary file, checked against the bytes that remain."""

    def __init__(self, source: BinaryIO, *, size: int, where: str) -> None:
        self.source = source
        self.size = size
        self.where = where
        self.pos = 0
        self.buf = b""
        self.buf_start = 0
        self.order = "<"
        self.chunk = CHUNK_BYTES

    def remaining(self) -> int:
        return self.size - self.pos

    def need(self, count: int, what: str) -> None:
        if count > self.remaining():
            raise truncated(
                self.where,
                f"{what} at offset {self.pos:,} needs {count:,} bytes, the file has "
                f"{max(0, self.remaining()):,} left",
            )
        if self.pos + count > MAX_HEADER_BYTES:
            raise invalid(self.where, f"header over {MAX_HEADER_BYTES >> 20} MiB")

    def _ensure(self, count: int, what: str) -> int:
        """Buffer the ``count`` bytes at ``pos`` (reading on, discarding what was skipped) and
        return where they start in the buffer."""
        self.need(count, what)
        end = self.pos + count
        while end > self.buf_start + len(self.buf):
            have = self.buf_start + len(self.buf)
            piece = self.source.read(min(max(self.chunk, end - have), self.size - have))
            self.chunk = min(self.chunk * 2, MAX_CHUNK_BYTES)
            if not piece:
                raise truncated(self.where, f"{what} at offset {self.pos:,}: file ends early")
            if self.pos >= have:  # skipped past the buffer: keep the piece from pos on
                drop = min(self.pos - have, len(piece))
                self.buf, self.buf_start = piece[drop:], have + drop
            else:
                self.buf = self.buf[self.pos - self.buf_start :] + piece
                self.buf_start = self.pos
        return self.pos - self.buf_start

    def read(self, count: int, what: str) -> bytes:
        start = self._ensure(count, what)
        self.pos += count
        return self.buf[start : start + count]

    def unpack(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(self.order + fmt, self.read(size, what))[0]

    def string(self, what: str, *, limit: int | None = None) -> str | int:
        """A string, or its length when it is longer than ``limit``."""
        length = self.unpack("Q", f"{what} length")
        self.need(length, f"{what} of {length:,} bytes")
        if limit is not None and length > limit:
            self.skip(length, what)
            return length
        raw = self.read(length, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid(
                self.where, f"{what} at offset {self.pos - length:,} is not UTF-8"
            ) from None

    def skip(self, count: int, what: str) -> None:
        """Move past ``count`` bytes; they are read (and dropped) by the next read."""
        self.need(count, what)
        self.pos += count

    def skip_strings(self, count: int, what: str) -> None:
        """Move past ``count`` strings (a tokenizer's vocabulary), each length checked."""
        fmt = self.order + "Q"
        for _ in range(count):
            start = self._ensure(8, what)
            (length,) = struct.unpack_from(fmt, self.buf, start)
            self.pos += 8
            self.need(length, what)
            self.pos += length


def _value_types() -> tuple[dict[int, str], dict[int, str]]:
    """``GGUFValueType`` numbers → struct formats (scalars) and names."""
    from gguf.constants import GGUFValueType as T

    formats = {T.UINT8: "B", T.INT8: "b", T.UINT16: "H", T.INT16: "h", T.UINT32: "I",
               T.INT32: "i", T.FLOAT32: "f", T.BOOL: "?", T.UINT64: "Q", T.INT64: "q",
               T.FLOAT64: "d"}  # fmt: skip
    return {int(k): v for k, v in formats.items()}, {int(t): t.name for t in T}


def read_header(source: BinaryIO, *, size: int, where: str) -> GgufHeader:
    """Parse the header of the GGUF file ``source`` (``size`` bytes long) from its start."""
    from gguf.constants import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType, GGUFValueType

    formats, names = _value_types()
    c = _Cursor(source, size=size, where=where)
    if size < 4 or struct.unpack("<I", c.read(4, "magic"))[0] != GGUF_MAGIC:
        raise not_gguf(where)
    version = c.unpack("I", "version")
    if version & 0xFFFF == 0 and version:  # written on a big-endian machine
        c.order = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise invalid(where, f"GGUF version {version}; kvcalc reads versions 2 and 3")
    tensor_count = c.unpack("Q", "tensor count")
    kv_count = c.unpack("Q", "key count")
    # each key takes at least 12 bytes (length + type), each tensor info at least 24
    if kv_count * 12 > c.remaining() or tensor_count * 24 > c.remaining():
        raise truncated(where, f"it declares {kv_count:,} keys and {tensor_count:,} tensors, "
                      f"more than its {size:,} bytes can hold")  # fmt: skip

    def value(vtype: int, what: str) -> Any:
        if vtype in formats:
            return c.unpack(formats[vtype], what)
        if vtype == GGUFValueType.STRING:
            text = c.string(what, limit=MAX_KEPT_STRING)
            return text if isinstance(text, str) else Skipped("STRING", text)
        if vtype == GGUFValueType.ARRAY:
            item = c.unpack("I", f"{what} item type")
            length = c.unpack("Q", f"{what} length")
            if item not in names or item == GGUFValueType.ARRAY:
                raise invalid(where, f"{what}: array of value type {item}")
            least = struct.calcsize(formats[item]) if item in formats else 8
            c.need(length * least, f"{what}: array of {length:,} items")
            if length <= MAX_KEPT_ARRAY:
                return tuple(value(item, what) for _ in range(length))
            if item in formats:
                c.skip(least * length, what)
            else:  # strings: each its own length
                c.skip_strings(length, what)
            return Skipped(f"ARRAY[{names[item]}]", length)
        raise invalid(where, f"{what}: unknown value type {vtype}")

    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = c.string("key", limit=MAX_NAME_BYTES)
        if not isinstance(key, str):
            raise invalid(where, f"a key of {key:,} bytes")
        if key in metadata:
            raise invalid(where, f"key {key!r} appears twice")
        metadata[key] = value(c.unpack("I", f"type of {key}"), key)

    tensors: list[TensorInfo] = []
    seen: set[str] = set()
    for _ in range(tensor_count):
        name = c.string("tensor name", limit=MAX_NAME_BYTES)
        if not isinstance(name, str):
            raise invalid(where, f"a tensor name of {name:,} bytes")
        if name in seen:
            raise invalid(where, f"tensor {name!r} appears twice")
        seen.add(name)
        n_dims = c.unpack("I", f"{name} dimension count")
        if n_dims > MAX_DIMS:
            raise invalid(where, f"tensor {name!r} has {n_dims} dimensions (at most {MAX_DIMS})")
        dims = tuple(c.unpack("Q", f"{name} dimension") for _ in range(n_dims))
        raw_type = c.unpack("I", f"{name} type")
        offset = c.unpack("Q", f"{name} offset")
        try:
            ggml_type = GGMLQuantizationType(raw_type)
        except ValueError:
            raise invalid(where, f"tensor {name!r} has unknown ggml type {raw_type}") from None
        block, type_bytes = GGML_QUANT_SIZES[ggml_type]
        count = 1
        for dim in dims:
            count *= dim
        if dims and dims[0] % block:
            raise invalid(where, f"tensor {name!r}: {dims[0]} values per row, not a multiple "
                          f"of {ggml_type.name}'s block of {block}")  # fmt: skip
        tensors.append(TensorInfo(name=name, ggml_type=ggml_type.name, dims=dims, offset=offset,
                                  nbytes=count // block * type_bytes))  # fmt: skip

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise invalid(where, f"general.alignment = {alignment!r}, not a power of two")
    data_offset = -(c.pos // -alignment) * alignment
    data_bytes = size - data_offset
    for t in tensors:
        if t.offset % alignment:
            raise invalid(where, f"tensor {t.name!r} at data offset {t.offset:,}, not a multiple "
                          f"of the alignment {alignment}")  # fmt: skip
        if t.offset + t.nbytes > data_bytes:
            raise truncated(where, f"tensor {t.name!r} at data offset {t.offset:,} ({t.nbytes:,} "
                            f"bytes) lies outside the {max(0, data_bytes):,} data bytes")  # fmt: skip
    return GgufHeader(version=version, metadata=metadata, tensors=tuple(tensors),
                      alignment=alignment, header_bytes=c.pos, data_offset=data_offset)  # fmt: skip
