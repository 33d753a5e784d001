"""``verify --engine hf --run``: transformers builds the model from its config with random weights,
generates with its own cache, and the cache's real tensors are measured against the ``hf`` engine's
prediction for the installed transformers version.

The config is made cheap (:func:`kvcalc.hfconfig.reduce.shrink_for_run`: small vocabulary, MLP and
expert count; ``--layers`` keeps the first N layers and their pattern) while every number the cache
depends on stays the model's own. Measured: each cache layer's ``keys``/``values`` (linear attention:
``conv_states``/``recurrent_states``), Σ ``untyped_storage().nbytes()`` with shared storages counted
once. A sliced tensor keeps its whole storage alive, and that is what is judged: transformers'
``DynamicSlidingWindowLayer`` keeps a ``window − 1`` token view of the ``window``-token result of its
last ``torch.cat``, one token per layer more than its logical size (reported in the notes).
"""

from __future__ import annotations

import traceback
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvcalc.errors import KvcalcError, install_hint
from kvcalc.verify import torchenv
from kvcalc.verify.result import RunInfo, VerifyResult, components_from, judge
from kvcalc.verify.spec import VerifyOptions

if TYPE_CHECKING:
    from kvcalc.engines.hf.setup import QuantizedSetup
    from kvcalc.model.shape import ModelShape

#: tensor attributes of a cache layer → the part they hold (per attention kind)
_ATTENTION_PARTS = {"keys": "K", "values": "V"}
_MLA_PARTS = {"keys": "latent", "values": "rope"}
_STATE_PARTS = {"conv_states": "conv", "recurrent_states": "ssm"}
#: a QuantizedCache layer's parts (a part the prediction has as 0 B has no buffer: named by this)
_QUANTIZED_PARTS = ("data", "scale", "zero", "residual")


def import_transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise KvcalcError(
            "--run needs transformers, which is not installed",
            hint="pip install transformers",
            code="transformers-missing",
        ) from None
    return transformers


#: the package each QuantizedCache backend needs (fp8 needs none)
_BACKEND_MODULES = {
    "quanto": ("optimum.quanto", "optimum-quanto"),
    "hqq": ("hqq.core.quantize", "hqq"),
}


#: the cache layer class a QuantizedCache backend needs in transformers, for backends that older
#: transformers releases lack (5.18-5.20 have no fp8 one; they fail inside generate())
_BACKEND_LAYERS = {"fp8": "Fp8QuantizedLayer"}


def import_backend(backend: str) -> None:
    """Import the QuantizedCache backend's package, or say which one to install; refuse a backend
    the installed transformers does not have."""
    layer = _BACKEND_LAYERS.get(backend)
    if layer is not None:
        from transformers import cache_utils

        if not hasattr(cache_utils, layer):
            raise KvcalcError(
                f"--run with transformers' {backend} QuantizedCache needs a transformers with that "
                f"backend; transformers {_installed_version()} has none",
                hint="pip install -U 'transformers>=5.23', or choose the quanto or hqq backend",
                code="backend-unsupported",
            )
    if backend not in _BACKEND_MODULES:
        return
    module, package = _BACKEND_MODULES[backend]
    try:
        __import__(module)
    except ImportError:
        raise KvcalcError(
            f"--run with transformers' {backend} QuantizedCache needs {package}, which is not installed",
            hint=f"pip install {package} (or kvcalc's quantized extra: {install_hint('quantized')})",
            code="backend-missing",
        ) from None


def _installed_version() -> str:
    import transformers

    return str(getattr(transformers, "__version__", "?"))


