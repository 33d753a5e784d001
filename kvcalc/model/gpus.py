"""The GPU catalog: memory as the driver reports it, bandwidth, peak TFLOP/s, by name or alias.

The data live in ``kvcalc/data/gpus.json`` (read through the package's loader,
:func:`pkgutil.get_data`, so they ship in the wheel). ``memory_bytes`` is the total CUDA reports (``cudaMemGetInfo``, what vLLM multiplies by
``gpu_memory_utilization``), a few hundred MiB under the board total nvidia-smi lists: an H100 80GB
lists 81,559 MiB in nvidia-smi but vLLM logs ``total_gpu_memory 79.22GiB``. Most such figures are
only known to 2 decimals of a GiB; ``memory_is_exact`` is false for those and ``memory_source`` says
where each came from.

Names are matched case-insensitively, with spaces and underscores read as ``-``
(``"h100 sxm"`` = ``"H100-SXM"``); each GPU also answers to its aliases and to the device name torch
prints (``"NVIDIA H100 80GB HBM3"``).
"""

from __future__ import annotations

import json
import pkgutil
import re
from functools import lru_cache

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.units import GIB

#: vLLM's ``EngineArgs.get_batch_defaults`` threshold for the larger scheduler defaults
VLLM_LARGE_GPU_MIN_BYTES = 70 * GIB


@frozen
class GpuSpec:
    name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    #: the name torch/vLLM print (``torch.cuda.get_device_name()``)
    device_name: str
    architecture: str
    compute_capability: str | None
    #: total memory as the driver reports it to CUDA (``cudaMemGetInfo``)
    memory_bytes: int
    memory_is_exact: bool
    memory_source: str
    #: total memory nvidia-smi / rocm-smi list for the board
    board_memory_bytes: int
    memory_bandwidth_bytes_per_s: int
    fp16_dense_tflops: float
    bf16_dense_tflops: float | None
    fp8_dense_tflops: float | None

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    @property
    def mnbt_tier(self) -> str:
        """``"large"`` where vLLM picks its bigger scheduler defaults, else ``"default"``.

        vLLM (``get_batch_defaults``, engine-accounting §1.11): device memory ≥ 70 GiB and a device
        name without ``a100`` → max_num_batched_tokens 16,384 (LLM class) / 8,192 (API server) and
        max_num_seqs 1,024; otherwise 8,192 / 2,048 and 256.
        """
        large = (
            self.memory_bytes >= VLLM_LARGE_GPU_MIN_BYTES and "a100" not in self.device_name.lower()
        )
        return "large" if large else "default"

    @property
    def vllm_default_max_num_seqs(self) -> int:
        return 1024 if self.mnbt_tier == "large" else 256


def _key(name: str) -> str:
    return re.sub(r"[\s_]+", "-", str(name).strip().lower())


@lru_cache(maxsize=1)
def list_gpus() -> tuple[GpuSpec, ...]:
    """Every GPU in the catalog, in catalog order."""
    data = pkgutil.get_data("kvcalc", "data/gpus.json")
    assert data is not None  # the package's own loader reads files
    rows = json.loads(data.decode("utf-8"))["gpus"]
    return tuple(GpuSpec(**{**row, "aliases": tuple(row["aliases"])}) for row in rows)


@lru_cache(maxsize=1)
def _index() -> dict[str, GpuSpec]:
    index: dict[str, GpuSpec] = {}
    for gpu in list_gpus():
        for name in (gpu.name, gpu.device_name, *gpu.aliases):
            index.setdefault(_key(name), gpu)
    return index


def get_gpu(name: str) -> GpuSpec:
    """The GPU called ``name`` (a catalog name, an alias or torch's device name, any case)."""
    found = _index().get(_key(name))
    if found is not None:
        return found
    names = [gpu.name for gpu in list_gpus()]
    import difflib

    close = difflib.get_close_matches(_key(name), list(_index()), n=3, cutoff=0.6)
    suggestions = list(dict.fromkeys(_index()[c].name for c in close))
    hint = (
        (f"did you mean {' or '.join(suggestions)}? " if suggestions else "")
        + "known GPUs: "
        + ", ".join(names)
    )
    raise InputError(f"unknown GPU {name!r}", hint=hint, code="unknown-gpu")
