"""The generic layout reader: heads, head dims, windows, layer patterns, MLA, Mamba2, Gated DeltaNet.

Families whose layers follow the common keys use :func:`read_layouts` (``Family.layouts = None``);
family modules with their own reader may call the helpers here. Head counts and widths follow
vLLM's ``ModelArchConfigConvertor`` (``engine-accounting.md`` §1.10): KV heads from the first of
``n_head_kv``, ``num_kv_heads``, ``num_key_value_heads``, ``multi_query_group_num``, else
``num_attention_heads``; ``multi_query`` means one KV head (GPT-BigCode; Falcon's
``new_decoder_architecture``, which overrides it, is read by ``families/falcon.py`` alone). Head width is an explicit ``head_dim`` (or ChatGLM's ``kv_channels``)
before ``hidden_size // num_attention_heads``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.class_defaults import class_default
from kvcalc.hfconfig.family import LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import FP32, MODEL_DTYPES, CacheDtype
from kvcalc.model.layouts import (
    ChunkedLocal,
    FullAttention,
    Layout,
    MLALatent,
    NoCache,
    SlidingWindow,
)

if TYPE_CHECKING:  # built for the recurrent layers only: kept off start-up
    from kvcalc.model.recurrent_layouts import GatedDeltaNetState, Mamba2State


#: the top-level keys vLLM 0.33's ``internvl.py`` reads as config attributes (``InternVLChatModel``
#: and the classes built on it: Qianfan-OCR, NVLM-D, H2OVL)
INTERNVL_KEYS = ("force_image_size", "ps_version", "select_layer")


def check_internvl_chat(
    r: ConfigReader, *, what: str, text_types: tuple[str, ...], keys: tuple[str, ...] = ()
) -> None:
    """An InternVL-chat-style config as vLLM 0.33 builds it: the keys ``internvl.py`` (and the
    subclass's own ``keys``) reads as config attributes — the checkpoints' remote config class
    stores them as given, so vLLM fails with AttributeError without them — and a text model of
    the kinds recorded (``text_types``)."""
    missing = [k for k in (*INTERNVL_KEYS, *keys) if k not in r.raw]
    if missing:
        raise ConfigError(
            f"{r.source}: no {', '.join(missing)}: vLLM 0.33's model file for {what} reads them "
            "as config attributes (the checkpoint's remote config class stores them as given: "
            "vLLM fails with AttributeError building the model)",
            hint=f"add them at the top level as a published {what} config has them",
            code="config-invalid",
        )
    text_type = r.text.get("model_type")
    if text_type not in text_types:
        raise ConfigError(
            f"{r.source}: llm_config.model_type {text_type!r}: kvcalc was checked against "
            f"vLLM 0.33 for {what} with {' and '.join(text_types)} text models only",
            code="config-unverified",
        )


def read_layouts(r: ConfigReader, ctx: LayoutContext) -> list[Layout]:
    """One layout per layer, from the layer pattern keys (:func:`kvcalc.hfconfig.layers.layer_kinds`)."""
    kinds, pattern_note = L.layer_kinds(r, ctx.num_layers)
    ctx.provenance["layer pattern"] = pattern_note
    return _layouts(r, kinds, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance)


def plain_attention(r: ConfigReader, ctx: LayoutContext) -> list[Layout]:
    """``--trust-layout`` for an unverified config: every layer full attention from the common keys."""
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    prov["layer pattern"] = (
        "unverified config (--trust-layout): every layer planned as full attention"
    )
    kv = kv_heads(r, heads, n, prov)
    hd = head_dims(r, heads, ctx.hidden_size, n, prov)
    return [
        FullAttention(dtype=ctx.dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i]) for i in range(n)
    ]


def kv_heads(r: ConfigReader, heads: int, n: int, prov: dict[str, str]) -> tuple[int, ...]:
    if r.bool("multi_query"):
        prov["num_kv_heads"] = "multi_query = true: one KV head shared by all query heads (MQA)"
        return (1,) * n
    for key in ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"):
        values = r.int_or_list(key, n)
        if values is not None:
            shown = values[0] if len(set(values)) == 1 else list(values)
            prov["num_kv_heads"] = f"{r.path(key)} = {shown}"
            return values
    fixed = class_default(r, "num_key_value_heads")
    if fixed is not None:
        prov["num_kv_heads"] = f"no KV-head key: the config class's default, {fixed}"
        return (fixed,) * n
    prov["num_kv_heads"] = f"no KV-head key: num_attention_heads = {heads} (MHA)"
    return (heads,) * n


def head_dims(
    r: ConfigReader, heads: int, hidden: int, n: int, prov: dict[str, str]
) -> tuple[int, ...]:
    for key in ("head_dim", "kv_channels", "attention_head_dim"):
        values = r.int_or_list(key, n)
        if values is not None:
            prov["head_dim"] = (
                f"{r.path(key)} = {values[0] if len(set(values)) == 1 else list(values)}"
            )
            return values
    fixed = class_default(r, "head_dim")
    if fixed is not None:
        prov["head_dim"] = f"no head_dim: the config class's default, {fixed}"
        return (fixed,) * n
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
    kinds: list[L.MixerKind],
    heads: int,
    hidden: int,
    dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:
    n = len(kinds)
    attn = any(k in (L.FULL, L.SLIDING, L.CHUNKED) for k in kinds)
    mla = _mla(r, heads, dtype, prov) if attn else None
    kv = kv_heads(r, heads, n, prov) if attn and mla is None else (0,) * n
    hd = head_dims(r, heads, hidden, n, prov) if attn and mla is None else (0,) * n
    window = r.int("sliding_window", default=None) if L.SLIDING in kinds else None
    if window is not None:
        prov["sliding_window"] = f"{r.path('sliding_window')} = {window}"
    chunk = r.int("attention_chunk_size", default=None) if L.CHUNKED in kinds else None
    if L.SLIDING in kinds and window is None:
        raise r.missing(("sliding_window",))
    if L.CHUNKED in kinds and chunk is None:
        raise r.missing(("attention_chunk_size",))
    if chunk is not None:
        prov["attention_chunk_size"] = f"{r.path('attention_chunk_size')} = {chunk}"
    mamba = _mamba2(r, dtype, prov) if L.MAMBA2 in kinds else None
    gdn = gated_deltanet(r, dtype, prov) if L.GDN in kinds else None
    out: list[Layout] = []
    for i, kind in enumerate(kinds):
        if kind in (L.FULL, L.SLIDING, L.CHUNKED) and mla is not None:
            out.append(mla)
        elif kind == L.FULL:
            out.append(FullAttention(dtype=dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i]))
        elif kind == L.SLIDING:
            assert window is not None  # refused above when missing
            out.append(
                SlidingWindow(
                    dtype=dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i], sliding_window=window
                )
            )
        elif kind == L.CHUNKED:
            assert chunk is not None  # refused above when missing
            out.append(
                ChunkedLocal(
                    dtype=dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i], chunk_size=chunk
                )
            )
        elif kind == L.MAMBA2:
            assert mamba is not None  # read above: MAMBA2 is in kinds
            out.append(mamba)
        elif kind == L.GDN:
            assert gdn is not None  # read above: GDN is in kinds
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


def _mamba2(r: ConfigReader, dtype: CacheDtype, prov: dict[str, str]) -> Mamba2State:
    num_heads = r.int("mamba_num_heads", "num_heads")
    head_dim = r.int("mamba_head_dim", "head_dim")
    state = r.int("ssm_state_size")
    groups = r.int("n_groups", default=1)
    kernel = r.int("conv_kernel", "mamba_d_conv", default=4)
    # Nemotron-H in vLLM keeps the SSM state in float32 unless the config says otherwise.
    ssm = _state_dtype(r, "mamba_ssm_cache_dtype", FP32)
    prov["mamba2"] = (
        f"mamba_num_heads {num_heads} × mamba_head_dim {head_dim}, ssm_state_size {state}, "
        f"n_groups {groups}, conv_kernel {kernel}, SSM state {ssm.name}"
    )
    from kvcalc.model.recurrent_layouts import Mamba2State

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
    # Qwen4ExpForCausalLMConfig subclasses Qwen3_5ForConditionalGenerationConfig
    "Qwen4ExpForCausalLM",
)  # fmt: skip


def _gdn_state_dtype(r: ConfigReader, dtype: CacheDtype) -> tuple[CacheDtype, str]:
    """The recurrent-state dtype vLLM 0.33 uses for Gated DeltaNet layers, and where it came from.

    Qwen3.5/3.6 (by architecture, as vLLM's config hook is keyed): the text config's
    ``mamba_ssm_dtype`` (float32 in the published configs). Qwen3-Next has no such hook: vLLM keeps
    ``mamba_ssm_cache_dtype = auto``, the model dtype, whatever the config carries (recorded: the
    same blocks with a top-level ``mamba_ssm_dtype`` of float32 and bfloat16); the key is still
    read, for SGLang, whose ``mamba2_state_dtype`` takes it (``engines/sglang/mamba.py``).
    """
    arch = r.raw.get("architectures")
    if isinstance(arch, list) and set(arch) & set(_QWEN3_5_ARCHITECTURES):
        if r.has("mamba_ssm_dtype"):
            ssm = _state_dtype(r, "mamba_ssm_dtype", dtype)
            return ssm, f"recurrent state {ssm.name} ({r.path('mamba_ssm_dtype')})"
        return dtype, f"recurrent state {dtype.name} (no mamba_ssm_dtype: the model dtype)"
    if r.has("mamba_ssm_dtype"):
        r.str("mamba_ssm_dtype")  # SGLang's state dtype; not vLLM's
    return (
        dtype,
        f"recurrent state {dtype.name} (the model dtype: vLLM's mamba_ssm_cache_dtype auto)",
    )


def gated_deltanet(r: ConfigReader, dtype: CacheDtype, prov: dict[str, str]) -> GatedDeltaNetState:
    """A Gated DeltaNet layer's state over the flat ``linear_*`` keys (Qwen3-Next's; also for the
    families with their own layer reader: Qwen4-Exp)."""
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
    from kvcalc.model.recurrent_layouts import GatedDeltaNetState

    return GatedDeltaNetState(
        dtype=dtype,
        ssm_dtype=ssm,
        conv_kernel=kernel,
        num_k_heads=k_heads,
        num_v_heads=v_heads,
        head_k_dim=k_dim,
        head_v_dim=v_dim,
    )
