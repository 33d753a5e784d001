"""``config.json`` → :class:`~kvcalc.model.shape.ModelShape`. The only code that reads config keys.

A config is first checked against the registry of verified architecture families
(:mod:`kvcalc.hfconfig.families`); an unverified one is refused (``config-unverified``) unless
``trust_layout`` is set, when every layer is planned as plain attention and the shape says
``layout_validated = False``. The family's layout reader (or the generic one,
:mod:`kvcalc.hfconfig.generic`) then turns the keys into one layout per layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import families, generic
from kvcalc.hfconfig.eagle import read_eagle_head
from kvcalc.hfconfig.family import LayoutContext, LayoutsRead
from kvcalc.hfconfig.layers import window_cleared
from kvcalc.hfconfig.mtp import read_mtp
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weights import read_weight_shape
from kvcalc.model.dtypes import BF16, FP32, MODEL_DTYPES, CacheDtype
from kvcalc.model.layouts import LayerKind, Layout
from kvcalc.model.shape import ModelShape

__all__ = ["parse_config", "ConfigReader"]

_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def parse_config(
    raw: Mapping[str, Any],
    *,
    name: str,
    source: str | None = None,
    trust_layout: bool = False,
    hf_quant_config: object = None,
) -> ModelShape:
    """Parse one ``config.json`` mapping. Raises :class:`ConfigError` naming the bad keys, and
    ``config-unverified`` for a config the registry does not verify (unless ``trust_layout``)."""
    r = ConfigReader(raw, source=source or name)
    check = families.verify(r)
    if not check.validated and not trust_layout:
        raise families.refusal(r, check)
    prov: dict[str, str] = {}
    if check.family is not None:
        prov["family"] = f"{check.family.name} (kvcalc.hfconfig.families.{check.family.module})"
        if check.family.note:
            prov["family"] += f": {check.family.note}"
    if not check.validated:
        prov["unverified"] = "; ".join(check.problems) + " (planned anyway: --trust-layout)"
    family = check.family
    # a config class's attribute_map: the canonical key, else the one it maps to (Whisper's)
    mapped = family.mapped if family is not None else (lambda key: (key,))
    layer_keys = (*mapped("num_hidden_layers"), "n_layer", "num_layers", "n_layers")
    num_layers = r.int(*layer_keys)
    if num_layers > 100_000:
        raise r.bad(r.path("num_hidden_layers"), num_layers, "a layer count under 100,000")
    prov["num_layers"] = f"{_first_path(r, *layer_keys)} = {num_layers}"
    if family is not None and family.attention_free:
        heads = r.int("num_attention_heads", default=0, minimum=0)
    else:
        heads = r.int(*mapped("num_attention_heads"), "n_head", "num_heads", "n_heads")
    hidden = r.int(*mapped("hidden_size"), "n_embd", "d_model", "dim", default=0, minimum=0)
    dtype, dtype_name = _model_dtype(r)
    if dtype_name is None:
        prov["dtype"] = (
            "no torch_dtype in config: served in bf16 (vLLM's auto; transformers' from_config uses float32)"
        )
    elif dtype_name.lower() in ("float32", "fp32", "float"):
        prov["dtype"] = (
            f"torch_dtype = {dtype_name}: served in bf16 (vLLM's auto for float32 checkpoints)"
        )
    else:
        prov["dtype"] = (
            f"{r.path('torch_dtype') if r.has('torch_dtype') else 'dtype'} = {dtype_name}"
        )
    ctx = LayoutContext(
        num_layers=num_layers, num_attention_heads=heads, hidden_size=hidden, dtype=dtype,
        provenance=prov,
    )  # fmt: skip
    if not check.validated:
        found: LayoutsRead = generic.plain_attention(r, ctx)
    elif check.family is not None and check.family.layouts is not None:
        found = check.family.layouts(r, ctx)
    else:
        found = generic.read_layouts(r, ctx)
    # a reader returns the layouts, or (layouts, layer kinds for the weight count)
    layouts, kinds = found if isinstance(found, tuple) else (found, _kinds(found))
    own_count = check.validated and check.family is not None and check.family.own_layer_count
    if len(layouts) != num_layers and not own_count:  # a family reader's contract
        raise ConfigError(f"{r.source}: {len(layouts)} layouts for {num_layers} layers")
    max_len, max_len_note, max_len_key, rope_factor = _max_model_len(r)
    prov["max_model_len"] = max_len_note
    arch = r.value("architectures") or ()
    model_type = str(r.str("model_type", "") or "")
    mtp = read_mtp(r, model_type, list(layouts)) if check.validated else None
    archs = tuple(str(a) for a in arch) if isinstance(arch, list) else ()
    eagle = read_eagle_head(r, model_type, archs) if check.validated else None
    read = dict(r.used)
    return ModelShape(
        name=name,
        model_type=str(r.str("model_type", "") or ""),
        architectures=tuple(str(a) for a in arch) if isinstance(arch, list) else (),
        layers=tuple(layouts),
        dtype=dtype,
        config_dtype=dtype_name,
        num_attention_heads=heads,
        layer_query_heads=tuple(sorted(ctx.query_heads - {heads})),
        max_tensor_parallel=min(((k, *v) for k, v in ctx.tp_limit.items()), default=None),
        hidden_size=hidden,
        max_model_len=max_len,
        max_model_len_key=max_len_key,
        max_model_len_rope_factor=rope_factor,
        sliding_window_cleared=window_cleared(r),
        config_model_max_length=_top_model_max_length(raw),
        config_keys=read,
        provenance=prov,
        # a family counting its own layers (LongCat-Flash's two attentions per decoder layer)
        # has a weight-count kind per layout
        weights=read_weight_shape(
            r, num_layers=len(kinds) if own_count else num_layers, kinds=kinds
        ),  # fmt: skip
        quantization=_quantization(r),
        mm_prefix_attention=_mm_prefix(r, str(r.str("model_type", "") or "")),
        config_architectures=_top_architectures(raw),
        checkpoint_quant_config=_checkpoint_quant(raw, hf_quant_config, r.source),
        family=check.family.name if check.family else None,
        layout_validated=check.validated,
        unverified_keys=check.keys if not check.validated else (),
        ignored_keys=_ignored(r, read),
        vision_tower=_vision_tower(raw),
        mtp=mtp,
        eagle=eagle,
    )


def _top_architectures(raw: Mapping[str, Any]) -> tuple[str, ...]:
    arch = raw.get("architectures")
    return tuple(str(a) for a in arch) if isinstance(arch, list) else ()


def _vision_tower(raw: Mapping[str, Any]) -> tuple[int | None, int | None] | None:
    """``vision_config``'s layer count and width, as SGLang's config classes expose them."""
    vision = raw.get("vision_config")
    if not isinstance(vision, Mapping):
        return None

    def dim(*names: str) -> int | None:
        value = next((vision[n] for n in names if n in vision), None)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    return dim("num_hidden_layers", "vt_num_hidden_layers"), dim("hidden_size", "vt_hidden_size")


#: top-level model types vLLM treats as mm-prefix LMs (``is_mm_prefix_lm``, vLLM 0.33.0)
_MM_PREFIX_TYPES = ("bagel", "gemma3", "molmo2", "moondream3", "paligemma")


def _mm_prefix(r: ConfigReader, model_type: str) -> bool:
    """vLLM's ``ModelArchConfigConvertor.is_mm_prefix_lm``: an explicit ``is_mm_prefix_lm``, Gemma 4's
    ``use_bidirectional_attention == "vision"``, or a listed top-level model type."""
    top = r.raw.get("model_type")
    explicit = r.raw.get("is_mm_prefix_lm")
    if isinstance(explicit, bool):
        r.used["is_mm_prefix_lm"] = explicit
        return explicit
    if model_type.startswith("gemma4"):
        from kvcalc.hfconfig.families.gemma4 import GEMMA4_TYPES

        if model_type in GEMMA4_TYPES:
            return r.str("use_bidirectional_attention") == "vision"
    return top in _MM_PREFIX_TYPES


def plain_head_dim(r: ConfigReader, heads: int, hidden: int) -> int | None:
    """``head_dim`` if set, else ``hidden_size // num_attention_heads`` (None for family readers
    that do not need it, or when neither is known)."""
    explicit = r.int("head_dim", default=None)
    if explicit is not None:
        return explicit
    return hidden // heads if hidden > 0 and hidden % heads == 0 else None


def _kinds(layouts: list[Layout]) -> tuple[str, ...]:
    """The generic reader's layer-kind names, which the weight reader understands."""
    from kvcalc.hfconfig import layers as L
    from kvcalc.model.layouts import ChunkedLocal

    out: list[str] = []
    for layout in layouts:
        if layout.kind is LayerKind.RECURRENT:
            from kvcalc.model.recurrent_layouts import Mamba2State  # recurrent layers only

            out.append(L.MAMBA2 if isinstance(layout, Mamba2State) else L.GDN)
        elif isinstance(layout, ChunkedLocal):
            out.append(L.CHUNKED)
        else:
            out.append(L.weight_kind(layout))
    return tuple(out)


