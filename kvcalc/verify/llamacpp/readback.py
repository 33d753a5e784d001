"""kvcalc's own GGUF reader on the file ``verify --engine llamacpp --run`` just wrote.

The graph widths the compute buffer is predicted from are the written file's. The layers read
back must also equal the model's (the ones from ``config.json``, cut to ``--layers``): the reader's
rules for which layer is attention, sliding, chunked or recurrent, the KV heads and widths and the
state's shape, checked against the file llama.cpp loads. Dtypes are not compared (llama.cpp's
cache types are the run's options, its recurrent state always float32), nor MLA's expanded head
widths (llama.cpp caches the latent).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvcalc.errors import KvcalcError
from kvcalc.model.dtypes import FP16, FP32
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import Layout, MLALatent, NoCache, RecurrentState
from kvcalc.model.recurrent_layouts import ParallelHybrid
from kvcalc.model.shape import ModelShape


def read_back(path: Path, model: ModelShape | None = None) -> GraphDims | None:
    """The written file's graph widths; with ``model``, its layers checked as above."""
    from kvcalc.sources.gguf.files import read_local
    from kvcalc.sources.gguf.model import parse_gguf

    written = read_local(path)
    tensors = {t.name: t.dims for t in written.tensors()}
    shape = parse_gguf(written.metadata, name=path.stem, where=str(path), tensors=tensors)
    if model is not None:
        check_same_layers(shape, model)
    return shape.graph_dims


def check_same_layers(read: ModelShape, model: ModelShape) -> None:
    ours = tuple(map(_plain, model.layers))
    theirs = tuple(map(_plain, read.layers))
    if ours == theirs:
        return
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                 min(len(ours), len(theirs)))  # fmt: skip
    raise KvcalcError(
        f"the {read.model_type} GGUF written for {model.name} reads back as {len(theirs)} layers "
        f"that differ from the model's {len(ours)} (first at layer {first})",
        hint="please report this with the command line",
        code="internal",
    )


def _plain(layer: Layout) -> Layout:
    """The layer with llama.cpp's dtypes: f16 K/V, float32 state."""
    if isinstance(layer, ParallelHybrid):
        attention = layer.attention.with_dtype(FP16)
        mixer = _plain(layer.mixer)
        return replace(layer, dtype=FP16, attention=attention, mixer=mixer)  # type: ignore[arg-type]
    if isinstance(layer, RecurrentState):
        return replace(layer, dtype=FP32, ssm_dtype=FP32)
    if isinstance(layer, NoCache):
        return NoCache(dtype=FP16)
    if isinstance(layer, MLALatent):  # the expanded heads' widths size other engines' caches only
        return replace(layer, dtype=FP16, qk_nope_dim=0, v_head_dim=0)
    return layer.with_dtype(FP16)
