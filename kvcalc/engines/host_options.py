"""The host-memory tiers a deployment asks for, as plain values: vLLM's ``--kv-offloading-size``
(+ ``--kv-offloading-backend``), ``--kv-transfer-config`` and ``--cpu-offload-gb``. Each engine sizes
them itself (:mod:`kvcalc.engines.vllm.offload`). Pure."""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.frozen import frozen

#: vLLM's ``KVOffloadingBackend`` (``config/cache.py``)
OFFLOADING_BACKENDS = ("native", "lmcache")


@frozen
class OffloadOptions:
    """Host tiers: bytes in all (KV offloading: summed over the TP ranks, as vLLM reads it)."""

    #: ``--kv-offloading-size`` in bytes (GiB · 2^30); None: no native KV offloading
    kv_offloading_bytes: int | None = None
    kv_offloading_backend: str = "native"
    #: ``--kv-transfer-config`` as given (JSON text); None: none
    kv_transfer_config: str | None = None
    #: ``--cpu-offload-gb`` in bytes, per GPU (0: none)
    cpu_offload_bytes: int = 0

    def __post_init__(self) -> None:
        backend = str(self.kv_offloading_backend).strip().lower()
        if backend not in OFFLOADING_BACKENDS:
            raise InputError(f"kv_offloading_backend {self.kv_offloading_backend!r} is not one vLLM takes",
                             hint="choose native or lmcache", code="invalid-input")  # fmt: skip
        object.__setattr__(self, "kv_offloading_backend", backend)

    @property
    def active(self) -> bool:
        return bool(self.kv_offloading_bytes or self.kv_transfer_config or self.cpu_offload_bytes)
