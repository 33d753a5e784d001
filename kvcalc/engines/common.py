"""Helpers several engine models share, so that no engine borrows from another engine's modules.

- :func:`is_float32_config`: whether the checkpoint declares float32 (vLLM, SGLang and
  TensorRT-LLM all serve such checkpoints in 16 bits by default);
- :func:`pp_stages`: the pipeline-stage split of ``get_pp_indices`` (vLLM's, which SGLang's
  ``get_pp_indices`` copies);
- :func:`binary_search_max_len`: vLLM's ``estimate_max_model_len``, the longest request that fits;
- :func:`share_of_free`: a fraction of the memory left after loading (TensorRT-LLM, LMDeploy).
"""

from __future__ import annotations

from collections.abc import Callable

from kvcalc.errors import InputError
from kvcalc.model.dtypes import FP32
from kvcalc.model.shape import ModelShape


def is_float32_config(model: ModelShape) -> bool:
    """The checkpoint declares float32 (whatever dtype the parser settled on for serving)."""
    declared = (model.config_dtype or "").strip().lower()
    return model.dtype is FP32 or declared in ("float32", "fp32", "float")


def pp_stages(num_layers: int, pp: int, partition: tuple[object, ...] | None = None) -> list[range]:
    """``get_pp_indices``: L // pp per stage, the remainder to stages -2, -3, ... (never the last)."""
    if partition is not None:
        given = [n for n in partition if isinstance(n, int) and not isinstance(n, bool)]
        counts = len(given) == len(partition)
        if not counts or len(given) != pp or sum(given) != num_layers or min(given) < 1:
            shown = list(partition) if len(partition) <= 16 else f"[{len(partition)} parts]"
            raise InputError(
                f"pp_layer_partition {shown} must have {pp} positive integer parts summing to "
                f"{num_layers}",
                code="invalid-parallelism",
            )
        parts = given
    else:
        parts = [num_layers // pp] * pp
        for i in range(2, num_layers % pp + 2):
            parts[-i] += 1
    starts = [sum(parts[:i]) for i in range(pp)]
    return [range(s, s + n) for s, n in zip(starts, parts, strict=False)]


def binary_search_max_len(max_len: int, fits: Callable[[int], bool]) -> int:
    """vLLM's ``estimate_max_model_len``: the largest ``L`` in ``1..max_len`` with ``fits(L)``, else 0."""
    if not fits(1):
        return 0
    left, right, result = 1, max_len, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def share_of_free(free_bytes: int, fraction: float) -> int:
    """``int(free · fraction)``; a free memory at or below zero stays as it is (nothing is left)."""
    return int(free_bytes * fraction) if free_bytes > 0 else free_bytes