def _ignored(r: ConfigReader, read: Mapping[str, Any]) -> tuple[str, ...]:
    """Keys of the (text) config the cache layout did not read: shown by ``inspect --explain``."""
    out = [r.prefix + k for k in r.text if r.prefix + k not in read and k not in read]
    if r.prefix:
        out += [k for k in r.raw if k not in read and r.raw.get(k) is not r.text]
    return tuple(out)


def _first_path(r: ConfigReader, *keys: str) -> str:
    for key in keys:
        if r.has(key):
            return r.path(key)
    return keys[0]


def _model_dtype(r: ConfigReader) -> tuple[CacheDtype, str | None]:
    """The dtype the model is served in. 16-bit configs as written; float32 or no dtype → bf16.

    vLLM's ``auto`` serves float32 checkpoints in 16 bits (bf16 where supported; the exact choice
    between fp16 and bf16 is **unconfirmed**, the byte count is the same). transformers'
    ``from_config`` would use float32: the ``hf`` engine reads ``config_dtype`` for that.
    """
    name = r.str("torch_dtype") or r.str("dtype")
    if name is None:
        return BF16, None
    try:
        dtype = MODEL_DTYPES[name.lower()]
    except KeyError:
        raise ConfigError(
            f"{r.source}: unknown torch_dtype {name!r}",
            hint="expected float32, float16 or bfloat16",
            code="config-invalid",
        ) from None
    return (BF16 if dtype is FP32 else dtype), name


