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
from typing import Any

from kvcalc.errors import KvcalcError
from kvcalc.verify import torchenv
from kvcalc.verify.result import RunInfo, VerifyResult, judge
from kvcalc.verify.spec import VerifyOptions

#: tensor attributes of a cache layer → the part they hold (per attention kind)
_ATTENTION_PARTS = {"keys": "K", "values": "V"}
_MLA_PARTS = {"keys": "latent", "values": "rope"}
_STATE_PARTS = {"conv_states": "conv", "recurrent_states": "ssm"}


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


def build_model(raw: dict[str, Any], torch_dtype: str, device: Any) -> Any:
    """The model of ``raw`` with random weights (seed 0), in ``torch_dtype``, on ``device``."""
    torch = torchenv.import_torch()
    transformers = import_transformers()
    torch.manual_seed(0)
    try:
        config = transformers.AutoConfig.for_model(**raw)  # an unknown model_type raises here
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=getattr(torch, torch_dtype)
        )
    except (ValueError, KeyError, TypeError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise KvcalcError(f"transformers cannot build {raw.get('model_type')!r} as a causal LM: {reason}",
                          hint="run the layout check instead (without --run)",
                          code="run-unsupported-model") from None  # fmt: skip
    return model.to(device).eval()


def _tensors(layer: Any) -> list[tuple[str, Any]]:
    """(attribute, tensor) for every cache tensor a cache layer holds."""
    out = []
    for attr in ("keys", "values", "conv_states", "recurrent_states"):
        value = getattr(layer, attr, None)
        items = value.values() if isinstance(value, dict) else [value]
        out += [(attr, t) for t in items if t is not None and hasattr(t, "untyped_storage")]
    return out


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
            name = part_names.get((index, part), f"unpredicted {attr}")
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
    from kvcalc.verify.check import components_from
    from kvcalc.verify.layout import allocation_plan

    if new_tokens < 2:
        raise KvcalcError("--new-tokens must be at least 2 (one decode step after the prompt)",
                          hint="e.g. --new-tokens 4", code="invalid-input")  # fmt: skip
    small, changed = shrink_for_run(raw)
    shape = parse_config(small, name=name, source=f"{name} (reduced for --run)")
    prompt = prompt_tokens or _default_prompt(shape)
    static = dict(opts.engine_options).get("cache_implementation") == "static"
    # the last token is never fed back; generate() sizes a StaticCache to the same max_length − 1
    cached = prompt + new_tokens - 1
    plan = allocation_plan(shape, replace(opts, tokens=cached))
    torch = torchenv.import_torch()
    transformers = import_transformers()
    dev = torchenv.resolve_device(device)
    from kvcalc.verify.alloc import check_room

    check_room(plan.predicted_bytes, dev)  # before building anything: --prompt-tokens may be absurd
    parts = {
        (v.layer, b.name.rsplit(" ", 1)[1]): v.component for b in plan.buffers for v in b.views
    }
    from kvcalc.model.dtypes import CACHE_DTYPES

    model = build_model(
        small, CACHE_DTYPES[plan.kv_cache_dtype].torch_name, dev
    )  # caches what it computes in
    ids = out = cache = None
    try:
        vocab = int(getattr(model.config.get_text_config(), "vocab_size", 1024))
        ids = torch.randint(1, vocab, (opts.batch_size, prompt), device=dev)
        kwargs = {"cache_implementation": "static"} if static else {}
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


def _default_prompt(shape) -> int:
    """Long enough that every sliding window overflows (so the cap is exercised), else 32 tokens."""
    windows = [x.window for x in shape.layers if x.window]
    return max([32, *(w + 8 for w in windows)])