def build_model(raw: dict[str, Any], torch_dtype: str | None, device: Any) -> Any:
    """The model of ``raw`` with random weights (seed 0) on ``device``, in ``torch_dtype`` (None:
    the dtype transformers itself picks, the config's or float32)."""
    torch = torchenv.import_torch()
    transformers = import_transformers()
    torch.manual_seed(0)
    kwargs = {} if torch_dtype is None else {"dtype": getattr(torch, torch_dtype)}
    try:
        config = transformers.AutoConfig.for_model(**raw)  # an unknown model_type raises here
        model = transformers.AutoModelForCausalLM.from_config(config, **kwargs)
    except (ValueError, KeyError, TypeError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise KvcalcError(f"transformers cannot build {raw.get('model_type')!r} as a causal LM: {reason}",
                          hint="run the layout check instead (without --run)",
                          code="run-unsupported-model") from None  # fmt: skip
    return model.to(device).eval()


def _tensors(layer: Any) -> list[tuple[str, Any]]:
    """(attribute, tensor) for every cache tensor a cache layer holds; a ``QuantizedCache`` layer's
    as ``Kdata``/``Kscale``/``Kzero`` (its backend's tensors) and ``Kresidual`` (and V)."""
    out = []
    quantized = hasattr(layer, "_quantized_keys")
    for attr in ("keys", "values", "conv_states", "recurrent_states"):
        value = getattr(layer, attr, None)
        items = value.values() if isinstance(value, dict) else [value]
        name = {"keys": "Kresidual", "values": "Vresidual"}.get(attr, attr) if quantized else attr
        out += [(name, t) for t in items if t is not None and hasattr(t, "untyped_storage")]
    for attr, side in (("_quantized_keys", "K"), ("_quantized_values", "V")):
        out += [
            (side + _quantized_part(path), t)
            for path, t in _flatten(getattr(layer, attr, None), "")
        ]
    return out


def _flatten(value: Any, path: str) -> list[tuple[str, Any]]:
    """Plain tensors inside a backend's quantized state: tensor subclasses (optimum-quanto's
    ``WeightQBitsTensor``/``PackedTensor``) by ``__tensor_flatten__``, tuples, dicts (HQQ's meta)."""
    if value is None or isinstance(value, (int, float, str, bool)):
        return []
    if hasattr(value, "__tensor_flatten__") and hasattr(value, "untyped_storage"):
        names, _ = value.__tensor_flatten__()
        return [x for n in names for x in _flatten(getattr(value, n), f"{path}.{n}")]
    if hasattr(value, "untyped_storage"):
        return [(path, value)]
    if isinstance(value, (tuple, list)):
        return [x for i, v in enumerate(value) for x in _flatten(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _flatten(v, f"{path}[{k}]")]
    return []


def _quantized_part(path: str) -> str:
    """``data``/``scale``/``zero`` from where a tensor sits (quanto ``_scale``/``_shift``, HQQ
    ``meta["scale"]``/``["zero"]``, fp8's ``(values, scale)``)."""
    if "scale" in path or path.endswith("[1]"):
        return "scale"
    return "zero" if "shift" in path or "zero" in path else "data"


def measure_cache(
    cache: Any, part_names: dict[tuple[int, str], str]
) -> tuple[dict[str, tuple[int, int]], int, list[str]]:
    """(component → (storage bytes, tensors), logical bytes, notes) of a transformers cache."""
    sums: dict[str, tuple[int, int]] = {}
    seen: set[int] = set()
    logical = 0
    extra: dict[str, list[tuple[int, tuple]]] = {}
    for index, layer in enumerate(cache.layers):
        for attr, tensor in _tensors(layer):
            part = {**_ATTENTION_PARTS, **_STATE_PARTS}.get(attr, attr)
            if (index, part) not in part_names and attr in _MLA_PARTS:
                part = _MLA_PARTS[attr]
            fallback = (
                f"full {part[0]} {part[1:]}"
                if part[1:] in _QUANTIZED_PARTS
                else f"unpredicted {attr}"
            )
            name = part_names.get((index, part), fallback)
            storage = tensor.untyped_storage()
            nbytes = 0 if storage.data_ptr() in seen else storage.nbytes()
            seen.add(storage.data_ptr())
            view = tensor.numel() * tensor.element_size()
            logical += view
            if nbytes > view:
                extra.setdefault(name, []).append((nbytes - view, tuple(tensor.shape)))
            total, count = sums.get(name, (0, 0))
            sums[name] = (total + nbytes, count + 1)
    notes = [f"{name}: {len(items)} tensor(s) (views like {items[0][1]}) keep {sum(x for x, _ in items):,} B of "
             "storage beyond their views (a slice keeps the whole result of the last torch.cat)"
             for name, items in extra.items()]  # fmt: skip
    return sums, logical, notes


def verify_run(
    raw: dict[str, Any], name: str, opts: VerifyOptions, *, device: str, tolerance: float,
    prompt_tokens: int | None, new_tokens: int,
) -> VerifyResult:  # fmt: skip
    from kvcalc.hfconfig import parse_config
    from kvcalc.hfconfig.reduce import shrink_for_run
    from kvcalc.verify.layout import allocation_plan

    if new_tokens < 2:
        raise KvcalcError("--new-tokens must be at least 2 (one decode step after the prompt)",
                          hint="e.g. --new-tokens 4", code="invalid-input")  # fmt: skip
    small, changed = shrink_for_run(raw)
    shape = parse_config(small, name=name, source=f"{name} (reduced for --run)")
    prompt = prompt_tokens or _default_prompt(shape)
    options = dict(opts.engine_options)
    static = options.get("cache_implementation") == "static"
    # the last token is never fed back; generate() sizes a StaticCache to the same max_length − 1
    cached = prompt + new_tokens - 1
    quantized = _quantized(shape, opts)
    if quantized is not None and quantized.spec.has_residual and "residual_tokens" not in options:
        # the prefill is quantized whole; the residual then cycles 1 … residual_length − 1, 0
        residual = (new_tokens - 1) % quantized.spec.residual_length
        opts = replace(opts, engine_options=(*opts.engine_options, ("residual_tokens", residual)))
    plan = allocation_plan(shape, replace(opts, tokens=cached))
    torch = torchenv.import_torch()
    transformers = import_transformers()
    if quantized is not None:
        import_backend(quantized.spec.backend)
    dev = torchenv.resolve_device(device)
    from kvcalc.verify.alloc import check_room

    check_room(plan.predicted_bytes, dev)  # before building anything: --prompt-tokens may be absurd
    parts = {
        (v.layer, b.name.rsplit(" ", 1)[1]): v.component for b in plan.buffers for v in b.views
    }
    # the model's dtype is transformers' own choice under auto (what it caches in is then measured)
    given = opts.kv_cache_dtype.strip().lower()
    auto = given == "auto" or quantized is not None and given not in ("fp32", "fp16", "bf16")
    model = build_model(small, None if auto else _torch_name(given), dev)
    ids = out = cache = None
    try:
        vocab = int(getattr(model.config.get_text_config(), "vocab_size", 1024))
        ids = torch.randint(1, vocab, (opts.batch_size, prompt), device=dev)
        kwargs: dict[str, Any] = {"cache_implementation": "static"} if static else {}
        if quantized is not None:
            kwargs = {"cache_implementation": "quantized", "cache_config": _cache_config(quantized)}
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                 pad_token_id=0, return_dict_in_generate=True, use_cache=True, **kwargs)  # fmt: skip
        cache = getattr(out, "cache", None) or out.past_key_values
        measured, logical, notes = measure_cache(cache, parts)
        info = RunInfo(
            transformers_version=transformers.__version__, num_layers=shape.num_layers, prompt_tokens=prompt,
            new_tokens=new_tokens, cached_tokens=cached, cache_class=type(cache).__name__,
            layer_classes=tuple(dict.fromkeys(type(x).__name__ for x in cache.layers)),
            logical_bytes=logical, reduced=changed,
        )  # fmt: skip
        seq = cache.get_seq_length()
    except BaseException as exc:  # an error, or Ctrl-C: generate()'s frames hold the cache
        traceback.clear_frames(exc.__traceback__)
        raise
    finally:
        del model, ids, out, cache
        torchenv.release(dev)
    if seq != cached:
        notes.append(f"transformers reports {seq} cached tokens, {cached} expected")
    components = components_from(plan, measured)
    total = sum(v for v, _ in measured.values())
    error, passed = judge(plan.predicted_bytes, total, components, tolerance)
    return VerifyResult(
        check="run", model=name, engine="hf", engine_version=plan.engine_version,
        kv_cache_dtype=plan.kv_cache_dtype, tensor_parallel_size=1, device=str(dev),
        device_name=torchenv.device_name(dev), total_device_memory_bytes=torchenv.total_memory_bytes(dev),
        torch_version=str(torch.__version__), layout=f"transformers {info.cache_class} after generate()",
        block_size=1, num_blocks=plan.num_blocks, tokens=cached, num_layers=shape.num_layers,
        predicted_bytes=plan.predicted_bytes, measured_bytes=total, relative_error=error, tolerance=tolerance,
        passed=passed, judged_on="cache tensors' storage bytes (shared storage counted once)",
        components=components, run=info, notes=(*plan.notes, *notes),
    )  # fmt: skip


def _quantized(shape: ModelShape, opts: VerifyOptions) -> QuantizedSetup | None:
    """The ``QuantizedSetup`` of a quantized-cache check, else None."""
    from kvcalc.engines.base import EngineRequest
    from kvcalc.engines.hf.setup import major, quantized_name, quantized_setup

    named = quantized_name(opts.kv_cache_dtype, [])
    options = dict(opts.engine_options)
    if named is None and options.get("cache_implementation") != "quantized":
        return None
    request = EngineRequest(model=shape, kv_cache_dtype=opts.kv_cache_dtype, max_model_len=1,
                            available_kv_bytes=0, extra=options)  # fmt: skip
    profile, _ = major(opts.engine_version)
    return quantized_setup(request, profile, named, [])


def _torch_name(kv_cache_dtype: str) -> str:
    from kvcalc.model.dtypes import parse_cache_dtype

    dtype = parse_cache_dtype(kv_cache_dtype)
    assert dtype is not None
    return dtype.torch_name


def _cache_config(setup: QuantizedSetup) -> dict[str, Any]:
    """``generate(cache_config=…)`` for the setup: the backend and every group-wise option."""
    spec = setup.spec
    if not spec.has_residual:
        return {"backend": spec.backend}
    return {"backend": spec.backend, "nbits": spec.nbits, "q_group_size": spec.q_group_size,
            "residual_length": spec.residual_length, "axis_key": spec.axis_key,
            "axis_value": spec.axis_value}  # fmt: skip


def _default_prompt(shape) -> int:
    """Long enough that every sliding window overflows (so the cap is exercised), else 32 tokens."""
    windows = [x.window for x in shape.layers if x.window]
    return max([32, *(w + 8 for w in windows)])
