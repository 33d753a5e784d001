"""What a plan is about, resolved once: the inputs with their GPU, its memory and the engine.

:class:`Deployment` is built from :class:`~kvcalc.planning.inputs.PlanInputs` by
:meth:`Deployment.resolve` — the catalog GPU looked up, the memory one GPU reports, the engine and
its traits chosen — and the planning steps read those from it instead of resolving the inputs
again. The suggestions change it with :meth:`Deployment.replace`, which re-resolves only what the
change touches (a new GPU, a new engine). Pure.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvcalc.engines import get_engine
from kvcalc.engines.names import EngineTraits, traits
from kvcalc.model.gpus import GpuSpec, get_gpu

if TYPE_CHECKING:
    from kvcalc.engines.base import Engine
    from kvcalc.planning.inputs import PlanInputs

#: the inputs a GPU is resolved from
_GPU_KEYS = frozenset({"gpu", "gpu_memory_bytes"})


@dataclass(frozen=True)
class Deployment:
    """``inputs`` resolved: the catalog GPU (``None`` with only ``--gpu-memory``), the memory one
    GPU reports (``None`` without a GPU) and the engine that plans it."""

    inputs: PlanInputs
    gpu: GpuSpec | None
    memory_bytes: int | None
    engine: Engine

    @classmethod
    def resolve(cls, inputs: PlanInputs | Deployment) -> Deployment:
        """``inputs`` resolved (a :class:`Deployment` is returned as it is)."""
        if isinstance(inputs, Deployment):
            return inputs
        gpu, memory = _gpu_and_memory(inputs)
        return cls(inputs=inputs, gpu=gpu, memory_bytes=memory, engine=get_engine(inputs.engine))

    @property
    def traits(self) -> EngineTraits:
        """What the engine does, as :func:`~kvcalc.engines.names.traits` tables it."""
        return traits(self.engine.name)

    @property
    def attention_data_parallel_size(self) -> int:
        """SGLang DP attention's ranks (``--enable-dp-attention --dp N``), 1 without it."""
        inputs = self.inputs
        return inputs.data_parallel_size if inputs.enable_dp_attention else 1

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        """The NVIDIA GPU's compute capability (None for other vendors or without a catalog GPU)."""
        gpu = self.gpu
        if gpu is None or not gpu.compute_capability or gpu.vendor.lower() != "nvidia":
            return None
        major, _, minor = gpu.compute_capability.partition(".")
        return int(major), int(minor or 0)

    def replace(self, **changes: Any) -> Deployment:
        """The deployment with ``changes`` made to its inputs; the GPU and the engine are looked up
        again only when the change names them."""
        inputs = dataclasses.replace(self.inputs, **changes)
        gpu, memory = self.gpu, self.memory_bytes
        if _GPU_KEYS & changes.keys():
            gpu, memory = _gpu_and_memory(inputs)
        engine = self.engine if inputs.engine == self.inputs.engine else get_engine(inputs.engine)
        return Deployment(inputs=inputs, gpu=gpu, memory_bytes=memory, engine=engine)


def _gpu_and_memory(inputs: PlanInputs) -> tuple[GpuSpec | None, int | None]:
    gpu = get_gpu(inputs.gpu) if inputs.gpu else None
    memory = inputs.gpu_memory_bytes or (gpu.memory_bytes if gpu else None)
    return gpu, memory
