"""Smaller copies of a ``config.json`` for verification. Pure: dicts in, dicts out.

:func:`slice_layers` keeps the first ``n`` layers and slices every per-layer key with them, so the
layer-type pattern stays the model's own (``layer_types``, ``hybrid_override_pattern``,
``no_rope_layers``, index lists). :func:`shrink_for_run` makes a model cheap to build with random
weights on a CPU while keeping every number the KV cache depends on: KV heads, head dims, windows,
``kv_lora_rank``/``qk_rope_head_dim``, state sizes. It shrinks the vocabulary, MLP/MoE widths and the
number of experts, and drops the checkpoint's quantization (random weights are not quantized).
"""

from __future__ import annotations

from typing import Any

from kvcalc.errors import InputError

LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
#: per-layer lists and strings, sliced with the layers
PER_LAYER_KEYS = ("layer_types", "hybrid_override_pattern", "no_rope_layers", "layers_block_type")
#: lists of layer indices, filtered to the kept layers
INDEX_LIST_KEYS = ("mlp_only_layers", "moe_layers", "swa_layers")
RUN_VOCAB_SIZE = 1024
RUN_MLP_SIZE = 64
RUN_EXPERTS = 4
_MLP_KEYS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
             "intermediate_size_mlp", "ffn_hidden_size", "n_inner", "expert_intermediate_size")  # fmt: skip
_EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "n_experts")
_DROP_KEYS = ("quantization_config", "auto_map", "compression_config")


def _text_parts(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The config and, for multimodal wrappers, its ``text_config``."""
    parts = [raw]
    text = raw.get("text_config")
    if isinstance(text, dict):
        parts.append(text)
    return parts


def num_layers(raw: dict[str, Any]) -> int | None:
    for part in reversed(_text_parts(raw)):
        for key in LAYER_COUNT_KEYS:
            if isinstance(part.get(key), int):
                return part[key]
    return None


def slice_layers(raw: dict[str, Any], n: int) -> dict[str, Any]:
    """A copy of ``raw`` with only its first ``n`` layers."""
    total = num_layers(raw)
    if total is None:
        raise InputError("the config gives no layer count to slice", code="config-invalid")
    if not 1 <= n <= total:
        raise InputError(f"--layers must be between 1 and the model's {total} layers, got {n}",
                         code="invalid-input")  # fmt: skip
    out = dict(raw)
    if isinstance(raw.get("text_config"), dict):
        out["text_config"] = dict(raw["text_config"])
    for part in _text_parts(out):
        for key in LAYER_COUNT_KEYS:
            if isinstance(part.get(key), int):
                part[key] = n
        for key in PER_LAYER_KEYS:
            value = part.get(key)
            if isinstance(value, (list, str)) and len(value) == total:
                part[key] = value[:n]
        for key in INDEX_LIST_KEYS:
            value = part.get(key)
            if isinstance(value, list) and all(isinstance(v, int) for v in value):
                part[key] = [v for v in value if v < n]
    return out


def shrink_for_run(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a config cheap to build and run, the keys changed → their old values)."""
    out = dict(raw)
    if isinstance(raw.get("text_config"), dict):
        out["text_config"] = dict(raw["text_config"])
    changed: dict[str, Any] = {}
    for part in _text_parts(out):
        for key in _DROP_KEYS:
            if key in part:
                changed[key] = "dropped"
                del part[key]
        _set(part, changed, "vocab_size", RUN_VOCAB_SIZE, shrink_only=True)
        for key in _MLP_KEYS:
            _set(part, changed, key, RUN_MLP_SIZE, shrink_only=True)
        for key in _EXPERT_KEYS:
            _set(part, changed, key, RUN_EXPERTS, shrink_only=True)
        experts = next((part[k] for k in _EXPERT_KEYS if isinstance(part.get(k), int)), None)
        if experts:
            for key in ("num_experts_per_tok", "moe_topk", "top_k"):
                _set(part, changed, key, min(2, experts), shrink_only=True)
            _set(part, changed, "n_group", 1, shrink_only=True)
            _set(part, changed, "topk_group", 1, shrink_only=True)
        for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
            if key in part:
                changed.setdefault(key, part[key])
                part[key] = 0
    return out, changed


def _set(
    part: dict[str, Any], changed: dict[str, Any], key: str, value: int, *, shrink_only: bool
) -> None:
    old = part.get(key)
    if isinstance(old, bool) or not isinstance(old, int):
        return
    if shrink_only and old <= value:
        return
    changed[key] = old
    part[key] = value
