"""llama.cpp's sequence state (``llama_state_seq_get_data``), read back for its row bytes.

After one decoded token the state of sequence 0 holds ``io_magic`` and the sequence id, then the
memory's own ``state_write``: per KV cache (``llama_kv_cache::state_write``) the stream count,
each stream's cells and their meta, each layer's type, row size and data; for the recurrent memory
(``llama_memory_recurrent::state_write``) the cell count, the cells' meta, ``s_trans``, the layer
count, then every layer's R (type, row size, data) and every layer's S.
"""

from __future__ import annotations

import struct
from typing import Any

from kvcalc.engines.llamacpp.recurrent import RecurrentMemory
from kvcalc.errors import KvcalcError
from kvcalc.verify.result import ComponentResult, relative_error

#: ``io_magic`` of ``llama_context::state_seq_get_data``
STATE_MAGIC = 0xAF143CD8


class _Reader:
    def __init__(self, blob: bytes) -> None:
        if struct.unpack_from("<I", blob)[0] != STATE_MAGIC:
            raise KvcalcError("llama.cpp's sequence state does not start with its magic",
                              hint="please report this with the command line", code="internal")  # fmt: skip
        self.blob, self.pos = blob, 8

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from("<" + fmt, self.blob, self.pos)
        self.pos += struct.calcsize(fmt)
        return value[0]


def parse_recurrent_state(
    blob: bytes, n_layers: int | None = None
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(cells, R row bytes per layer, S row bytes per layer) of a recurrent memory's state."""
    return _recurrent(_Reader(blob), n_layers)


def _recurrent(r: _Reader, n_layers: int | None) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """``llama_memory_recurrent::state_write`` from ``r``'s position: ``n_layers`` is the number of
    layers with a state (the header's layer count is the model's, skipped layers write nothing);
    ``None`` reads as many as the header says, or up to the end."""
    blob = r.blob
    cells = r.take("I")
    for _ in range(cells):
        r.take("i")  # pos
        n_seq = r.take("I")
        r.pos += 4 * n_seq  # the seq ids
    r.take("I")  # s_trans
    n_layer = r.take("I")
    count = n_layer if n_layers is None else n_layers
    out: list[list[int]] = [[], []]
    for side in out:
        for _ in range(count):
            if r.pos >= len(blob):
                break
            r.take("i")  # type
            side.append(r.take("Q"))
            r.pos += cells * side[-1]
    return cells, tuple(out[0]), tuple(out[1])


def recurrent_components(
    memory: RecurrentMemory, blob: bytes | tuple[int, tuple[int, ...], tuple[int, ...]]
) -> tuple[tuple[ComponentResult, ...], int, int]:
    """R and S bytes: kvcalc's prediction against llama.cpp's own row sizes × its cells.

    ``blob``: a recurrent model's state, or its recurrent part already parsed. The state holds the
    sequence's one cell; the memory has ``memory.cells`` (``n_seq_max``)."""
    cells, r_rows, s_rows = parse_recurrent_state(blob) if isinstance(blob, bytes) else blob
    if cells != 1:
        raise KvcalcError(f"llama.cpp's state holds {cells} cells for one sequence",
                          hint="please report this with the command line", code="internal")  # fmt: skip
    rows = []
    for name, predicted, layer_rows in (("recurrent R", memory.r_bytes, r_rows),
                                        ("recurrent S", memory.s_bytes, s_rows)):  # fmt: skip
        got = memory.cells * sum(layer_rows)
        rows.append(ComponentResult(name=name, predicted_bytes=predicted, measured_bytes=got,
                                    relative_error=relative_error(predicted, got), tensors=len(layer_rows),
                                    num_layers=len(layer_rows)))  # fmt: skip
    total_p = memory.r_bytes + memory.s_bytes
    return tuple(rows), total_p, sum(r.measured_bytes for r in rows)


def parse_state(
    blob: bytes, v_width: int | None = None, *, has_v: bool = True
) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """(streams, ((K row, V row) per layer)) per cache of a one-cell ``llama_state_seq_get_data``
    blob: ``io_magic`` and the sequence id, then per cache (``llama_kv_cache::state_write``) the
    stream count, each stream's cell count, the cells' meta, and each layer's type, row size, data.

    A transposed V is written as its layer's width; ``v_width`` is the width llama.cpp padded every
    V tensor to (its ``padding V cache to %d`` warning), when it printed one. MLA caches have no V
    tensors (``has_v = !is_mla``): nothing follows their K rows."""
    r = _Reader(blob)
    caches = []
    while r.pos < len(blob):
        caches.append(_kv_cache(r, v_width, has_v))
    return tuple(caches)


#: ``sizeof(llama_kv_cell_ext)`` (x, y, tok): written after each cell's meta when the model has more
#: than one position per embedding (M-RoPE: ``llama_kv_cache::has_cell_ext``)
CELL_EXT_BYTES = 12


def parse_hybrid_state(
    blob: bytes, v_width: int | None, n_recurrent_layers: int, *, cell_ext: bool = False
) -> tuple[tuple[int, tuple[tuple[int, int], ...]], tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """A hybrid memory's state (``llama_memory_hybrid::state_write``): its KV cache, then the
    recurrent memory's ``n_recurrent_layers`` R rows and S rows. ``cell_ext``: the KV cells carry
    their M-RoPE extension."""
    r = _Reader(blob)
    kv = _kv_cache(r, v_width, True, CELL_EXT_BYTES if cell_ext else 0)
    return kv, _recurrent(r, n_recurrent_layers)


def _kv_cache(
    r: _Reader, v_width: int | None, has_v: bool, ext: int = 0
) -> tuple[int, tuple[tuple[int, int], ...]]:
    take = r.take
    n_stream = take("I")
    rows: tuple[tuple[int, int], ...] = ()
    for _ in range(n_stream):
        cells = take("I")
        if not cells:
            continue
        for _ in range(cells):
            take("i")  # pos
            n_seq = take("I")
            r.pos += ext + 4 * n_seq  # the cell's extension, the seq ids
        v_trans, n_layer = take("I"), take("I")
        k_rows = []
        for _ in range(n_layer):
            take("i")
            k_rows.append(take("Q"))
            r.pos += cells * k_rows[-1]
        v_rows = []
        for _ in range(n_layer if has_v else 0):
            take("i")
            if v_trans:
                el, width = take("I"), take("I")
                v_rows.append(el * (v_width or width))
                r.pos += cells * el * width
                continue
            else:
                v_rows.append(take("Q"))
            r.pos += cells * v_rows[-1]
        v_rows += [0] * (n_layer - len(v_rows))  # MLA: no V tensors
        rows = tuple(zip(k_rows, v_rows, strict=True))
    return n_stream, rows
