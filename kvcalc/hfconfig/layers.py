"""Which cache layout each layer has, from the config's pattern keys.

Resolution order (the first that applies wins), each rule as the engines read it:

1. ``layer_types`` (transformers' per-layer list; gpt-oss, new Gemma and Qwen configs);
2. ``hybrid_override_pattern`` (Nemotron-H: ``M`` Mamba2, ``*`` attention, ``E``/``-`` no cache);
3. ``full_attention_interval`` (Qwen3-Next: every k-th layer full, the rest Gated DeltaNet);
4. Llama 4: ``attention_chunk_size`` with ``no_rope_layers`` (1 = RoPE = chunked) or, when absent,
   transformers' default ``no_rope_layer_interval`` 4 (every 4th layer full);
5. ``sliding_window_pattern`` (Gemma 3: layer i slides unless (i+1) % pattern == 0);
6. Gemma 2: even layers slide;
7. ``use_sliding_window`` + ``max_window_layers`` (Qwen2: layers >= max_window_layers slide);
8. a plain ``sliding_window`` for every layer (Mistral), ``attention_chunk_size`` for every layer;
9. otherwise every layer is full attention.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import LayerKind, Layout, RecurrentVariant

#: layer kinds produced here
FULL, SLIDING, CHUNKED, NONE = LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.NONE
#: recurrent layers, by the state they keep
MAMBA2, GDN = RecurrentVariant.MAMBA2, RecurrentVariant.GATED_DELTANET
MAMBA1 = RecurrentVariant.MAMBA1
KDA = RecurrentVariant.KIMI_DELTA
PARALLEL = RecurrentVariant.PARALLEL
#: a mixer whose weights :mod:`kvcalc.hfconfig.weights` does not count (they are refused)
UNCOUNTED = "uncounted"
#: LFM2's gated short convolution (counted for the dense lfm2 layout)
SHORT_CONV = "short_conv"
#: a Zamba2 hybrid layer for the weight count: its Mamba2 mixer, its projection and LoRA adapters
#: into the shared transformer block (the block's own weights where it is first used)
ZAMBA2_HYBRID = "zamba2_hybrid"
#: what one layer mixes with: an attention kind or the recurrent state it keeps
MixerKind = LayerKind | RecurrentVariant

_LAYER_TYPE_NAMES: dict[str, MixerKind] = {
    "full_attention": FULL,
    "attention": FULL,
    "global_attention": FULL,
    "sliding_attention": SLIDING,
    "local_attention": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": GDN,
    "mamba": MAMBA2,
}
_NEMOTRON_H: dict[str, MixerKind] = {"M": MAMBA2, "*": FULL, "E": NONE, "-": NONE}
#: keys of layouts kvcalc does not model yet: refusing beats guessing
UNSUPPORTED_KEYS = {
    "attn_layer_period": "Jamba-style Mamba1 hybrids",
    "layers_block_type": "Jamba/Zamba-style hybrids",
    "block_configs": "Nemotron-NAS per-block configs",
    "rwkv_version": "RWKV",
    "cross_attention_layers": "cross-attention (Mllama)",
}


def weight_kind(layout: Layout) -> LayerKind:
    """What the weight count sees in an attention-family layer: a sliding window, full attention
    (every layer with a cache, and the shared, latent and compressed ones), or none."""
    if layout.kind is LayerKind.SLIDING:
        return SLIDING
    if layout.has_cache or layout.kind in (LayerKind.SHARED, LayerKind.MLA, LayerKind.COMPRESSED):
        return FULL
    return NONE


def with_weight_kinds(layouts: list[Layout]) -> tuple[list[Layout], tuple[str, ...]]:
    """An attention family reader's layouts and what the weight count sees in each
    (:func:`weight_kind`): what a family's ``layouts`` hook returns."""
    return layouts, tuple(weight_kind(x) for x in layouts)


def layer_kinds(r: ConfigReader, num_layers: int) -> tuple[list[MixerKind], str]:
    """The kind of each layer and a sentence saying which keys decided it."""
    for key, what in UNSUPPORTED_KEYS.items():
        if r.has(key):
            raise ConfigError(
                f"{r.source}: {r.path(key)} ({what}) is not supported yet",
                hint="kvcalc refuses layouts it cannot size exactly; please file an issue",
                code="config-unverified",
            )
    model_type = r.str("model_type", "") or ""
    types = r.list("layer_types")
    if types is not None:
        return _from_layer_types(r, types, num_layers, model_type)
    pattern = r.str("hybrid_override_pattern")
    if pattern is not None:
        return _from_nemotron_pattern(r, pattern, num_layers)
    interval = r.int("full_attention_interval", default=None)
    if interval is not None:
        kinds = [FULL if (i + 1) % interval == 0 else GDN for i in range(num_layers)]
        return kinds, f"full_attention_interval = {interval}: every {interval}th layer full"
    chunk = r.int("attention_chunk_size", default=None)
    if chunk is not None:
        return _llama4(r, num_layers, model_type)
    window = r.int("sliding_window", default=None)
    if window is not None:
        return _sliding(r, num_layers, model_type)
    return [FULL] * num_layers, "no window or pattern keys: every layer full attention"


