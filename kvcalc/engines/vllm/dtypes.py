"""The dtype vLLM runs a model in (``--dtype``), which the weights and an ``auto`` KV cache follow.

Read in vLLM 0.33.0:

- ``platforms/cuda.py`` ``supported_dtypes``: bf16, fp16, fp32 on compute capability >= 8.0; fp16
  and fp32 on 6.x/7.x (T4, V100, RTX 20xx: no bf16);
- ``config/model.py`` ``_FLOAT16_NOT_SUPPORTED_MODELS``: ``gemma2``, ``gemma3``, ``gemma3_text`` and
  ``glm4`` never run in fp16 ("Numerical instability");
- ``config/model.py`` ``_resolve_auto_dtype`` (``--dtype auto``): the supported dtypes less fp16
  for those models; a float32 config becomes the first of them; a config dtype among them is kept;
  any other falls back to the first, with the warning "Your device 'Tesla T4' (with compute
  capability 7.5) doesn't support torch.bfloat16. Falling back to torch.float16 for compatibility."
  (a bf16 Gemma-2 on a T4 falls back to torch.float32: twice the weights and the KV cache);
- ``config/model.py`` ``_check_valid_dtype``: ``--dtype float16`` for those models is refused;
- ``platforms/cuda.py`` ``check_if_supports_dtype`` (``Worker.init_device``): ``--dtype bfloat16``
  below 8.0 is refused ("Bfloat16 is only supported on GPUs with compute capability of at least
  8.0. ...").
"""

from __future__ import annotations

from kvcalc.engines.common import is_float32_config
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import BF16, FP16, FP32, CacheDtype
from kvcalc.model.shape import ModelShape

#: model types vLLM never serves in fp16 (``_FLOAT16_NOT_SUPPORTED_MODELS``), with its reason
NO_FLOAT16 = {
    name: "Numerical instability. Please use bfloat16 or float32 instead."
    for name in ("gemma2", "gemma3", "gemma3_text", "glm4")
}
#: ``--dtype`` spellings (``_STR_DTYPE_TO_TORCH_DTYPE``) and kvcalc's short ones
_GIVEN = {"half": FP16, "float16": FP16, "fp16": FP16, "float": FP32, "float32": FP32,
          "fp32": FP32, "bfloat16": BF16, "bf16": BF16}  # fmt: skip


@frozen
class ServingDtype:
    dtype: CacheDtype
    #: what kvcalc says about it (None: the config's dtype, nothing to say)
    note: str | None = None
    #: the warning vLLM logs when it falls back (its own text)
    log: str | None = None
    #: vLLM refuses the dtype asked for: its error, and the fix
    refusal: str | None = None
    fix: str | None = None


def _platform_dtypes(cc: tuple[int, int] | None) -> list[CacheDtype]:
    if cc is None or cc >= (8, 0):
        return [BF16, FP16, FP32]
    if cc >= (6, 0):
        return [FP16, FP32]
    return [FP32]


def _device(gpu_name: str | None, cc: tuple[int, int] | None) -> str:
    name = repr(gpu_name or "the GPU")
    return f"{name} (with compute capability {cc[0]}.{cc[1]})" if cc else name


def serving_dtype(
    model: ModelShape, given: str | None, cc: tuple[int, int] | None, gpu_name: str | None
) -> ServingDtype:
    """The dtype vLLM 0.33 runs ``model`` in for ``--dtype given`` (None/``auto``: its rule)."""
    model_type = model.model_type
    if given is not None and given.strip().lower() != "auto":
        dtype = _GIVEN.get(given.strip().lower())
        if dtype is None:
            return ServingDtype(dtype=model.dtype)  # the weight estimate reports the bad name
        if dtype is FP16 and model_type in NO_FLOAT16:
            return ServingDtype(
                dtype=dtype,
                refusal=f"The model type {model_type!r} does not support float16. Reason: "
                f"{NO_FLOAT16[model_type]}",
                fix="--dtype bfloat16 (on compute capability >= 8.0) or --dtype float32",
            )
        if dtype is BF16 and cc is not None and cc < (8, 0):
            return ServingDtype(
                dtype=dtype,
                refusal="Bfloat16 is only supported on GPUs with compute capability of at least "
                f"8.0. Your {gpu_name or 'GPU'} GPU has compute capability {cc[0]}.{cc[1]}. You "
                "can use float16 instead by explicitly setting the `dtype` flag in CLI, for "
                "example: --dtype=half.",
                fix="--dtype float16" if model_type not in NO_FLOAT16 else "--dtype float32",
            )
        return ServingDtype(dtype=dtype)
    supported = [d for d in _platform_dtypes(cc) if not (d is FP16 and model_type in NO_FLOAT16)]
    preferred = supported[0]
    if is_float32_config(model):
        why = "no compute capability given: SM >= 8.0 assumed, " if cc is None else ""
        return ServingDtype(
            dtype=preferred,
            note=f"config dtype is float32 ({model.config_dtype or 'absent'}); vLLM casts it to "
            f"{preferred.name} ({why}vllm/config/model.py _resolve_auto_dtype, 0.33.0)",
        )
    if model.dtype in supported:
        return ServingDtype(dtype=model.dtype)
    log = (
        f"Your device {_device(gpu_name, cc)} doesn't support torch.{model.dtype.torch_name}. "
        f"Falling back to torch.{preferred.torch_name} for compatibility."
    )
    reason = "no bf16 below compute capability 8.0" if model.dtype is BF16 else (
        f"vLLM never runs {model_type} in fp16")  # fmt: skip
    return ServingDtype(
        dtype=preferred,
        log=log,
        note=f"--dtype auto: the config's {model.dtype.name} falls back to {preferred.name} "
        f"({reason}; vllm/config/model.py _resolve_auto_dtype): weights and an auto KV cache "
        f"in {preferred.name}",
    )
