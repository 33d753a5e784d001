"""``verify --engine llamacpp --run``: llama.cpp itself loads a GGUF in the model's layout on the CPU.

:mod:`kvcalc.verify.llamacpp.gguf` writes the model (random weights, the real KV layout, cut to
``--layers``); llama.cpp's Python binding (kvcalc's ``llamacpp`` extra, :func:`kvcalc.errors.install_hint`) loads it with the
context parameters of the prediction, through its C API (``llama_init_from_model``). Two things
llama.cpp reports are compared with the ``llamacpp`` engine's prediction:

- its log lines for the context and the cache (``llama_kv_cache: size = … MiB (… cells, … layers,
  …/… seqs), K (f16): … MiB, V (f16): … MiB`` and the others of
  :mod:`kvcalc.engines.llamacpp.log`), captured through ``llama_log_set``, text for text;
- the bytes: one token is decoded and the sequence's state (``llama_state_seq_get_data``) is read
  back; it holds each cache layer's ``ggml_row_size`` of K and V as llama.cpp computed it, so
  ``cells × streams × Σ rows`` — the K and V tensors' ``ggml_nbytes`` — is known to the byte.
"""

from __future__ import annotations

import ctypes
import re
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.llamacpp.context import on_host
from kvcalc.engines.llamacpp.engine import (
    LATEST_COMMIT,
    LlamaCppEngine,
    build_caches,
    cache_types,
    compute_line,
    context,
    ggml_name,
    is_iswa,
)
from kvcalc.engines.llamacpp.log import is_predicted_line
from kvcalc.engines.llamacpp.recurrent import (
    has_recurrent,
    hybrid_arch,
    is_recurrent_only,
    recurrent_memory,
)
from kvcalc.errors import KvcalcError, install_hint
from kvcalc.frozen import frozen
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import LayerKind
from kvcalc.model.shape import ModelShape
from kvcalc.verify.llamacpp.gguf import GgufWidths, spec_for, write_model
from kvcalc.verify.llamacpp.hybrid_gguf import MROPE_ARCHS
from kvcalc.verify.llamacpp.readback import read_back
from kvcalc.verify.llamacpp.state import parse_hybrid_state, parse_state, recurrent_components
from kvcalc.verify.result import ComponentResult, LlamaCppRun, VerifyResult, judge, relative_error
from kvcalc.verify.spec import VerifyOptions

_HUGE = 1 << 50
_FLASH = {"auto": -1, "off": 0, "on": 1, True: 1, False: 0}
#: ``enum ggml_log_level`` (ggml.h): NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
GGML_LOG_LEVEL_DEBUG = 1


def import_binding() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise KvcalcError("--run --engine llamacpp needs llama.cpp's Python binding, which is not installed",
                          hint=f"{install_hint('llamacpp')} (it compiles llama.cpp: minutes; "
                               "CMAKE_ARGS as in .ci/run build the library alone)",
                          code="llamacpp-missing") from None  # fmt: skip
    _close_devnull_at_exit()
    return llama_cpp


def _close_devnull_at_exit() -> None:
    """llama-cpp-python opens ``os.devnull`` twice when imported (``llama_cpp/_utils.py``:
    ``outnull_file``, ``errnull_file``) and never closes them: every process that imported it
    ended with ``ResourceWarning: unclosed file <... name='/dev/null'>``. Closed at exit here."""
    import atexit
    import sys

    utils = sys.modules.get("llama_cpp._utils")
    if utils is None or getattr(utils, "_kvcalc_close_registered", False):
        return
    utils._kvcalc_close_registered = True  # type: ignore[attr-defined]
    for name in ("outnull_file", "errnull_file"):
        f = getattr(utils, name, None)
        if f is not None and hasattr(f, "close"):
            atexit.register(f.close)


@frozen
class _Measured:
    lines: tuple[str, ...]
    #: ``llama_state_seq_get_data`` of sequence 0 after one token (:mod:`.llamacpp_state`)
    state: bytes
    compute_lines: tuple[str, ...]
    #: ``compute buffer size is %8.4f MiB`` (debug level, printed by ``llama_free``)
    compute_mib: str
    version: str