def _from_layer_types(
    r: ConfigReader, types: list, num_layers: int, model_type: str
) -> tuple[list[MixerKind], str]:
    if len(types) != num_layers:
        raise ConfigError(
            f"{r.source}: {r.path('layer_types')} has {len(types)} entries for {num_layers} layers",
            code="config-invalid",
        )
    unknown = sorted(
        {str(t)[:40] for t in types if not isinstance(t, str) or t not in _LAYER_TYPE_NAMES}
    )
    if unknown:
        raise ConfigError(
            f"{r.source}: unknown layer_types {', '.join(unknown)}",
            hint="known: " + ", ".join(_LAYER_TYPE_NAMES),
            code="config-unverified",
        )
    kinds = [_LAYER_TYPE_NAMES[t] for t in types]
    if GDN in kinds and not model_type.startswith(("qwen3_next", "qwen3_5")):
        raise ConfigError(
            f"{r.source}: linear_attention layers of model_type {model_type!r} are not supported",
            hint="kvcalc knows Gated DeltaNet (Qwen3-Next, Qwen3.5) linear attention",
            code="config-unverified",
        )
    return kinds, "layer_types lists each layer"


def _from_nemotron_pattern(
    r: ConfigReader, pattern: str, num_layers: int
) -> tuple[list[MixerKind], str]:
    unknown = sorted(set(pattern) - set(_NEMOTRON_H))
    if unknown or len(pattern) != num_layers:
        raise ConfigError(
            f"{r.source}: hybrid_override_pattern must have {num_layers} characters from "
            f"'M*E-', got {len(pattern)}" + (f" with {''.join(unknown)!r}" if unknown else ""),
            code="config-invalid",
        )
    return [_NEMOTRON_H[c] for c in pattern], "hybrid_override_pattern: M Mamba2, * attention"


def _llama4(r: ConfigReader, num_layers: int, model_type: str) -> tuple[list[MixerKind], str]:
    no_rope = r.list("no_rope_layers")
    if no_rope:
        if len(no_rope) != num_layers or any(v not in (0, 1, True, False) for v in no_rope):
            raise ConfigError(
                f"{r.source}: no_rope_layers must list 0/1 for each of {num_layers} layers",
                code="config-invalid",
            )
        kinds: list[MixerKind] = [CHUNKED if v else FULL for v in no_rope]
        return kinds, "attention_chunk_size + no_rope_layers (1 = RoPE = chunked)"
    if model_type.startswith("llama4"):
        step = r.int("no_rope_layer_interval", default=4)
        kinds = [FULL if (i + 1) % step == 0 else CHUNKED for i in range(num_layers)]
        return kinds, (
            f"attention_chunk_size; no no_rope_layers, so transformers' default "
            f"no_rope_layer_interval = {step}: every {step}th layer full (NoPE)"
        )
    return [CHUNKED] * num_layers, "attention_chunk_size for every layer"


def _sliding(r: ConfigReader, num_layers: int, model_type: str) -> tuple[list[MixerKind], str]:
    pattern = r.int("sliding_window_pattern", default=None)
    if pattern is not None:
        kinds: list[MixerKind] = [
            FULL if (i + 1) % pattern == 0 else SLIDING for i in range(num_layers)
        ]
        return (
            kinds,
            f"sliding_window_pattern = {pattern}: layer i slides unless (i+1) % {pattern} == 0",
        )
    if model_type == "gemma2":
        kinds = [SLIDING if i % 2 == 0 else FULL for i in range(num_layers)]
        return kinds, "Gemma 2 alternates: even layers slide, odd layers full"
    if r.has("use_sliding_window"):
        if not r.bool("use_sliding_window"):
            return [FULL] * num_layers, "use_sliding_window = false: every layer full attention"
        if model_type == "qwen3_moe":
            # Qwen3MoeConfig (transformers 5.20) has no max_window_layers nor layer_types, so
            # vLLM 0.33 sets CacheConfig.sliding_window (arg_utils.py: no layer_types) and every
            # layer slides (recorded: Qwen3-30B-A3B with max_window_layers 24, 48 sliding layers)
            return [SLIDING] * num_layers, (
                "use_sliding_window (Qwen3-MoE: max_window_layers not read, every layer slides)"
            )
        first = r.int("max_window_layers", default=0, minimum=0)
        kinds = [SLIDING if i >= first else FULL for i in range(num_layers)]
        return kinds, f"use_sliding_window with max_window_layers = {first}"
    return [SLIDING] * num_layers, "a plain sliding_window applies to every layer"


def window_cleared(r: ConfigReader) -> bool:
    """transformers' Qwen2-style config classes clear ``sliding_window`` (None, or 0 for
    Qwen2-MoE) when ``use_sliding_window`` is false, so vLLM sees no window at all."""
    return r.has("use_sliding_window") and not r.bool("use_sliding_window")
