"""vLLM 0.33's ``--disable-sliding-window`` (``config/model.py``).

``ModelConfig`` caps the derived ``max_model_len`` at the config's ``sliding_window`` when that is
smaller (``_get_and_verify_max_len``: "If sliding window is manually disabled, max_length should be
less than the sliding window length"; the window replaces the config's length before the RoPE
``factor`` multiplies it, so a scaled config derives window × factor), then sets ``hf_text_config.sliding_window = None``; the model
files that build their sliding layers from it (``gemma2.py``, ``gemma3.py``, ``gpt_oss.py``,
``llama.py`` for Mistral) then build full-attention layers of the same shape. A model without a
sliding window (Llama 4's chunked layers) is unchanged.

Recorded with vLLM 0.33's own sizing for Gemma 2 and 3, gpt-oss, Mistral 7B v0.1, Llama 4 Scout,
Phi-3, PhiMoE, AFMoE, EXAONE 4, Step-3.5, MuseGlimmer's text model, Beam, Granite SWA and
Granite-MoE SWA, the Qwen2 family (unchanged: its config class clears the
window), and the families vLLM cannot start with it (tests/fixtures/vllm_0_33/
disable_sliding_window.json); other families are refused by name, since their model files may read
the window otherwise.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.vllm.refused import mixed_qwen2_windows
from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import CompressedSparseAttention
from kvcalc.model.layouts import FullAttention, SlidingWindow
from kvcalc.model.shape import ModelShape

#: the ``model_type`` values whose vLLM model files were recorded with the flag
RECORDED = frozenset({"gemma2", "gemma3_text", "gpt_oss", "mistral", "llama4", "llama4_text",
                      "phi3", "phimoe", "afmoe", "exaone4", "step3p5", "muse_glimmer_text",
                      "beam", "granite_swa", "granitemoe_swa"})  # fmt: skip
STRICT_REFUSAL = (
    "Validation error for field 'sliding_window': TypeError: Field 'sliding_window' expected "
    "int, got NoneType (value: None) (--disable-sliding-window sets the config's sliding_window "
    "to None, which this model's configuration class refuses)"
)
_WINDOW_PLUS_ONE = (
    "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int' ({file} builds its "
    "window as config.sliding_window + 1, which --disable-sliding-window has set to None)"
)
#: model types vLLM 0.33 cannot start with the flag, and its error: ``ModelConfig.__post_init__``
#: sets ``hf_text_config.sliding_window = None``, which transformers 5.20's strict config class
#: refuses (Gemma 4, DeepSeek-V4, EXAONE-MoE, MiMo-V2-Flash, Laguna; Dory's own validator) or the model file adds 1 to
#: (Cohere2, Cohere2-MoE).
#: Recorded at every length up to the window; above it the length is refused first, naming it.
STRICT_CONFIG: dict[str, str] = {
    "gemma4_text": STRICT_REFUSAL,
    "deepseek_v4": STRICT_REFUSAL,
    "exaone_moe": STRICT_REFUSAL,
    "mimo_v2_flash": STRICT_REFUSAL,
    "laguna": STRICT_REFUSAL,
    "cohere2": _WINDOW_PLUS_ONE.format(file="commandr.py"),
    "cohere2_moe": _WINDOW_PLUS_ONE.format(file="cohere2_moe.py"),
    "dory": (
        "Class validation error for validator 'validate_architecture': ValueError: "
        "sliding_window must be a positive integer (Dory's configuration checks the window "
        "--disable-sliding-window has set to None)"
    ),
}
#: the layers' window less the config's ``sliding_window`` that caps the length (commandr.py and
#: cohere2_moe.py attend to ``sliding_window + 1`` tokens; mimo_v2.py slides over
#: ``sliding_window_size``, which transformers' MiMoV2FlashConfig turns into ``sliding_window =
#: sliding_window_size + 1``: MiMo-V2-Flash's 128 caps at 129, recorded)
_WINDOW_OVER_CONFIG = {"cohere2": 1, "cohere2_moe": 1, "mimo_v2_flash": -1}
#: model types whose config class clears the window when ``use_sliding_window`` is false, so the
#: flag changes nothing (recorded: Qwen2.5-7B, Qwen1.5-MoE, MiMo-7B, Qwen2.5-VL-7B: full attention,
#: the length uncapped); with ``use_sliding_window`` true their model files were not recorded
CLEARED_WINDOW = frozenset({"qwen2", "qwen2_moe", "mimo", "qwen2_5_vl"})
#: of those, the types recorded with ``use_sliding_window`` true: the config's ``sliding_window``
#: caps the length whether its layers slide or not (Qwen2.5-7B with a 4,096 window and
#: ``max_window_layers`` 0, every layer sliding, and 28, none: 4,096 taken, 8,192 refused, every
#: layer full attention; Qwen1.5-MoE, MiMo-7B and Qwen2.5-VL-7B the same with ``max_window_layers`` 0
#: and the layer count: Qwen2-MoE's layers are full attention either way, qwen2_moe.py reads no window)
WINDOW_KEPT_RECORDED = frozenset({"qwen2", "qwen2_moe", "mimo", "qwen2_5_vl"})


def without_sliding_window(model: ModelShape) -> tuple[ModelShape, tuple[str, ...]]:
    """``model`` as vLLM 0.33 serves it under ``--disable-sliding-window``, and a note."""
    if model.model_type in STRICT_CONFIG:
        return _refused_by_its_config(model)
    if model.model_type in CLEARED_WINDOW and model.sliding_window_cleared:
        note = (
            "--disable-sliding-window: use_sliding_window is false, no window to drop (unchanged)"
        )
        return model, (note,)
    windows = {x.sliding_window for x in model.layers if isinstance(x, SlidingWindow)}
    if model.model_type in WINDOW_KEPT_RECORDED:
        keys = model.config_keys
        kept = keys.get("sliding_window", keys.get("text_config.sliding_window"))
        if not windows and isinstance(kept, int) and kept > 0:
            windows = {kept}  # hf_text_config.sliding_window, although no layer slides
    elif model.model_type not in RECORDED:
        raise InputError(
            f"--disable-sliding-window is not modelled for {model.model_type} (vLLM 0.33's model "
            "file for it was not recorded with the flag)",
            hint="plan without it; recorded: " + ", ".join(sorted(RECORDED)),
            code="unmodelled-option",
        )
    if not windows:
        return model, ("--disable-sliding-window: the model has no sliding window (unchanged)",)
    if len(windows) > 1:  # vLLM caps the length at hf_text_config.sliding_window, one number
        raise InputError(
            f"--disable-sliding-window is not modelled for this {model.model_type} config: its "
            f"layers have {len(windows)} windows ({', '.join(f'{w:,}' for w in sorted(windows))}) "
            "and vLLM caps the length at the config's one sliding_window",
            hint="plan without it",
            code="unmodelled-option",
        )
    (window,) = windows
    if reason := mixed_qwen2_windows(model):  # the length is capped, then the build fails
        return _capped(replace(model, start_refusal=reason), window), (
            "--disable-sliding-window: vLLM caps the length at the window, then qwen2.py refuses "
            "the mixed layer types",
        )
    layers = tuple(
        FullAttention(kv_heads=x.kv_heads, k_dim=x.k_dim, v_dim=x.v_dim, dtype=x.dtype)
        if isinstance(x, SlidingWindow)
        else x
        for x in model.layers
    )
    changed = _capped(replace(model, layers=layers), window)
    note = f"--disable-sliding-window: the {window:,}-token window layers attend to every token"
    if changed.max_model_len != model.max_model_len:
        factor = model.max_model_len_rope_factor
        scaled = f" × the RoPE factor {factor:g}" if factor != 1.0 else ""
        note += f"; the derived max_model_len is the window{scaled}, {changed.max_model_len:,}"
    return changed, (note,)


def _capped(model: ModelShape, window: int) -> ModelShape:
    """``_get_and_verify_max_len``: the window replaces the config's length where it is smaller,
    before the RoPE factor scales it (so the comparison is with the unscaled length)."""
    factor = model.max_model_len_rope_factor
    if window * factor < model.max_model_len:
        return replace(
            model, max_model_len=int(window * factor), max_model_len_key="sliding_window"
        )
    return model


def _refused_by_its_config(model: ModelShape) -> tuple[ModelShape, tuple[str, ...]]:
    """vLLM 0.33 caps the length at the window (which a longer ``--max-model-len`` is refused
    against first), then fails to set the window to None: the model with the cap and the refusal."""
    windows = {
        x.sliding_window
        for x in model.layers
        if isinstance(x, (SlidingWindow, CompressedSparseAttention))
    }
    kept = model.config_keys.get("sliding_window")
    if not windows and isinstance(kept, int) and kept > 0:
        windows = {kept}  # hf_text_config.sliding_window, although no layer slides (Laguna)
    if len(windows) != 1:
        raise InputError(
            f"--disable-sliding-window is not modelled for this {model.model_type} config "
            f"({len(windows)} windows)",
            hint="plan without it",
            code="unmodelled-option",
        )
    (layer_window,) = windows
    window = layer_window - _WINDOW_OVER_CONFIG.get(model.model_type, 0)
    changed = _capped(replace(model, start_refusal=STRICT_CONFIG[model.model_type]), window)
    why = (
        "its model file adds 1 to the window it set to None"
        if _WINDOW_OVER_CONFIG.get(model.model_type, 0) > 0
        else "its configuration class refuses sliding_window = None"
    )
    note = (
        f"--disable-sliding-window: vLLM 0.33 refuses to start {model.model_type} with it ({why})"
    )
    return changed, (note,)