def _request(model: ModelShape, opts: VerifyOptions) -> EngineRequest:
    extra = dict(opts.engine_options)
    extra.setdefault("n_ctx", opts.tokens or 64)
    extra["buffer_name"] = "CPU"
    return EngineRequest(model=model, kv_cache_dtype=opts.kv_cache_dtype, engine_version=opts.engine_version,
                         max_model_len=int(extra["n_ctx"]), available_kv_bytes=_HUGE, extra=extra)  # fmt: skip


def verify_run_llamacpp(
    model: ModelShape, opts: VerifyOptions, *, tolerance: float, widths: GgufWidths | None = None
) -> VerifyResult:
    """``widths``: the written file's embedding, MLP and vocabulary widths (small by default)."""
    request = _request(model, opts)
    if (request.engine_version or "latest") != "latest":
        raise KvcalcError("--run checks the llama.cpp version kvcalc models as latest",
                          hint="drop --engine-version", code="invalid-input")  # fmt: skip
    plan = LlamaCppEngine().plan_kv_cache(request)  # bad options fail before anything is built
    type_k, type_v = cache_types(request)
    ctx = context(request, "latest", model, is_iswa(model), type_v)
    recurrent = is_recurrent_only(model)
    caches = (
        []
        if recurrent
        else build_caches(request, model, ctx, type_k, type_v, "latest", is_iswa(model))
    )
    spec = spec_for(model, widths)
    binding = import_binding()
    with tempfile.TemporaryDirectory(prefix="kvcalc-llamacpp-") as tmp:
        path = write_model(spec, Path(tmp) / "model.gguf")
        written = _read_back(path, model)
        measured = _run(binding, path, request, ctx, ggml_name(type_k), ggml_name(type_v))
    # the compute graph is the written file's: its own (small) widths, read back by kvcalc
    compute, why = LlamaCppEngine().compute_buffer(
        replace(request, model=replace(model, graph_dims=written))
    )
    predicted_lines = tuple(line for line in plan.log_lines if is_predicted_line(line))
    if recurrent:
        memory = recurrent_memory(model, ctx.n_seq_max, on_host(request, model))
        components, total_predicted, total_measured = recurrent_components(memory, measured.state)
    elif has_recurrent(model):  # a hybrid: its KV cache's state, then the recurrent memory's
        memory = recurrent_memory(model, ctx.n_seq_max, on_host(request, model))
        kv, state = parse_hybrid_state(measured.state, v_padding(measured.lines), len(memory.layers),
                                       cell_ext=hybrid_arch(model) in MROPE_ARCHS)  # fmt: skip
        kv_rows, kv_p, kv_m = _components(caches, ctx, (kv,))
        rs_rows, rs_p, rs_m = recurrent_components(memory, state)
        components, total_predicted, total_measured = kv_rows + rs_rows, kv_p + rs_p, kv_m + rs_m
    else:
        components, total_predicted, total_measured = _components(
            caches,
            ctx,
            parse_state(measured.state, v_padding(measured.lines), has_v=not model.is_mla),
            swa=str(LayerKind.CHUNKED if LayerKind.CHUNKED in model.kinds else LayerKind.SLIDING),
        )
    error, passed = judge(total_predicted, total_measured, components, tolerance)
    lines_match = measured.lines == predicted_lines
    notes = [f"llama.cpp {measured.version}: {spec.arch} GGUF, {spec.num_layers} layers, random weights; "
             f"embedding {spec.hidden}, MLP {spec.ffn}, vocabulary {spec.vocab} (small), the KV layout is the model's",
             "bytes: llama.cpp's own ggml_row_size per layer (from the sequence state) × cells × streams"]  # fmt: skip
    predicted_compute: tuple[str, ...] = ()
    compute_mib = ""
    if compute is None:
        notes += [
            f"compute buffer not modelled ({why}); reported: {line}"
            for line in measured.compute_lines
        ]
    else:
        predicted_compute = (compute_line("CPU", compute.bytes),)
        compute_mib = f"{compute.bytes / (1024.0 * 1024.0):.4f}"
        notes.append(f"compute buffer: {compute.bytes:,} B predicted (the {compute.n_tokens}-token graph "
                     f"{compute.pp_bytes:,} B, the one-token graph {compute.tg_bytes:,} B)")  # fmt: skip
    compute_match = compute is None or (
        measured.compute_lines == predicted_compute and measured.compute_mib in ("", compute_mib)
    )
    if not lines_match:
        notes.append("llama.cpp's log lines differ from the predicted ones")
    if not compute_match:
        notes.append("llama.cpp's compute buffer differs from the predicted one")
    if not measured.version.startswith(LATEST_COMMIT):
        notes.append(f"kvcalc models llama.cpp {LATEST_COMMIT} (llama-cpp-python {MODELLED_BINDING}); "
                     f"this is llama.cpp {measured.version}: a difference may be the version's")  # fmt: skip
    run = LlamaCppRun(llama_cpp_version=measured.version, architecture=spec.arch,
                      predicted_lines=predicted_lines, measured_lines=measured.lines,
                      lines_match=lines_match, compute_lines=measured.compute_lines,
                      predicted_compute_lines=predicted_compute, measured_compute_mib=measured.compute_mib,
                      predicted_compute_mib=compute_mib, compute_match=compute_match,
                      predicted_compute_bytes=None if compute is None else compute.bytes)  # fmt: skip
    return VerifyResult(
        check="run", model=model.name, engine="llamacpp", engine_version="latest",
        kv_cache_dtype=plan.kv_cache_dtype, tensor_parallel_size=1, device="cpu",
        device_name="llama.cpp CPU backend", total_device_memory_bytes=0, torch_version="",
        layout="llama.cpp K and V tensors per layer: ggml_row_size × cells × streams",
        block_size=1, num_blocks=plan.num_blocks, tokens=ctx.n_ctx, num_layers=model.num_layers,
        predicted_bytes=total_predicted, measured_bytes=total_measured, relative_error=error,
        tolerance=tolerance, passed=passed and lines_match and compute_match,
        judged_on="llama.cpp's log lines (text) and row bytes from its sequence state",
        components=components, llamacpp=run, notes=tuple(notes),
    )  # fmt: skip


