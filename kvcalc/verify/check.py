"""``kvcalc verify``'s library entry points: resolve the model, pick the check, return a result.

- :func:`verify_layout`: allocate the engine's cache tensors at a small size and measure them;
- ``--fill`` (:func:`kvcalc.verify.fill.verify_fill`, CUDA): emulate the deployment on this GPU;
- ``--run`` (:func:`kvcalc.verify.run_hf.verify_run`, ``hf`` only): let transformers generate.
"""

from __future__ import annotations

from typing import Any

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape
from kvcalc.verify.result import (
    DEFAULT_TOLERANCE,
    VerifyResult,
    components_from,
    judge,
)
from kvcalc.verify.spec import VerifyOptions

CPU_JUDGED_ON = "storage bytes (untyped_storage().nbytes()); RSS is reported, never judged"
CUDA_JUDGED_ON = "torch.cuda.memory_allocated delta"


@frozen
class LoadedConfig:
    """A model's raw config (sliced to ``--layers``) and its parsed shape."""

    raw: dict[str, Any]
    shape: ModelShape
    name: str
    full_num_layers: int


def load_config(
    reference: str, *, layers: int | None = None, revision: str | None = None,
    token: str | None = None, offline: bool | None = None,
) -> LoadedConfig:  # fmt: skip
    from kvcalc.hfconfig import parse_config
    from kvcalc.hfconfig.reduce import slice_layers
    from kvcalc.planning.api import resolve_model_cached
    from kvcalc.sources.files import read_config_json

    loaded = resolve_model_cached(reference, revision=revision, token=token, offline=offline)
    raw = read_config_json(loaded.config_path) if loaded.config_path else {}
    name = loaded.shape.name
    full = loaded.shape.num_layers
    if layers is None:
        return LoadedConfig(raw=raw, shape=loaded.shape, name=name, full_num_layers=full)
    raw = slice_layers(raw, layers)
    shape = parse_config(raw, name=name, source=f"{name} (first {layers} layers)")
    return LoadedConfig(raw=raw, shape=shape, name=name, full_num_layers=full)


def load_shape(
    reference: str, *, layers: int | None = None, revision: str | None = None,
    token: str | None = None, offline: bool | None = None,
) -> ModelShape:  # fmt: skip
    """A model's shape, its first ``layers`` layers kept (config.json or GGUF alike)."""
    from dataclasses import replace

    from kvcalc.planning.api import resolve_model_cached

    shape = resolve_model_cached(reference, revision=revision, token=token, offline=offline).shape
    if layers is None or layers >= shape.num_layers:
        return shape
    return replace(shape, layers=shape.layers[:layers], name=shape.name)


def verify_layout(
    model: ModelShape,
    opts: VerifyOptions,
    *,
    device: str = "auto",
    tolerance: float = DEFAULT_TOLERANCE,
    touch: bool = True,
) -> VerifyResult:
    """Allocate ``opts.engine``'s cache for ``model`` on ``device`` and compare with the prediction.

    ``touch=False`` skips writing the tensors (faster; the RSS delta is then not measured).
    """
    from kvcalc.verify import torchenv
    from kvcalc.verify.alloc import allocate_and_measure
    from kvcalc.verify.layout import allocation_plan

    plan = allocation_plan(model, opts)  # pure: bad input fails before torch is imported
    torch = torchenv.import_torch()
    dev = torchenv.resolve_device(device)
    measured = allocate_and_measure(plan, dev, touch=touch)
    components = components_from(plan, measured.components)
    cuda = dev.type == "cuda"
    total = measured.memory.cuda_allocated_delta_bytes if cuda else measured.memory.storage_bytes
    if total is None:  # a CUDA probe always reads torch.cuda.memory_allocated
        raise KvcalcError(
            "no CUDA allocation figure was measured on a CUDA device",
            hint="please report this with the command line",
            code="internal",
        )
    error, passed = judge(plan.predicted_bytes, total, components, tolerance)
    notes = [*plan.notes, *measured.problems]
    if not cuda and touch:
        notes.append("CPU: judged on the tensors' storage bytes; the RSS delta is reported only "
                     "(the allocator and page reuse make it noisy)")  # fmt: skip
    return VerifyResult(
        check="layout", model=model.name, engine=plan.engine, engine_version=plan.engine_version,
        kv_cache_dtype=plan.kv_cache_dtype, tensor_parallel_size=opts.tensor_parallel_size,
        device=str(dev), device_name=torchenv.device_name(dev),
        total_device_memory_bytes=torchenv.total_memory_bytes(dev), torch_version=str(torch.__version__),
        layout=plan.layout, block_size=plan.block_size, num_blocks=plan.num_blocks, tokens=plan.tokens,
        num_layers=model.num_layers, predicted_bytes=plan.predicted_bytes, measured_bytes=total,
        relative_error=error, tolerance=tolerance, passed=passed and not measured.problems,
        judged_on=CUDA_JUDGED_ON if cuda else CPU_JUDGED_ON, components=components,
        memory=measured.memory, notes=tuple(notes),
    )  # fmt: skip


