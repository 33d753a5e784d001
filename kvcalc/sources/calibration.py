"""Calibration records: ``kvcalc verify --record FILE`` writes them, ``plan --calibration FILE`` reads them.

A record is one JSON object per line (JSON Lines), appended, never rewritten::

    {"kind": "kvcalc-verify", "version": 1, "date": "2026-01-01T12:00:00+00:00",
     "check": "fill", "gpu_name": "NVIDIA H100 80GB HBM3", "total_memory_bytes": 85029158912,
     "model": "meta-llama/Llama-3.1-8B", "engine": "vllm", ...,
     "predicted_overhead_bytes": 3221225472, "measured_overhead_bytes": 3355443200,
     "predicted_num_blocks": 30123, "measured_num_blocks": 30059, "bytes_per_block": 2097152}

Only ``--fill`` records carry overhead figures (the layout check has no budget). For a GPU, the
correction is the median over its records of ``measured − predicted`` overhead, where the measured
overhead is the one that explains the blocks really allocatable: ``predicted + (planned −
allocatable) · bytes_per_block``. :func:`kvcalc.estimate.calibration.apply_calibration` adds it to
the non-torch part of the overhead estimate; this module reads and appends the file.
"""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kvcalc.errors import KvcalcError
from kvcalc.estimate.calibration import Calibration, apply_calibration
from kvcalc.estimate.overhead import Overhead

RECORD_KIND = "kvcalc-verify"
RECORD_VERSION = 1
#: a calibration file is a few kB per record; anything past this is not one
MAX_FILE_BYTES = 16 * 1024 * 1024
#: byte figures beyond this (a petabyte) are not from a GPU and are ignored
MAX_RECORD_BYTES = 1 << 50
_RECORDS_HINT = "pass the JSON Lines file that `kvcalc verify MODEL --fill --record FILE` wrote"


def make_record(result: Any, *, date: datetime | None = None) -> dict[str, Any]:
    """One record from a :class:`~kvcalc.verify.result.VerifyResult`."""
    from kvcalc.version import __version__

    fill = result.fill
    return {
        "kind": RECORD_KIND,
        "version": RECORD_VERSION,
        "date": (date or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        "check": result.check,
        "gpu_name": result.device_name,
        "device": result.device,
        "total_memory_bytes": result.total_device_memory_bytes,
        "model": result.model,
        "engine": result.engine,
        "engine_version": result.engine_version,
        "kv_cache_dtype": result.kv_cache_dtype,
        "tensor_parallel_size": result.tensor_parallel_size,
        "predicted_bytes": result.predicted_bytes,
        "measured_bytes": result.measured_bytes,
        "relative_error": result.relative_error,
        "predicted_overhead_bytes": fill.predicted_overhead_bytes if fill else None,
        "measured_overhead_bytes": fill.measured_overhead_bytes if fill else None,
        "measured_non_torch_bytes": fill.measured_non_torch_bytes if fill else None,
        "predicted_num_blocks": fill.planned_num_blocks if fill else result.num_blocks,
        "measured_num_blocks": fill.allocatable_num_blocks if fill else result.num_blocks,
        "bytes_per_block": fill.bytes_per_block if fill else None,
        "passed": result.passed,
        "torch_version": result.torch_version,
        "kvcalc_version": __version__,
    }


def append_record(path: str | Path, record: dict[str, Any]) -> None:
    target = Path(path).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=False) + "\n")
    except OSError as exc:
        raise KvcalcError(f"cannot append to {target}: {exc.strerror or exc}", hint="give --record a writable path",
                          code="record-unwritable") from None  # fmt: skip


def read_records(path: str | Path) -> list[dict[str, Any]]:
    source = Path(path).expanduser()
    try:
        with source.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise KvcalcError(f"cannot read calibration file {source}: {exc.strerror or exc}",
                          hint="write one with: kvcalc verify MODEL --fill --record FILE",
                          code="calibration-not-found") from None  # fmt: skip
    if len(data) > MAX_FILE_BYTES:
        raise KvcalcError(f"{source} is over {MAX_FILE_BYTES >> 20} MiB: not a calibration file",
                          hint=_RECORDS_HINT, code="calibration-invalid")  # fmt: skip
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise KvcalcError(
            f"{source}: not UTF-8 text", hint=_RECORDS_HINT, code="calibration-invalid"
        ) from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            raise KvcalcError(f"{source}:{number}: not a JSON object", hint=_RECORDS_HINT,
                              code="calibration-invalid") from None  # fmt: skip
        if not isinstance(record, dict) or record.get("kind") != RECORD_KIND:
            raise KvcalcError(f"{source}:{number}: not a kvcalc verify record", hint=_RECORDS_HINT,
                              code="calibration-invalid")  # fmt: skip
        records.append(record)
    return records


def _byte_count(value: Any) -> bool:
    """A figure in bytes a record may hold: an int (not a bool) that a GPU could have."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_RECORD_BYTES


def _key(name: str | None) -> str:
    return re.sub(r"[\s_]+", "-", str(name or "").strip().lower())


def _same_gpu(record: dict[str, Any], gpu_name: str | None, total_memory_bytes: int | None) -> bool:
    if gpu_name:
        if _key(record.get("gpu_name")) == _key(gpu_name):
            return True
        from kvcalc.errors import InputError
        from kvcalc.model.gpus import get_gpu

        try:
            return get_gpu(str(record.get("gpu_name"))).name == get_gpu(gpu_name).name
        except InputError:
            return False
    return total_memory_bytes is not None and record.get("total_memory_bytes") == total_memory_bytes


def load_calibration(
    path: str | Path, gpu_name: str | None, total_memory_bytes: int | None = None
) -> Calibration | None:
    """The correction for ``gpu_name`` (or, without a name, a card of ``total_memory_bytes``)."""
    usable = [
        r for r in read_records(path)
        if _byte_count(r.get("predicted_overhead_bytes"))
        and _byte_count(r.get("measured_overhead_bytes"))
        and _same_gpu(r, gpu_name, total_memory_bytes)
    ]  # fmt: skip
    if not usable:
        return None
    extra = statistics.median_low(
        r["measured_overhead_bytes"] - r["predicted_overhead_bytes"] for r in usable
    )
    return Calibration(gpu_name=str(usable[0].get("gpu_name")), num_records=len(usable),
                       extra_overhead_bytes=int(extra), source=str(path))  # fmt: skip


def calibration_for(
    path: str | Path, gpu_name: str | None, total_memory_bytes: int | None = None
) -> Calibration:
    """The correction in ``path`` for this GPU; with no matching record, one of zero records (so
    the plan can say so) rather than ``None``."""
    found = load_calibration(path, gpu_name, total_memory_bytes)
    if found is not None:
        return found
    what = gpu_name or (f"a {total_memory_bytes:,} B GPU" if total_memory_bytes else "this GPU")
    return Calibration(gpu_name=what, num_records=0, extra_overhead_bytes=0, source=str(path))


def calibrate_overhead(
    overhead: Overhead, path: str, *, gpu_name: str | None, total_memory_bytes: int | None
) -> Overhead:
    """``overhead`` corrected by the records in ``path`` (read here, applied by
    :func:`~kvcalc.estimate.overhead.apply_calibration`)."""
    return apply_calibration(overhead, calibration_for(path, gpu_name, total_memory_bytes))
