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

Hybrids (``llama_memory_hybrid``, ``llm_arch_is_hybrid``): a ``llama_kv_cache`` of ``n_ctx_seq``
cells (``n_pad`` 1, unified or per-sequence streams as for any model) over the attention layers,
built first, then this recurrent memory over the recurrent layers (the layer filters of
``llama_model::create_memory``; Nemotron-H's MLP-only layers are in neither). ``n_embd_r`` and
``n_embd_s`` are model-wide (``llama_hparams``), so every recurrent layer has the same rows: a model
whose recurrent layers differ is refused. The architectures modelled are the ones ``verify --run``
loads in this llama.cpp: ``granitehybrid`` (Granite-4.0-H, Bamba) and ``nemotron_h`` (Nemotron-H,
Nemotron-3), Mamba-2 beside attention; ``jamba`` (Mamba-1); ``falcon-h1`` (attention and Mamba-2 in
every layer: every layer is in both caches); ``lfm2`` (short convolutions); ``qwen3next``,
``qwen35`` and ``qwen35moe`` (Gated DeltaNet: Qwen3-Next, Qwen3.5). The converters of granitehybrid, nemotron_h, jamba and lfm2 write ``head_count_kv``
per layer (0 on the other layers), so without flash attention llama.cpp warns that V widths vary
and pads V to the attention layers' width (the bytes do not change).
"""

from __future__ import annotations

from kvcalc.engines.llamacpp.log import f32_mib
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.layouts import LayerKind, RecurrentState
from kvcalc.model.recurrent_layouts import (
    GatedDeltaNetState,
    Mamba1State,
    Mamba2State,
    ParallelHybrid,
    ShortConvState,
)
from kvcalc.model.shape import ModelShape

#: ``TENSOR_ALIGNMENT`` of the CPU buffer type (CUDA's is 128; a tensor of n_rows · 4 B rows)
_ALIGN = 32


@frozen
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


#: config ``model_type`` → the llama.cpp architecture of its GGUF (``convert_hf_to_gguf.py``), for
#: the hybrids modelled: (architecture, the recurrent layer class its loader builds)
HYBRID_ARCHS: dict[str, tuple[str, type[RecurrentState]]] = {
    "granitemoehybrid": ("granitehybrid", Mamba2State),
    "bamba": ("granitehybrid", Mamba2State),
    "granitehybrid": ("granitehybrid", Mamba2State),
    "nemotron_h": ("nemotron_h", Mamba2State),
    "jamba": ("jamba", Mamba1State),
    "falcon_h1": ("falcon-h1", ParallelHybrid),
    "lfm2": ("lfm2", ShortConvState),
    "qwen3_next": ("qwen3next", GatedDeltaNetState),
    "qwen3_5_moe_text": ("qwen35moe", GatedDeltaNetState),
    "qwen3_5_moe": ("qwen35moe", GatedDeltaNetState),
    "qwen3_5_text": ("qwen35", GatedDeltaNetState),
    "qwen3_5": ("qwen35", GatedDeltaNetState),
    # a GGUF's own architecture names (its model type), where they differ from the configs'
    "falcon-h1": ("falcon-h1", ParallelHybrid),
    "qwen3next": ("qwen3next", GatedDeltaNetState),
    "qwen35moe": ("qwen35moe", GatedDeltaNetState),
    "qwen35": ("qwen35", GatedDeltaNetState),
}
#: hybrid architectures whose converter writes ``head_count_kv`` per layer (0 off the attention)
PER_LAYER_KV_HEADS = frozenset({"granitehybrid", "nemotron_h", "jamba", "lfm2"})


def has_recurrent(model: ModelShape) -> bool:
    return any(isinstance(x, RecurrentState) for x in model.layers)


def is_recurrent_only(model: ModelShape) -> bool:
    return all(isinstance(x, Mamba2State) for x in model.layers)


def hybrid_arch(model: ModelShape) -> str | None:
    """The llama.cpp architecture of a modelled hybrid, ``None`` for other models."""
    if not has_recurrent(model) or is_recurrent_only(model):
        return None
    found = HYBRID_ARCHS.get(model.model_type.lower())
    return found[0] if found else None


def check_recurrent(model: ModelShape, version: str, latest: str) -> None:
    """Refuse, by name, recurrent models whose llama.cpp memory is not modelled."""
    kinds = sorted({type(x).__name__ for x in model.layers})
    what = f"llama.cpp memory for {model.model_type} ({', '.join(kinds)})"
    hint = (f"modelled (llama.cpp {latest}): attention-only models, Mamba-2 models and the hybrids "
            f"{', '.join(sorted({a for a, _ in HYBRID_ARCHS.values()}))}")  # fmt: skip
    if version != "latest":
        raise InputError(f"{what} is modelled for llama.cpp {latest} only", hint=hint,
                         code="unsupported-model")  # fmt: skip
    if is_recurrent_only(model):
        return
    found = HYBRID_ARCHS.get(model.model_type.lower())
    if found is None:
        raise InputError(f"{what} is not modelled", hint=hint, code="unsupported-model")
    arch, state = found
    recurrent = [x for x in model.layers if isinstance(x, RecurrentState)]
    others = sorted({type(x).__name__ for x in recurrent if not isinstance(x, state)})
    if others:
        raise InputError(f"{what}: llama.cpp's {arch} has no {', '.join(others)} layers",
                         hint=hint, code="unsupported-model")  # fmt: skip
    mixers = [x.mixer if isinstance(x, ParallelHybrid) else x for x in recurrent]
    if not all(
        isinstance(x, (Mamba2State, Mamba1State, GatedDeltaNetState, ShortConvState))
        for x in mixers
    ):
        raise InputError(f"{what}: llama.cpp's {arch} mixer is not modelled", hint=hint,
                         code="unsupported-model")  # fmt: skip
    if any(isinstance(x, GatedDeltaNetState) and x.head_k_dim != x.head_v_dim for x in mixers):
        raise InputError(f"{what}: llama.cpp's {arch} takes one head width (ssm.state_size) for keys "
                         "and values, and these differ", hint=hint, code="unsupported-model")  # fmt: skip
    if len({rows(x) for x in recurrent}) > 1:
        raise InputError(f"{what}: the recurrent layers' states differ, and llama.cpp sizes one "
                         "state for every layer (n_embd_r, n_embd_s)", hint=hint,
                         code="unsupported-model")  # fmt: skip
    if any(
        x.kind not in (LayerKind.FULL, LayerKind.NONE, LayerKind.RECURRENT) for x in model.layers
    ):
        raise InputError(f"{what}: sliding or other attention beside recurrent layers is not "
                         "modelled", hint=hint, code="unsupported-model")  # fmt: skip


def rows(layer: RecurrentState) -> tuple[int, int]:
    """(R, S) bytes of one cell in float32: ``n_embd_r`` and ``n_embd_s`` (``llama-hparams.cpp``),
    from the GGUF keys llama.cpp's converter writes for the layer:

    - Mamba-2 (and Falcon-H1's mixer): ``(d_conv − 1) · (d_inner + 2 · n_group · d_state)`` and
      ``d_state · d_inner``;
    - Mamba-1 (Jamba, no groups): ``(d_conv − 1) · d_inner`` and ``d_state · d_inner``;
    - Gated DeltaNet (Qwen3-Next: ``d_inner`` the value heads' width, ``d_state`` the head width,
      ``n_group`` the key heads): ``(d_conv − 1) · (H_v · D_v + 2 · H_k · D_k)`` and ``D_k · H_v · D_v``;
    - short convolution (LFM2): ``n_embd · (l_cache − 1)`` and no S state.
    """
    if isinstance(layer, ParallelHybrid):
        return rows(layer.mixer)
    k = layer.conv_kernel - 1
    if isinstance(layer, Mamba2State):
        conv = k * (layer.intermediate_size + 2 * layer.n_groups * layer.state_size)
        return 4 * conv, 4 * layer.state_size * layer.intermediate_size
    if isinstance(layer, Mamba1State):
        return 4 * k * layer.intermediate_size, 4 * layer.state_size * layer.intermediate_size
    if isinstance(layer, GatedDeltaNetState):
        value = layer.num_v_heads * layer.head_v_dim
        return 4 * k * (
            value + 2 * layer.num_k_heads * layer.head_k_dim
        ), 4 * layer.head_k_dim * value
    assert isinstance(layer, ShortConvState)  # check_recurrent refuses the others
    return 4 * k * layer.conv_dim, 0


def recurrent_memory(model: ModelShape, n_seq_max: int, host: set[int]) -> RecurrentMemory:
    layers = tuple(i for i, x in enumerate(model.layers) if isinstance(x, RecurrentState))
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
