"""Overhead corrections measured on a GPU (``kvcalc verify --fill --record``), applied to the estimate."""

from __future__ import annotations

from dataclasses import replace

from kvcalc.estimate.overhead import Overhead
from kvcalc.frozen import frozen


@frozen
class Calibration:
    """The overhead correction for one GPU, from ``kvcalc verify --fill --record`` files
    (:mod:`kvcalc.sources.calibration` reads them)."""

    gpu_name: str
    num_records: int
    #: add to the predicted overhead (may be negative); 0 when no record matched
    extra_overhead_bytes: int
    source: str
    #: measured fraction of the decode roofline (no record carries one yet)
    decode_efficiency: float | None = None


def apply_calibration(overhead: Overhead, calibration: Calibration) -> Overhead:
    """``overhead`` corrected by ``kvcalc verify --fill --record`` measurements (pure)."""
    path = calibration.source
    if calibration.num_records == 0:
        note = f"calibration: no --fill record for {calibration.gpu_name} in {path}"
        return replace(overhead, notes=(*overhead.notes, note))
    extra = calibration.extra_overhead_bytes
    non_torch = max(0, overhead.non_torch_bytes + extra)
    note = (f"calibration: {extra / (1 << 20):+,.0f} MiB overhead from "
            f"{calibration.num_records} verify --fill record(s) for {calibration.gpu_name} in {path}")  # fmt: skip
    return replace(overhead, non_torch_bytes=non_torch, notes=(*overhead.notes, note))
