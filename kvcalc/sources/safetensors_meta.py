"""Weights exactly as stored: parameters and bytes per dtype, read from safetensors headers.

A safetensors file opens with an 8-byte little-endian length ``N`` and ``N`` bytes of JSON that
name every tensor with its ``dtype``, ``shape`` and ``data_offsets`` ``[begin, end)`` into the
data that follows. The offsets give each tensor's stored bytes exactly, whatever the format:
an fp8 checkpoint is ``F8_E4M3`` plus its ``F32`` scales, an int4 (GPTQ/AWQ) checkpoint packs
eight values per ``I32`` element, and mxfp4 stores ``U8`` blocks with ``U8`` (E8M0) scales. So
kvcalc never guesses bytes per parameter: it adds up what the headers say.

Worked example: a ``(4096, 4096)`` ``BF16`` tensor holds 16,777,216 elements x 2 bytes =
33,554,432 bytes, so its ``data_offsets`` span exactly 33,554,432.

"Parameters" here are *stored elements*: a packed ``I32`` holding eight int4 weights counts
once. Tensors whose name contains ``experts`` (but not ``shared_experts``, which every token
uses) are routed MoE experts and are summed separately.

Parsing (:func:`parse_header`, :func:`summarize`, :func:`from_hub_metadata`) is pure; the
functions that open files (``read_header``, ``read_local_weights``) are in
:mod:`kvcalc.sources.safetensors_files`.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, NamedTuple

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen

#: The largest header kvcalc accepts (real ones are well under 10 MB).
MAX_HEADER_BYTES = 100 * 1024 * 1024
#: The largest ``model.safetensors.index.json`` kvcalc reads (DeepSeek-V3's is about 9 MB).
MAX_INDEX_BYTES = 64 * 1024 * 1024
LENGTH_PREFIX_BYTES = 8
#: dimensions, offsets and element counts are 64-bit in the format; larger numbers are corrupt
MAX_COUNT = 1 << 64
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
SOURCE_HUB = "safetensors metadata (hub)"
SOURCE_LOCAL = "safetensors metadata (local)"

#: Bits per element of each safetensors dtype. Unknown dtypes are still sized by their offsets.
DTYPE_BITS: Mapping[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U16": 16,
    "I16": 16,
    "F16": 16,
    "BF16": 16,
    "U32": 32,
    "I32": 32,
    "F32": 32,
    "U64": 64,
    "I64": 64,
    "F64": 64,
    "C64": 64,
}


class DtypeTotal(NamedTuple):
    """Stored elements and bytes of one dtype."""

    num_parameters: int
    total_bytes: int


@frozen
class TensorEntry:
    """One tensor of a safetensors header."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    #: ``end - begin`` of its ``data_offsets``: the bytes it takes on disk (and in memory)
    nbytes: int

    @property
    def num_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def is_routed_expert(self) -> bool:
        # safetensors: ``...mlp.experts.3.w1``; GGUF: ``blk.3.ffn_gate_exps.weight`` (shared
        # experts: ``shared_experts`` / ``ffn_gate_shexp``)
        return (
            "experts" in self.name and "shared_experts" not in self.name
        ) or "_exps." in self.name


