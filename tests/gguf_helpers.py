"""GGUF files the tests write themselves with the ``gguf`` package's own writer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf import GGUFWriter
from gguf.quants import quant_shape_to_byte_shape


def write_gguf(
    path: Path,
    arch: str,
    keys: Mapping[str, Any],
    tensors: Sequence[tuple[str, tuple[int, ...], Q]] = (),
    *,
    split_max_tensors: int = 0,
) -> Path:
    """Write ``keys`` (full names; ints as uint32, bools, strings, floats, lists as arrays) and
    zero-filled ``tensors`` (numpy shape: rows first, the row width last) to ``path``."""
    writer = GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    for key, value in keys.items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, tuple) and value and value[0] == "int32[]":
            writer.add_key_value(key, list(value[1]), V.ARRAY, sub_type=V.INT32)
        else:
            writer.add_array(key, list(value))
    for name, shape, qtype in tensors:
        if qtype == Q.F32:
            data = np.zeros(shape, np.float32)
        elif qtype == Q.F16:
            data = np.zeros(shape, np.float16)
        else:
            data = np.zeros(quant_shape_to_byte_shape(shape, qtype), np.uint8)
        writer.add_tensor(name, data, raw_dtype=None if qtype in (Q.F32, Q.F16) else qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def llama_keys(arch: str = "llama", *, layers: int = 2, heads: int = 4, kv_heads: Any = 2,
               hidden: int = 256, head_dim: int | None = None, context: int = 4096) -> dict[str, Any]:  # fmt: skip
    keys: dict[str, Any] = {
        f"{arch}.block_count": layers,
        f"{arch}.context_length": context,
        f"{arch}.embedding_length": hidden,
        f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv_heads,
    }
    if head_dim is not None:
        keys[f"{arch}.attention.key_length"] = head_dim
        keys[f"{arch}.attention.value_length"] = head_dim
    return keys
