"""llama.cpp's recurrent memory (``llama_memory_recurrent``, llama.cpp ``0c1e570``): Mamba-2 state.

``llama_model::create_memory`` gives a recurrent architecture (``mamba2``) a recurrent memory of
``mem_size = max(1, n_seq_max)`` cells — one per sequence, whatever ``n_ctx`` is — with
``n_rs_seq = 0`` rollback snapshots (the default), R and S tensors in float32 for every layer:

- R (the convolution state): ``n_embd_r = (ssm_d_conv − 1) · (ssm_d_inner + 2 · ssm_n_group ·
  ssm_d_state)`` values per cell;
- S (the SSM state): ``n_embd_s = ssm_d_state · ssm_d_inner`` values per cell;

in the layer's device buffer (``CPU`` with ``offload_kqv`` false or a layer left on the CPU). The
``RS buffer size`` line is the buffer: each tensor padded to the buffer type's 32-byte alignment.
Then ``llama_memory_recurrent: size = %7.2f MiB (%6u cells, %3d layers, %2u seqs %2u rs_seq), R
(f32): …, S (f32): …, P (f32): …`` in float32 MiB, ``layers`` being ``hparams.n_layer()``.
Checked by ``verify --engine llamacpp --run`` (row bytes from the sequence state, lines as text).
Only Mamba-2 layers are modelled; hybrids (attention beside recurrent layers) are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcalc.engines.llamacpp_log import f32_mib
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.model.shape import ModelShape

#: ``TENSOR_ALIGNMENT`` of the CPU buffer type (CUDA's is 128; a tensor of n_rows · 4 B rows)
_ALIGN = 32


@dataclass(frozen=True, kw_only=True)
class RecurrentMemory:
    cells: int
    layers: tuple[int, ...]
    #: per layer: R and S row bytes (one cell)
    rows: tuple[tuple[int, int], ...]
    #: layers whose state is in host memory
    host_layers: frozenset[int] = frozenset()

    @property
    def r_bytes(self) -> int:
        return self.cells * sum(r for r, _ in self.rows)

    @property
    def s_bytes(self) -> int:
        return self.cells * sum(s for _, s in self.rows)

    @property
    def host_bytes(self) -> int:
        return self.cells * sum(r + s for i, (r, s) in zip(self.layers, self.rows, strict=True)
                                if i in self.host_layers)  # fmt: skip

    def buffers(self, device: str) -> list[tuple[str, int]]:
        """(buffer name, bytes) in ``strcmp`` order: tensors padded to the alignment."""
        parts: dict[str, int] = {}
        for i, (r, s) in zip(self.layers, self.rows, strict=True):
            name = "CPU" if i in self.host_layers else device
            parts[name] = parts.get(name, 0) + _pad(r * self.cells) + _pad(s * self.cells)
        return sorted(parts.items(), key=lambda kv: kv[0].encode())


def _pad(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def is_recurrent_only(model: ModelShape) -> bool:
    return all(isinstance(x, Mamba2State) for x in model.layers)


def rows(layer: Mamba2State) -> tuple[int, int]:
    """(R, S) bytes of one cell in float32: ``n_embd_r`` and ``n_embd_s``."""
    conv = (layer.conv_kernel - 1) * (
        layer.intermediate_size + 2 * layer.n_groups * layer.state_size
    )
    return 4 * conv, 4 * layer.state_size * layer.intermediate_size


def recurrent_memory(model: ModelShape, n_seq_max: int, host: set[int]) -> RecurrentMemory:
    layers = tuple(i for i, x in enumerate(model.layers) if isinstance(x, Mamba2State))
    per = tuple(rows(model.layers[i]) for i in layers)  # type: ignore[arg-type]
    return RecurrentMemory(cells=max(1, n_seq_max), layers=layers, rows=per,
                           host_layers=frozenset(host & set(layers)))  # fmt: skip


def recurrent_lines(mem: RecurrentMemory, device: str, n_layer: int, n_seq_max: int) -> list[str]:
    p = "llama_memory_recurrent"
    lines = [
        f"{p}: {name:>10} RS buffer size = {size / 1024.0 / 1024.0:8.2f} MiB"
        for name, size in mem.buffers(device)
    ]
    total = mem.r_bytes + mem.s_bytes
    lines.append(
        f"{p}: size = {f32_mib(total):7.2f} MiB ({mem.cells:6d} cells, {n_layer:3d} layers, "
        f"{n_seq_max:2d} seqs {0:2d} rs_seq), R (f32): {f32_mib(mem.r_bytes):7.2f} MiB, "
        f"S (f32): {f32_mib(mem.s_bytes):7.2f} MiB, P (f32): {f32_mib(0):7.2f} MiB"
    )
    return lines