def _components(
    caches, ctx, measured, swa: str = "sliding"
) -> tuple[tuple[ComponentResult, ...], int, int]:
    rows = []
    total_p = total_m = 0
    if len(measured) != len(caches):
        raise KvcalcError(f"llama.cpp made {len(measured)} KV cache(s), kvcalc predicts {len(caches)}",
                          hint="please report this with the command line", code="internal")  # fmt: skip
    for cache, (streams, layer_rows) in zip(caches, measured, strict=True):
        label = {"": "full", "non-SWA": "full", "SWA": swa}[cache.label]
        cells = cache.cells * streams
        for part, predicted, index in (("K", cache.k_bytes, 0), ("V", cache.v_bytes, 1)):
            got = cells * sum(r[index] for r in layer_rows)
            rows.append(ComponentResult(name=f"{label} {part}", predicted_bytes=predicted, measured_bytes=got,
                                        relative_error=relative_error(predicted, got), tensors=len(layer_rows),
                                        num_layers=len(layer_rows)))  # fmt: skip
            total_p += predicted
            total_m += got
    return tuple(rows), total_p, total_m


def v_padding(lines: tuple[str, ...]) -> int | None:
    """The V width llama.cpp says it padded the transposed V cache to, if it said so."""
    for line in lines:
        found = re.search(r"padding V cache to (\d+)$", line)
        if found:
            return int(found.group(1))
    return None


def _read_back(path: Path, model: ModelShape | None = None) -> GraphDims | None:
    """The graph widths kvcalc's own GGUF reader finds in the file just written (with ``model``:
    a hybrid's or ``llama4``'s layers read back must be the model's)."""
    return read_back(path, model)


