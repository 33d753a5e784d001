"""Turn ``kvcalc plan``'s options into a model reference and :class:`PlanInputs`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvcalc.errors import InputError
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import parse_size

#: option name -> PlanInputs field, for the values a serving command can also set
_FROM_COMMAND_FIELDS = (
    "max_model_len", "tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype",
    "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "block_size", "dtype",
    "quantization", "enforce_eager", "kv_cache_memory_bytes", "engine",
)  # fmt: skip
_DEFAULTS = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "kv_cache_dtype": "auto",
             "enforce_eager": False, "engine": "vllm"}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    reference: str
    revision: str | None
    inputs: PlanInputs
    #: notes from --from-command (flags it ignored)
    notes: tuple[str, ...] = ()


def _size(value: str | None, what: str) -> int | None:
    return None if value is None else parse_size(value, bare_unit="gib", what=what)


def _value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip()


def parse_engine_options(items) -> tuple[tuple[str, Any], ...]:
    """``["n_seq_max=4", "kv_unified=true"]`` → ``(("n_seq_max", 4), ("kv_unified", True))``."""
    out = []
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise InputError(f"--engine-option needs KEY=VALUE, got {item!r}", code="invalid-input")
        out.append((key.strip(), _value(value)))
    return tuple(out)


def build_inputs(options: dict[str, Any]) -> PlanRequest:
    o = dict(options)
    values: dict[str, Any] = {
        "engine": o["engine"],
        "engine_version": o["engine_version"],
        "gpu": o["gpu"],
        "gpu_memory_bytes": _size(o["gpu_memory"], "--gpu-memory"),
        "num_gpus": o["num_gpus"],
        "tensor_parallel_size": o["tensor_parallel_size"],
        "pipeline_parallel_size": o["pipeline_parallel_size"],
        "max_model_len": o["max_model_len"],
        "max_num_seqs": o["max_num_seqs"],
        "batch": o["batch"],
        "kv_cache_dtype": o["kv_cache_dtype"],
        "dtype": None if o["dtype"] in (None, "auto") else o["dtype"],
        "quantization": o["quantization"],
        "weights_memory_bytes": _size(o["weights_memory"], "--weights-memory"),
        "gpu_memory_utilization": o["gpu_memory_utilization"],
        "block_size": o["block_size"],
        "max_num_batched_tokens": o["max_num_batched_tokens"],
        "enforce_eager": o["enforce_eager"],
        "kv_cache_memory_bytes": _size(o["kv_cache_memory"], "--kv-cache-memory"),
        "prompt_len": o["prompt_len"],
        "output_len": o["output_len"],
        "shared_prefix": o["shared_prefix"],
        "tight_fraction": o["tight_threshold"],
        "calibration": o["calibration"],
        "engine_options": parse_engine_options(o.get("engine_option") or ()),
        "trust_layout": bool(o.get("trust_layout")),
        "allow_long_max_model_len": bool(o.get("allow_long_max_model_len")),
    }
    reference = o["model"]
    revision: str | None = o.get("revision")
    notes: tuple[str, ...] = ()
    if o.get("from_command"):
        reference, command_revision, notes = _merge_command(o["from_command"], reference, values)
        if command_revision and revision and command_revision != revision:
            raise InputError(f"--revision {revision} differs from the command's {command_revision}",
                             code="conflicting-options")  # fmt: skip
        revision = revision or command_revision
    if not reference:
        raise InputError(
            "no model given",
            hint="kvcalc plan MODEL --gpu NAME (see `kvcalc models`)",
            code="missing-model",
        )
    return PlanRequest(
        reference=reference, revision=revision, inputs=PlanInputs(**values), notes=notes
    )


def _merge_command(
    text: str, reference: str | None, values: dict[str, Any]
) -> tuple[str | None, str | None, tuple[str, ...]]:
    """Flags from a ``vllm serve ...`` command fill what the options left at their defaults."""
    from kvcalc.planning.servecmd import parse_serve_command

    cmd = parse_serve_command(text)
    if reference and cmd.model and reference != cmd.model:
        raise InputError(
            f"the model {reference!r} differs from the command's {cmd.model!r}",
            hint="give the model once, either as the argument or in --from-command",
            code="conflicting-options",
        )
    for name in _FROM_COMMAND_FIELDS:
        if name not in cmd.values:
            continue
        given = values.get(name)
        if given is not None and given != _DEFAULTS.get(name) and given != cmd.values[name]:
            raise InputError(
                f"{name} is {given!r} on the command line but {cmd.values[name]!r} in --from-command",
                hint="give each setting once",
                code="conflicting-options",
            )
        values[name] = cmd.values[name]
    return reference or cmd.model, cmd.revision, tuple(cmd.notes)
