"""vLLM 0.33's ``--mamba-cache-dtype`` and ``--mamba-ssm-cache-dtype``: the recurrent states' dtypes.

``config/cache.py``: both ``auto``, ``float32``, ``float16`` or ``bfloat16`` (``MambaDType``).
``model_executor/layers/mamba/mamba_utils.py`` ``MambaStateDtypeCalculator``:

- the conv state (every recurrent layer) is ``mamba_cache_dtype``, ``auto`` = the model dtype
  (``get_kv_cache_torch_dtype``);
- the temporal (SSM / recurrent) state of Mamba1, Mamba2 and Gated DeltaNet layers
  (``_mamba_state_dtype``) is ``mamba_ssm_cache_dtype``, ``auto`` = the conv state's dtype;
- Kimi Delta Attention (``kda_state_dtype``): ``auto`` = float32, else float32 or bfloat16 only
  (vLLM refuses float16);
- short convolutions have no temporal state.

Before that, the config hooks of ``model_executor/models/config.py`` turn ``auto`` into the
checkpoint's choice: ``NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype`` (the config's
``mamba_ssm_cache_dtype``, else float32) and ``Qwen3_5ForConditionalGenerationConfig`` (the text
config's ``mamba_ssm_dtype``); a value the user gives wins over both. kvcalc's config readers apply
those hooks already (``hfconfig/generic.py``), so the model's layers hold the ``auto`` dtypes; this
module applies what the flags change.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP16, FP32, CacheDtype
from kvcalc.model.layouts import Layout, RecurrentState
from kvcalc.model.shape import ModelShape

MAMBA_DTYPES: dict[str, CacheDtype] = {"float32": FP32, "float16": FP16, "bfloat16": BF16}
#: architectures with a config hook that sets the SSM dtype when it is ``auto``
#: (``MODELS_CONFIG_MAP`` in ``model_executor/models/config.py``)
_NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2")
_QWEN3_5 = ("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
            "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForCausalLM")  # fmt: skip


def parse_mamba_dtype(text: str | None, *, what: str) -> CacheDtype | None:
    """``auto`` (or None) → None; else the dtype vLLM's ``MambaDType`` names."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    dtype = MAMBA_DTYPES.get(str(text).strip().lower())
    if dtype is None:
        raise InputError(f"{what}: {text!r} is not one vLLM takes",
                         hint="choose auto, float32, float16 or bfloat16", code="invalid-input")  # fmt: skip
    return dtype


def _hooked(model: ModelShape) -> bool:
    """The SSM dtype was set by a config hook (so it does not follow the conv dtype)."""
    archs = set(model.architectures) | set(model.config_architectures)
    if archs & set(_NEMOTRON_H):
        return True
    keys = model.config_keys
    return bool(archs & set(_QWEN3_5)) and (
        "mamba_ssm_dtype" in keys or "text_config.mamba_ssm_dtype" in keys
    )


def _state(layer: RecurrentState, conv: CacheDtype | None, ssm: CacheDtype | None,
           hooked: bool) -> RecurrentState:  # fmt: skip
    from kvcalc.model.recurrent_layouts import KimiDeltaState, ShortConvState

    new_conv = conv or layer.dtype
    if isinstance(layer, KimiDeltaState):
        if ssm is FP16:
            raise InputError("vLLM refuses --mamba-ssm-cache-dtype float16 for Kimi Delta Attention "
                             "(kda_state_dtype takes float32 or bfloat16)",
                             hint="use float32 or bfloat16", code="invalid-input")  # fmt: skip
        new_ssm = ssm or layer.ssm_dtype  # auto: float32, whatever the conv dtype
    elif isinstance(layer, ShortConvState):
        new_ssm = layer.ssm_dtype  # no temporal state
    elif ssm is not None:
        new_ssm = ssm
    elif hooked:
        new_ssm = layer.ssm_dtype
    else:  # auto: the conv state's dtype
        new_ssm = new_conv if conv is not None else layer.ssm_dtype
    return replace(layer, dtype=new_conv, ssm_dtype=new_ssm)


def with_mamba_dtypes(
    model: ModelShape, mamba_cache_dtype: str | None, mamba_ssm_cache_dtype: str | None
) -> tuple[ModelShape, tuple[str, ...]]:
    """``model`` with its recurrent states in the dtypes the flags give, and the plan's note."""
    conv = parse_mamba_dtype(mamba_cache_dtype, what="--mamba-cache-dtype")
    ssm = parse_mamba_dtype(mamba_ssm_cache_dtype, what="--mamba-ssm-cache-dtype")
    if conv is None and ssm is None:
        return model, ()
    from kvcalc.model.recurrent_layouts import ParallelHybrid  # loaded for recurrent models only

    hooked = _hooked(model)
    layers: list[Layout] = []
    for layer in model.layers:
        new: Layout = layer
        if isinstance(layer, ParallelHybrid):
            new = replace(layer, mixer=_state(layer.mixer, conv, ssm, hooked))
        elif isinstance(layer, RecurrentState):
            new = _state(layer, conv, ssm, hooked)
        layers.append(new)
    if not any(isinstance(layer, RecurrentState) for layer in model.layers):
        return model, (
            "--mamba-cache-dtype/--mamba-ssm-cache-dtype: no recurrent layers, no effect",
        )
    states = sorted({(x.dtype.name, x.ssm_dtype.name) for x in layers
                     if isinstance(x, RecurrentState)})  # fmt: skip
    shown = "; ".join(f"conv {c}, state {s}" for c, s in states)
    note = (f"recurrent states as --mamba-cache-dtype {mamba_cache_dtype or 'auto'} / "
            f"--mamba-ssm-cache-dtype {mamba_ssm_cache_dtype or 'auto'} give them: {shown} "
            "(mamba_utils.py MambaStateDtypeCalculator)")  # fmt: skip
    changed = tuple(layers) != model.layers
    return (replace(model, layers=tuple(layers)) if changed else model), (note,)