def _run(
    binding: Any, path: Path, request: EngineRequest, ctx, k_name: str, v_name: str
) -> _Measured:
    lc = binding
    text: list[str] = []

    freed: list[str] = []

    @lc.llama_log_callback
    def on_log(level: int, message: bytes, user_data: Any) -> None:
        if level != GGML_LOG_LEVEL_DEBUG:
            text.append(message.decode("utf-8", "replace"))
        elif b"compute buffer size is" in message:
            freed.append(message.decode("utf-8", "replace"))

    lc.llama_log_set(on_log, ctypes.c_void_p(0))
    lc.llama_backend_init()
    mparams = lc.llama_model_default_params()
    mparams.n_gpu_layers = 0
    model = lc.llama_model_load_from_file(str(path).encode(), mparams)
    if not model:
        raise KvcalcError(f"llama.cpp could not load the GGUF kvcalc wrote: {_last_error(text)}",
                          hint="run the layout check instead (without --run)", code="run-unsupported-model")  # fmt: skip
    try:
        text.clear()
        cparams = _context_params(lc, request, k_name, v_name)
        lctx = lc.llama_init_from_model(model, cparams)
        if not lctx:
            raise KvcalcError(
                f"llama.cpp refused the context: {_last_error(text)}",
                hint="check the -E options against llama.cpp's rules",
                code="run-unsupported-model",
            )
        try:
            lines = _kv_lines("".join(text))
            compute = tuple(
                line.rstrip()
                for line in "".join(text).splitlines()
                if "compute buffer size" in line
            )
            state = _state_rows(lc, lctx, ctx)
        finally:
            lc.llama_free(lctx)
    finally:
        lc.llama_model_free(model)
        lc.llama_log_set(_quiet(lc), ctypes.c_void_p(0))
    version = str(getattr(lc, "__version__", "?"))
    mib = re.findall(r"CPU compute buffer size is +([0-9.]+) MiB", "".join(freed))
    return _Measured(lines=lines, state=state, compute_lines=compute, compute_mib=mib[0] if mib else "",
                     version=describe_binding(version))  # fmt: skip


#: the binding whose vendored llama.cpp the ``latest`` profile models
MODELLED_BINDING = "0.3.36"


def describe_binding(version: str) -> str:
    """``0c1e570 (llama-cpp-python 0.3.36)`` for the modelled binding; other releases vendor
    another llama.cpp, whose commit kvcalc does not know."""
    if version == MODELLED_BINDING:
        return f"{LATEST_COMMIT} (llama-cpp-python {version})"
    return f"of llama-cpp-python {version}"


_SILENT: list[Any] = []


def _quiet(lc: Any) -> Any:
    """A log callback that drops everything (kept alive here: llama.cpp holds on to it)."""
    if not _SILENT:
        _SILENT.append(lc.llama_log_callback(lambda level, message, user_data: None))
    return _SILENT[0]


def _context_params(lc: Any, request: EngineRequest, k_name: str, v_name: str) -> Any:
    x = request.extra
    p = lc.llama_context_default_params()
    p.n_ctx = int(x["n_ctx"])
    p.n_seq_max = int(x.get("n_seq_max", 1))
    p.n_batch = int(x.get("n_batch", 2048))
    p.n_ubatch = int(x.get("n_ubatch", 512))
    p.type_k = getattr(lc, f"GGML_TYPE_{k_name.upper()}")
    p.type_v = getattr(lc, f"GGML_TYPE_{v_name.upper()}")
    p.flash_attn_type = _FLASH[x.get("flash_attn", "auto")]
    p.swa_full = bool(
        x.get("swa_full", False)
    )  # the C library defaults to true, llama-cli to false
    p.kv_unified = bool(x.get("kv_unified", False))
    p.offload_kqv = bool(x.get("offload_kqv", True))
    p.n_threads = p.n_threads_batch = 2
    return p


def _kv_lines(log: str) -> tuple[str, ...]:
    lines = (line.rstrip() for line in log.splitlines())
    return tuple(line for line in lines if is_predicted_line(line))


def _last_error(text: list[str]) -> str:
    lines = [line for line in "".join(text).splitlines() if line.strip()]
    return (lines[-1] if lines else "no message")[:300]


def _state_rows(lc: Any, lctx: Any, ctx) -> bytes:
    """Decode one token in sequence 0 and read back the sequence's state."""
    tokens = (lc.llama_token * 1)(3)
    if lc.llama_decode(lctx, lc.llama_batch_get_one(tokens, 1)) != 0:
        raise KvcalcError("llama.cpp could not decode a token", hint="run the layout check instead (without --run)",
                          code="run-unsupported-model")  # fmt: skip
    size = lc.llama_state_seq_get_size(lctx, 0)
    buf = (ctypes.c_uint8 * size)()
    written = lc.llama_state_seq_get_data(lctx, buf, size, 0)
    return bytes(buf)[:written]
