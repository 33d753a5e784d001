"""``config.json`` → :class:`~kvcalc.model.shape.ModelShape`. The only code that reads config keys.

Head counts and widths follow vLLM's ``ModelArchConfigConvertor`` (``engine-accounting.md`` §1.10):
KV heads from the first of ``n_head_kv``, ``num_kv_heads``, ``num_key_value_heads``,
``multi_query_group_num``, else ``num_attention_heads``; ``multi_query`` without
``new_decoder_architecture`` means one KV head (Falcon, GPT-BigCode). Head width is an explicit
``head_dim`` (or ChatGLM's ``kv_channels``) before ``hidden_size // num_attention_heads``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.attention_families import FAMILY_TYPES, family_layouts
from kvcalc.hfconfig.gemma_family import GEMMA4_TYPES
from kvcalc.hfconfig.hybrid_families import hybrid_layouts
from kvcalc.hfconfig.reader import MAX_DIM, ConfigReader
from kvcalc.hfconfig.weights import read_weight_shape
from kvcalc.model.dtypes import BF16, FP32, MODEL_DTYPES, CacheDtype
from kvcalc.model.layouts import (
    ChunkedLocal,
    FullAttention,
    GatedDeltaNetState,
    Layout,
    Mamba2State,
    MLALatent,
    NoCache,
    SlidingWindow,
)
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


def parse_config(raw: Mapping[str, Any], *, name: str, source: str | None = None) -> ModelShape:
    """Parse one ``config.json`` mapping. Raises :class:`ConfigError` naming the bad keys."""
    r = ConfigReader(raw, source=source or name)
    prov: dict[str, str] = {}
    num_layers = r.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if num_layers > 100_000:
        raise r.bad(r.path("num_hidden_layers"), num_layers, "a layer count under 100,000")
    prov["num_layers"] = (
        f"{_first_path(r, 'num_hidden_layers', 'n_layer', 'num_layers', 'n_layers')} = {num_layers}"
    )
    heads = r.int("num_attention_heads", "n_head", "num_heads", "n_heads")
    hidden = r.int("hidden_size", "n_embd", "d_model", "dim", default=0, minimum=0)
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
    model_type = str(r.str("model_type", "") or "")
    family = family_layouts(
        r, model_type, num_layers, heads, _plain_head_dim(r, heads, hidden), dtype, prov
    )
    hybrid = (
        hybrid_layouts(
            r, str(r.raw.get("model_type") or ""), num_layers, heads, hidden, dtype, prov
        )
        if family is None
        else None
    )
    if family is not None:
        layouts, kinds = family
    elif hybrid is not None:
        layouts, kinds = hybrid
    else:
        kind_list, pattern_note = L.layer_kinds(r, num_layers)
        prov["layer pattern"] = pattern_note
        layouts = _layouts(r, kind_list, heads, hidden, dtype, prov)
        kinds = tuple(kind_list)
    max_len, max_len_note = _max_model_len(r)
    prov["max_model_len"] = max_len_note
    arch = r.value("architectures") or ()
    return ModelShape(
        name=name,
        model_type=str(r.str("model_type", "") or ""),
        architectures=tuple(str(a) for a in arch) if isinstance(arch, list) else (),
        layers=tuple(layouts),
        dtype=dtype,
        config_dtype=dtype_name,
        num_attention_heads=heads,
        hidden_size=hidden,
        max_model_len=max_len,
        config_keys=dict(r.used),
        provenance=prov,
        weights=read_weight_shape(r, num_layers=num_layers, kinds=kinds),
        quantization=_quantization(r),
        mm_prefix_attention=_mm_prefix(r, model_type),
    )


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
    if model_type in GEMMA4_TYPES:
        return r.str("use_bidirectional_attention") == "vision"
    return top in _MM_PREFIX_TYPES


def _plain_head_dim(r: ConfigReader, heads: int, hidden: int) -> int | None:
    """``head_dim`` if set, else ``hidden_size // num_attention_heads`` (None for family readers
    that do not need it, or when neither is known)."""
    if r.str("model_type", "") not in FAMILY_TYPES:
        return None
    explicit = r.int("head_dim", default=None)
    if explicit is not None:
        return explicit
    return hidden // heads if hidden > 0 and hidden % heads == 0 else None


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


def _kv_heads(r: ConfigReader, heads: int, n: int, prov: dict[str, str]) -> tuple[int, ...]:
    if r.bool("multi_query") and not r.bool("new_decoder_architecture"):
        prov["num_kv_heads"] = "multi_query = true: one KV head shared by all query heads (MQA)"
        return (1,) * n
    for key in ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"):
        values = r.int_or_list(key, n)
        if values is not None:
            shown = values[0] if len(set(values)) == 1 else list(values)
            prov["num_kv_heads"] = f"{r.path(key)} = {shown}"
            return values
    prov["num_kv_heads"] = f"no KV-head key: num_attention_heads = {heads} (MHA)"
    return (heads,) * n


def _head_dims(
    r: ConfigReader, heads: int, hidden: int, n: int, prov: dict[str, str]
) -> tuple[int, ...]:
    for key in ("head_dim", "kv_channels", "attention_head_dim"):
        values = r.int_or_list(key, n)
        if values is not None:
            prov["head_dim"] = (
                f"{r.path(key)} = {values[0] if len(set(values)) == 1 else list(values)}"
            )
            return values
    if hidden <= 0:
        raise r.missing(("head_dim", "hidden_size"))
    if hidden % heads:
        raise ConfigError(
            f"{r.source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}",
            hint="set head_dim explicitly in config.json",
            code="config-invalid",
        )
    prov["head_dim"] = f"hidden_size / num_attention_heads = {hidden} / {heads} = {hidden // heads}"
    return (hidden // heads,) * n


def _layouts(
    r: ConfigReader,
    kinds: list[str],
    heads: int,
    hidden: int,
    dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:
    n = len(kinds)
    attn = any(k in (L.FULL, L.SLIDING, L.CHUNKED) for k in kinds)
    mla = _mla(r, heads, dtype, prov) if attn else None
    kv = _kv_heads(r, heads, n, prov) if attn and mla is None else (0,) * n
    hd = _head_dims(r, heads, hidden, n, prov) if attn and mla is None else (0,) * n
    window = r.int("sliding_window", default=None) if L.SLIDING in kinds else None
    if window is not None:
        prov["sliding_window"] = f"{r.path('sliding_window')} = {window}"
    chunk = r.int("attention_chunk_size", default=None) if L.CHUNKED in kinds else None
    if L.SLIDING in kinds and window is None:
        raise r.missing(("sliding_window",))
    if chunk is not None:
        prov["attention_chunk_size"] = f"{r.path('attention_chunk_size')} = {chunk}"
    mamba = _mamba2(r, hidden, dtype, prov) if L.MAMBA2 in kinds else None
    gdn = _gdn(r, dtype, prov) if L.GDN in kinds else None
    out: list[Layout] = []
    for i, kind in enumerate(kinds):
        if kind in (L.FULL, L.SLIDING, L.CHUNKED) and mla is not None:
            out.append(mla)
        elif kind == L.FULL:
            out.append(FullAttention(dtype=dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i]))
        elif kind == L.SLIDING:
            out.append(
                SlidingWindow(
                    dtype=dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i], sliding_window=window
                )
            )
        elif kind == L.CHUNKED:
            out.append(
                ChunkedLocal(
                    dtype=dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i], chunk_size=chunk
                )
            )
        elif kind == L.MAMBA2:
            out.append(mamba)
        elif kind == L.GDN:
            out.append(gdn)
        else:
            out.append(NoCache(dtype=dtype))
    return out


def _mla(r: ConfigReader, heads: int, dtype: CacheDtype, prov: dict[str, str]) -> MLALatent | None:
    if not r.has("kv_lora_rank"):
        return None
    rank = r.int("kv_lora_rank")
    rope = r.int("qk_rope_head_dim")
    prov["mla"] = (
        f"kv_lora_rank + qk_rope_head_dim = {rank} + {rope} = {rank + rope} (one latent, no separate K/V)"
    )
    return MLALatent(
        dtype=dtype,
        kv_lora_rank=rank,
        rope_dim=rope,
        num_heads=heads,
        qk_nope_dim=r.int("qk_nope_head_dim", default=0, minimum=0),
        v_head_dim=r.int("v_head_dim", default=0, minimum=0),
    )


def _state_dtype(r: ConfigReader, key: str, default: CacheDtype) -> CacheDtype:
    name = r.str(key)
    if name is None or name == "auto":
        return default
    try:
        return MODEL_DTYPES[name.lower()]
    except KeyError:
        raise r.bad(r.path(key), name, "float32, float16 or bfloat16") from None


def _mamba2(r: ConfigReader, hidden: int, dtype: CacheDtype, prov: dict[str, str]) -> Mamba2State:
    num_heads = r.int("mamba_num_heads", "num_heads")
    head_dim = r.int("mamba_head_dim", "head_dim")
    state = r.int("ssm_state_size", "state_size")
    groups = r.int("n_groups", default=1)
    kernel = r.int("conv_kernel", "mamba_d_conv", default=4)
    # Nemotron-H in vLLM keeps the SSM state in float32 unless the config says otherwise.
    ssm = _state_dtype(r, "mamba_ssm_cache_dtype", FP32)
    prov["mamba2"] = (
        f"mamba_num_heads {num_heads} × mamba_head_dim {head_dim}, ssm_state_size {state}, "
        f"n_groups {groups}, conv_kernel {kernel}, SSM state {ssm.name}"
    )
    return Mamba2State(
        dtype=dtype,
        ssm_dtype=ssm,
        conv_kernel=kernel,
        intermediate_size=num_heads * head_dim,
        n_groups=groups,
        state_size=state,
        num_heads=num_heads,
        head_dim=head_dim,
    )


#: architectures whose vLLM config hook takes the SSM state dtype from ``mamba_ssm_dtype``
#: (``Qwen3_5ForConditionalGenerationConfig`` in ``vllm/model_executor/models/config.py``, 0.33.0)
_QWEN3_5_ARCHITECTURES = (
    "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeForConditionalGeneration",
)  # fmt: skip


def _gdn_state_dtype(r: ConfigReader, dtype: CacheDtype) -> tuple[CacheDtype, str]:
    """The recurrent-state dtype vLLM 0.33 uses for Gated DeltaNet layers, and where it came from.

    Qwen3.5/3.6 (by architecture, as vLLM's config hook is keyed): the text config's
    ``mamba_ssm_dtype`` (float32 in the published configs). Qwen3-Next has no such hook: vLLM keeps
    ``mamba_ssm_cache_dtype = auto``, the model dtype, whatever the config carries.
    """
    arch = r.raw.get("architectures")
    if isinstance(arch, list) and set(arch) & set(_QWEN3_5_ARCHITECTURES):
        if r.has("mamba_ssm_dtype"):
            ssm = _state_dtype(r, "mamba_ssm_dtype", dtype)
            return ssm, f"recurrent state {ssm.name} ({r.path('mamba_ssm_dtype')})"
        return dtype, f"recurrent state {dtype.name} (no mamba_ssm_dtype: the model dtype)"
    return (
        dtype,
        f"recurrent state {dtype.name} (the model dtype: vLLM's mamba_ssm_cache_dtype auto)",
    )


def _gdn(r: ConfigReader, dtype: CacheDtype, prov: dict[str, str]) -> GatedDeltaNetState:
    k_heads = r.int("linear_num_key_heads")
    v_heads = r.int("linear_num_value_heads")
    k_dim = r.int("linear_key_head_dim")
    v_dim = r.int("linear_value_head_dim")
    kernel = r.int("linear_conv_kernel_dim", default=4)
    ssm, ssm_note = _gdn_state_dtype(r, dtype)
    prov["gated_deltanet"] = (
        f"linear_num_key_heads {k_heads}, linear_num_value_heads {v_heads}, key/value head dims "
        f"{k_dim}/{v_dim}, linear_conv_kernel_dim {kernel}; {ssm_note}"
    )
    return GatedDeltaNetState(
        dtype=dtype,
        ssm_dtype=ssm,
        conv_kernel=kernel,
        num_k_heads=k_heads,
        num_v_heads=v_heads,
        head_k_dim=k_dim,
        head_v_dim=v_dim,
    )


def _max_model_len(r: ConfigReader) -> tuple[int, str]:
    """vLLM's ``derive_max_model_len``: smallest length key, then × RoPE factor where it applies."""
    found = {k: r.int(k, default=None) for k in _MAX_LEN_KEYS}
    found = {k: v for k, v in found.items() if v is not None}
    if not found:
        return 2048, "no length key in config: 2048, vLLM's fallback"
    if "model_max_length" in found:
        key = "model_max_length"
    else:
        key = min(found, key=lambda k: found[k])
    length = found[key]
    note = f"{r.path(key)} = {length}"
    rope = r.mapping("rope_scaling") or r.mapping("rope_parameters")
    model_type = r.str("model_type", "") or ""
    if rope:
        rope_type = rope.get("rope_type", rope.get("type"))
        factor = rope.get("factor")
        if (
            rope_type not in ("su", "longrope", "llama3", "default", None)
            and "gemma3" not in model_type
            and isinstance(factor, (int, float))
            and not isinstance(factor, bool)
            and 0 < factor < 1e6
        ):
            original = rope.get("original_max_position_embeddings")
            if (
                rope_type == "yarn"
                and isinstance(original, int)
                and not isinstance(original, bool)
                and 1 <= original <= MAX_DIM * 1024
            ):
                length = original
                note = f"rope_scaling.original_max_position_embeddings = {length}"
            length = int(length * factor)
            note += f" × rope_scaling.factor {factor} ({rope_type}) = {length}"
    return length, note


def _quantization(r: ConfigReader) -> Mapping[str, Any] | None:
    q = r.value("quantization_config")
    return dict(q) if isinstance(q, Mapping) else None