def verify(
    reference: str, opts: VerifyOptions, *, layers: int | None = None, device: str = "auto",
    tolerance: float = DEFAULT_TOLERANCE, fill: bool = False, run: bool = False,
    prompt_tokens: int | None = None, new_tokens: int = 4, gpu_memory_utilization: float | None = None,
    revision: str | None = None, token: str | None = None, offline: bool | None = None,
) -> VerifyResult:  # fmt: skip
    """Resolve ``reference`` and run the chosen check (layout, ``fill`` or ``run``)."""
    from kvcalc.engines.names import RunCheck, traits

    if not 0 <= tolerance < 1:
        raise KvcalcError(f"--tolerance must be in [0, 1), got {tolerance}", hint="e.g. --tolerance 0.01",
                          code="invalid-input")  # fmt: skip
    from kvcalc.planning.inputs import MAX_COUNT

    for what, value in (
        ("--prompt-tokens", prompt_tokens),
        ("--new-tokens", new_tokens),
        ("--layers", layers),
    ):
        if value is not None and value > MAX_COUNT:
            raise KvcalcError(f"{what} must be at most {MAX_COUNT:,}", hint="verify allocates what it is asked "
                              "for: keep the sizes small", code="invalid-input")  # fmt: skip
    if fill and run:
        raise KvcalcError("choose --fill or --run, not both", hint="run them one after the other",
                          code="conflicting-options")  # fmt: skip
    runner = traits(opts.engine).run_check
    if run and runner is None:
        raise KvcalcError("--run runs transformers or llama.cpp and needs --engine hf or llamacpp",
                          hint="kvcalc verify MODEL --engine hf --run --layers 2", code="run-needs-hf")  # fmt: skip
    if run and runner is RunCheck.LLAMACPP:
        from kvcalc.verify.llamacpp.run import verify_run_llamacpp

        shape = load_shape(
            reference, layers=layers, revision=revision, token=token, offline=offline
        )
        return verify_run_llamacpp(shape, opts, tolerance=tolerance)
    loaded = load_config(reference, layers=layers, revision=revision, token=token, offline=offline)
    if fill:
        from kvcalc.verify.fill import verify_fill

        return verify_fill(loaded.shape, opts, device=device, tolerance=tolerance,
                           gpu_memory_utilization=gpu_memory_utilization)  # fmt: skip
    if run:
        from kvcalc.verify.run_hf import verify_run

        return verify_run(loaded.raw, loaded.name, opts, device=device, tolerance=tolerance,
                          prompt_tokens=prompt_tokens, new_tokens=new_tokens)  # fmt: skip
    return verify_layout(loaded.shape, opts, device=device, tolerance=tolerance)