@frozen
class SafetensorsWeights:
    """A checkpoint's weights as its safetensors headers describe them."""

    total_bytes: int
    #: stored elements (a packed int4 ``I32`` counts once)
    num_parameters: int
    by_dtype: Mapping[str, DtypeTotal]
    #: routed MoE experts (names with ``experts``, not ``shared_experts``)
    experts_bytes: int
    non_expert_bytes: int
    num_tensors: int
    files: tuple[str, ...]
    #: ``"safetensors metadata (hub)"`` or ``"safetensors metadata (local)"``
    source: str
    #: (bytes, routed-expert bytes) per decoder layer index, from ``model.layers.N.`` names
    #: (``layers.N.``, ``model.language_model.layers.N.`` too)
    layer_bytes: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: (bytes, routed-expert bytes) of the tensors under an MTP prefix (``mtp.``,
    #: ``model.mtp_layers.``, ``model.mtp.``): modules the target model never loads
    mtp_prefixed_bytes: tuple[int, int] = (0, 0)

    def mtp_bytes(self, num_hidden_layers: int, num_mtp_layers: int) -> tuple[int, int]:
        """(bytes, routed-expert bytes) of the checkpoint's MTP modules, which vLLM's target model
        skips: layers ``num_hidden_layers`` .. ``+ num_mtp_layers - 1`` (``models/utils.py``
        ``get_spec_layer_idx_from_weight_name``, ``deepseek_v2.py`` ``load_weights``) and the
        prefixes its ``WeightsMapper`` drops (``qwen3_next.py`` ``mtp.``, ``mimo.py``
        ``model.mtp_layers.``)."""
        total, experts = self.mtp_prefixed_bytes
        for index in range(num_hidden_layers, num_hidden_layers + num_mtp_layers):
            layer_total, layer_experts = self.layer_bytes.get(index, (0, 0))
            total, experts = total + layer_total, experts + layer_experts
        return total, experts

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_bytes": self.total_bytes,
            "num_parameters": self.num_parameters,
            "by_dtype": {
                k: {"num_parameters": v.num_parameters, "total_bytes": v.total_bytes}
                for k, v in self.by_dtype.items()
            },
            "experts_bytes": self.experts_bytes,
            "non_expert_bytes": self.non_expert_bytes,
            "num_tensors": self.num_tensors,
            "files": list(self.files),
            "source": self.source,
        }


def invalid(where: str, problem: str) -> KvcalcError:
    return KvcalcError(
        f"{where}: not a valid safetensors header ({problem})",
        hint="the file may be truncated or not a safetensors file; re-download it",
        code="safetensors-invalid",
    )


def unreadable(path: Path, exc: OSError) -> KvcalcError:
    return KvcalcError(
        f"cannot read {path}: {exc.strerror or exc}",
        hint="check the file's permissions; `inspect --no-weights` or `--weights-memory` skips it",
        code="safetensors-unreadable",
    )


# -- pure parsing ---------------------------------------------------------------------------
def header_length(prefix: bytes, *, where: str, file_size_bytes: int | None = None) -> int:
    """The JSON header's length from the first 8 bytes, checked against the bound and file size."""
    if len(prefix) < LENGTH_PREFIX_BYTES:
        raise invalid(where, f"{len(prefix)} bytes, shorter than the 8-byte length prefix")
    (length,) = struct.unpack("<Q", prefix[:LENGTH_PREFIX_BYTES])
    if length < 2:
        raise invalid(where, f"header length {length}")
    if length > MAX_HEADER_BYTES:
        raise invalid(
            where, f"header of {length:,} bytes, over the {MAX_HEADER_BYTES:,}-byte limit"
        )
    if file_size_bytes is not None and length > file_size_bytes - LENGTH_PREFIX_BYTES:
        raise invalid(where, f"header of {length:,} bytes in a {file_size_bytes:,}-byte file")
    return length