#: RoPE types whose ``factor`` vLLM 0.33 does not apply to the derived length (YaRN variants leave
#: ``max_position_embeddings`` already scaled; ``_get_and_verify_max_len``)
_UNSCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
#: rope_parameters nested by layer type (or DeepSeek-V4's rope kinds): one dict per entry
_NESTED_ROPE_KEYS = {"full_attention", "sliding_attention", "chunked_attention",
                     "linear_attention", "main", "compress"}  # fmt: skip


def _max_model_len(r: ConfigReader) -> tuple[int, str, str | None, float]:
    """vLLM 0.33's derived maximum length (``derive_max_model_len_and_key`` and
    ``_get_and_verify_max_len``): the smallest length key (``model_max_length`` wins when set),
    times the RoPE ``factor`` of every rope type it scales (not YaRN's, not in Gemma 3).
    Returns (length, provenance, the key as vLLM names it in its refusal, the factor applied)."""
    found = {k: r.int(k, default=None) for k in _MAX_LEN_KEYS}
    found = {k: v for k, v in found.items() if v is not None}
    if not found:
        return 2048, "no length key in config: 2048, vLLM's fallback", None, 1.0
    if "model_max_length" in found:
        key = "model_max_length"
    else:
        key = min(found, key=lambda k: found[k])
    length = found[key]
    note = f"{r.path(key)} = {length}"
    rope = r.mapping("rope_scaling") or r.mapping("rope_parameters") or {}
    nested = bool(rope) and set(rope) <= _NESTED_ROPE_KEYS
    params = [v for v in rope.values() if isinstance(v, Mapping) and v] if nested else [rope]
    factor: Any = 1.0
    kind = None
    for rp in params:
        rope_type = rp.get("rope_type", rp.get("type"))
        if rope_type not in _UNSCALED_ROPE:
            factor, kind = rp.get("factor", factor), rope_type
    if (
        "gemma3" not in (r.str("model_type", "") or "")
        and isinstance(factor, (int, float))
        and not isinstance(factor, bool)
        and 0 < factor < 1e6
        and factor != 1
    ):
        length = int(length * factor)
        note += f" × rope_scaling.factor {factor} ({kind}) = {length}"
    else:
        factor = 1.0
    yarn = ("yarn", "deepseek_yarn")
    if factor == 1.0 and any(rp.get("rope_type", rp.get("type")) in yarn for rp in params):
        note += " (YaRN: vLLM 0.33 does not scale it again)"
    # GPT-2-style configs alias max_position_embeddings to n_positions (attribute_map)
    key = "max_position_embeddings" if key == "n_positions" else key
    return length, note, key, float(factor)


def _top_model_max_length(raw: Mapping[str, Any]) -> int | float | None:
    """The top-level ``model_max_length`` vLLM compares a user length with (``None`` if absent)."""
    value = raw.get("model_max_length") if isinstance(raw, Mapping) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return value if ok else None


def _checkpoint_quant(
    raw: Mapping[str, Any], sidecar: object, source: str
) -> Mapping[str, Any] | None:
    """vLLM 0.33 ``transformers_utils/config.py``: the top-level ``quantization_config``, else the
    ModelOpt ``hf_quant_config.json`` (written by ModelOpt 0.29 and before) beside config.json."""
    q = raw.get("quantization_config") if isinstance(raw, Mapping) else None
    if isinstance(q, Mapping):
        return dict(q)
    if sidecar is not None and not isinstance(sidecar, Mapping):
        raise ConfigError(
            f"hf_quant_config.json beside {source} is not a JSON object",
            hint="the checkpoint's ModelOpt quantization sidecar is damaged; fix or remove it",
            code="config-invalid",
        )
    return dict(sidecar) if isinstance(sidecar, Mapping) else None


def _quantization(r: ConfigReader) -> Mapping[str, Any] | None:
    q = r.value("quantization_config")
    return dict(q) if isinstance(q, Mapping) else None