def parse_header(
    raw: bytes, *, where: str, data_size_bytes: int | None = None
) -> tuple[TensorEntry, ...]:
    """The tensors of one JSON header. ``data_size_bytes``: the data after it, when known."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise invalid(where, "header is not UTF-8") from None
    except ValueError as exc:
        raise invalid(where, f"header is not JSON: {exc}") from None
    except RecursionError:
        raise invalid(where, "header JSON nested too deeply") from None
    if not isinstance(header, dict):
        raise invalid(where, "header is not a JSON object")
    return tuple(
        tensor_entry(name, info, where=where, data_size_bytes=data_size_bytes)
        for name, info in header.items()
        if name != "__metadata__"
    )


def tensor_entry(
    name: str, info: Any, *, where: str, data_size_bytes: int | None = None
) -> TensorEntry:
    """Validate one header entry: dtype, shape, offsets, and bytes that match dtype x shape."""
    shown = shown_value(name)
    if not isinstance(info, Mapping):
        raise invalid(where, f"entry {shown} is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or not dtype:
        raise invalid(where, f"tensor {shown} has no dtype")
    if not isinstance(shape, (list, tuple)) or not all(_is_count(d) for d in shape):
        raise invalid(where, f"tensor {shown} has shape {shown_value(shape)}")
    if (
        not isinstance(offsets, (list, tuple))
        or len(offsets) != 2
        or not all(_is_count(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise invalid(where, f"tensor {shown} has data_offsets {shown_value(offsets)}")
    if data_size_bytes is not None and offsets[1] > data_size_bytes:
        raise invalid(where, f"tensor {shown} ends at byte {offsets[1]:,}, past the data")
    entry = TensorEntry(name=name, dtype=dtype, shape=tuple(shape), nbytes=offsets[1] - offsets[0])
    if any(d == 0 for d in shape):
        elements = 0
    elif sum(d.bit_length() for d in shape) > MAX_COUNT.bit_length() + 1:
        raise invalid(where, f"tensor {shown} has shape {shown_value(shape)}: too many elements")
    else:
        elements = entry.num_elements
        if elements >= MAX_COUNT:
            raise invalid(
                where, f"tensor {shown} has shape {shown_value(shape)}: too many elements"
            )
    bits = DTYPE_BITS.get(dtype)
    if bits is not None and elements * bits != entry.nbytes * 8:
        raise invalid(
            where,
            f"tensor {shown}: {elements:,} {shown_value(dtype)} elements need "
            f"{elements * bits / 8:,g} bytes, its offsets span {entry.nbytes:,}",
        )
    return entry


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT


def shown_value(value: Any, limit: int = 60) -> str:
    """A short ``repr`` for messages: names and lists in a header can be megabytes long."""
    try:
        if isinstance(value, (list, tuple)) and len(value) > 8:
            text = "[" + ", ".join(repr(v) for v in value[:8]) + f", ... ({len(value):,} entries)]"
        else:
            text = repr(value)
    except ValueError:  # an int too long to print
        return "a number too large to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


_LAYER = re.compile(r"(?:model\.(?:language_model\.)?)?layers\.(\d+)\.")
_MTP_PREFIXES = ("mtp.", "model.mtp_layers.", "model.mtp.")


def summarize(
    tensors: Iterable[TensorEntry], *, files: Iterable[str], source: str
) -> SafetensorsWeights:
    """Add up tensors per dtype and split routed experts from the rest."""
    by_dtype: dict[str, list[int]] = {}
    layers: dict[int, list[int]] = {}
    mtp = [0, 0]
    total = experts = count = params = 0
    for tensor in tensors:
        expert = tensor.nbytes if tensor.is_routed_expert else 0
        if tensor.name.startswith(_MTP_PREFIXES):
            mtp[0], mtp[1] = mtp[0] + tensor.nbytes, mtp[1] + expert
        elif (m := _LAYER.match(tensor.name)) is not None:
            acc_layer = layers.setdefault(int(m[1]), [0, 0])
            acc_layer[0], acc_layer[1] = acc_layer[0] + tensor.nbytes, acc_layer[1] + expert
        acc = by_dtype.setdefault(tensor.dtype, [0, 0])
        acc[0] += tensor.num_elements
        acc[1] += tensor.nbytes
        total += tensor.nbytes
        params += tensor.num_elements
        experts += tensor.nbytes if tensor.is_routed_expert else 0
        count += 1
    return SafetensorsWeights(
        total_bytes=total,
        num_parameters=params,
        by_dtype={k: DtypeTotal(*v) for k, v in sorted(by_dtype.items(), key=lambda kv: -kv[1][1])},
        experts_bytes=experts,
        non_expert_bytes=total - experts,
        num_tensors=count,
        files=tuple(files),
        source=source,
        layer_bytes={k: (v[0], v[1]) for k, v in sorted(layers.items())},
        mtp_prefixed_bytes=(mtp[0], mtp[1]),
    )


def from_hub_metadata(meta: Any, *, where: str) -> SafetensorsWeights:
    """Convert ``huggingface_hub``'s ``SafetensorsRepoMetadata`` (duck-typed: no import needed)."""
    tensors = [
        tensor_entry(
            name,
            {
                "dtype": info.dtype,
                "shape": list(info.shape),
                "data_offsets": list(info.data_offsets),
            },
            where=f"{where}/{filename}",
        )
        for filename, file_meta in sorted(meta.files_metadata.items())
        for name, info in file_meta.tensors.items()
    ]
    return summarize(tensors, files=sorted(meta.files_metadata), source=SOURCE_HUB)
