"""Bytes of one weight tensor as the engine stores it: plain dtypes, and quantized formats with their
scales, zero points and ``g_idx`` (:class:`~kvcalc.hfconfig.quant.QuantSpec`), on one TP rank, padded
as vLLM allocates (vocabulary rows, mxfp4 MoE tiles).
"""

from __future__ import annotations

import fnmatch
import math
import re

from kvcalc.estimate.tensors import QUANTIZABLE_ROLES, Tensor
from kvcalc.hfconfig.quant import QuantSpec
from kvcalc.units import cdiv

#: vLLM's ``DEFAULT_VOCAB_PADDING_SIZE``: embedding and lm_head rows padded before the TP split
VOCAB_PADDING = 64
#: mxfp4 MoE tiles (vLLM ``mxfp4_round_up_hidden_size_and_intermediate_size``, Marlin and TRT-LLM
#: backends). The Triton backend pads the width to 64 only, but both H100 logs load as these tiles
#: say: gpt-oss-120b 65.91 GiB predicted vs 65.97 logged; gpt-oss-20b TP 2 7.08 vs 7.01.
MXFP4_HIDDEN_ALIGN = 256
MXFP4_INTERMEDIATE_ALIGN = 128


def _round_up(n: int, k: int) -> int:
    return cdiv(n, k) * k


class Pricer:
    """Bytes of one tensor (one TP rank's share), per storage dtype."""

    def __init__(self, spec: QuantSpec | None, dtype_name: str, dtype_bytes: int) -> None:
        self.spec, self.dtype_name, self.dtype_bytes = spec, dtype_name, dtype_bytes
        #: (id(tensor), tp, loaded) -> (the tensor, its bytes): one estimate prices each tensor
        #: several times (totals, stages, experts); the tensor is kept, so its id stays its own
        self._priced: dict[tuple[int, int, bool], tuple[Tensor, dict[str, int]]] = {}
        self._quantized: dict[int, tuple[Tensor, bool]] = {}

    def loaded_shape(self, t: Tensor, tp: int) -> tuple[int, int]:
        """One rank's ``(rows, cols)`` as vLLM allocates it (padded), not as the checkpoint has it."""
        rows, cols = t.shape_per_rank(tp)
        if t.groups and tp > 1 and t.groups % tp:  # Mamba2 groups replicated to one per rank
            return (t.rows - t.groups * t.group_rows) // tp + t.group_rows, cols
        if t.min_per_rank and tp > 1:  # padded up to a floor per rank (Kimi-Linear's experts)
            if t.split == "column":
                return max(rows, t.min_per_rank), cols
            return rows, max(cols, t.min_per_rank)
        if t.split == "vocab":
            return cdiv(_round_up(t.rows, VOCAB_PADDING), tp), cols
        if not (t.expert and self.spec and self.spec.method == "mxfp4"):
            return rows, cols
        h, w = MXFP4_HIDDEN_ALIGN, MXFP4_INTERMEDIATE_ALIGN
        if ".gate_up_proj" in t.name:  # rows: gate and up halves of the rank's width
            half = rows // 2 if rows % 2 == 0 else rows
            rows = (2 if half != rows else 1) * _round_up(half, w)
            return rows, _round_up(cols, h) if cols > 1 else cols
        if ".down_proj" in t.name:  # rows: hidden; cols: the rank's width
            return _round_up(rows, h), _round_up(cols, w) if cols > 1 else cols
        return rows, cols

    def quantized(self, t: Tensor) -> bool:
        """The tensor is stored in the quantized format (its name is not skipped)."""
        hit = self._quantized.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        value = self._is_quantized(t)
        self._quantized[id(t)] = (t, value)
        return value

    def _is_quantized(self, t: Tensor) -> bool:
        s = self.spec
        if (
            s is None
            or t.role not in QUANTIZABLE_ROLES
            or t.vision
            or (s.experts_only and not t.expert)
        ):
            return False
        if s.skip_exact:
            return t.name not in s.skip_modules
        return not any(_matches(t.name, pattern) for pattern in s.skip_modules)

    def __call__(self, t: Tensor, tp: int, *, loaded: bool = False) -> dict[str, int]:
        """The bytes per storage dtype (callers must not change the dict returned)."""
        key = (id(t), tp, loaded)
        hit = self._priced.get(key)
        if hit is not None and hit[0] is t:
            return hit[1]
        value = self._price(t, tp, loaded)
        self._priced[key] = (t, value)
        return value

    def _price(self, t: Tensor, tp: int, loaded: bool) -> dict[str, int]:
        rows, cols = self.loaded_shape(t, tp) if loaded else t.shape_per_rank(tp)
        if t.fp32:
            return {"fp32": rows * cols * t.copies * 4}
        if not self.quantized(t):
            return {self.dtype_name: rows * cols * t.copies * self.dtype_bytes}
        s = self.spec
        assert s is not None  # quantized() is False without a spec
        scales = _scale_count(s, rows, cols)
        if t.expert and s.method == "fp8" and s.scale_granularity == "block":
            scales = _fp8_expert_scales(s, t, rows, cols)
        out = {_data_name(s): cdiv(rows * cols * s.weight_bits, 8) * t.copies}
        _add(out, _scale_name(s), scales * s.scale_bytes * t.copies)
        _add(out, f"int{s.zero_point_bits}", cdiv(scales * s.zero_point_bits, 8) * t.copies)
        _add(out, "int32", (4 * cols if s.g_idx else 0) * t.copies)
        _add(out, "fp32", s.per_matrix_bytes * t.copies)
        return out


def _scale_count(s: QuantSpec, rows: int, cols: int) -> int:
    if s.scale_granularity == "channel":
        return rows
    if s.scale_granularity == "group":
        return rows * cdiv(cols, s.group_size)
    if s.scale_granularity == "block":
        return cdiv(rows, s.block_rows) * cdiv(cols, s.block_cols)
    return 1


#: vLLM 0.33's smallest refined fp8 MoE scale block (``refine_fp8_moe_block_shape``)
FP8_MOE_MIN_REFINED_BLOCK = 32


def refined_fp8_moe_block(
    block_n: int, block_k: int, ispp: int, hidden: int, *, split: bool
) -> int | None:
    """``oracle/fp8.py`` ``refine_fp8_moe_block_shape``: the square block vLLM 0.33 refines a
    block-fp8 expert's scales to when the rank's expert width ``ispp`` (``split``: TP-sharded) is
    not a multiple of the checkpoint's block, ``gcd(block_n, block_k, ispp, hidden)`` when at
    least 32; None where none is needed or possible."""
    if ispp % block_n == 0 and (not split or ispp % block_k == 0):
        return None
    refined = math.gcd(block_n, block_k, ispp, hidden)
    return refined if refined >= FP8_MOE_MIN_REFINED_BLOCK else None


def _fp8_expert_scales(s: QuantSpec, t: Tensor, rows: int, cols: int) -> int:
    """Block scales of one routed expert on one rank as vLLM 0.33's ``Fp8MoEMethod.create_weights``
    allocates them: ``w13`` as ``2 · cdiv(ispp, block_n) × cdiv(hidden, block_k)`` (gate and up
    apart), ``w2`` as ``cdiv(hidden, block_n) × cdiv(ispp, block_k)``, where ``ispp`` is the rank's
    expert width. When ``ispp`` is not a multiple of the checkpoint's block (or, split, of
    ``block_k``), ``oracle/fp8.py`` ``refine_fp8_moe_block_shape`` (``moe_backend`` auto) refines
    the blocks to ``gcd(block_n, block_k, ispp, hidden)`` square when that is at least 32
    (MiniMax-M2.5 at TP 8: 192 wide, 64 × 64 blocks)."""
    bn, bk = s.block_rows, s.block_cols
    down = ".down_proj" in t.name
    hidden, ispp = (rows, cols) if down else (cols, rows)
    full = t.cols if down else t.rows
    shards = 1
    if not down and rows % 2 == 0:  # gated: gate and up halves, as the mxfp4 layout reads them
        shards, ispp, full = 2, rows // 2, t.rows // 2
    refined = refined_fp8_moe_block(bn, bk, ispp, hidden, split=ispp != full)
    if refined is not None:
        bn = bk = refined
    if down:
        return cdiv(hidden, bn) * cdiv(ispp, bk)
    return shards * cdiv(ispp, bn) * cdiv(hidden, bk)


def _data_name(s: QuantSpec) -> str:
    if s.method == "bitsandbytes" and s.weight_bits == 4:
        return "nf4"
    return f"fp{s.weight_bits}" if s.weight_format == "float" else f"int{s.weight_bits}"


def _scale_name(s: QuantSpec) -> str:
    if s.method == "mxfp4":
        return "e8m0"
    if s.scale_bytes == 1:
        return "uint8" if s.method == "bitsandbytes" else "fp8"
    return {4: "fp32", 2: "fp16"}.get(s.scale_bytes, f"{8 * s.scale_bytes}-bit")


def _add(out: dict[str, int], key: str, value: int) -> None:
    if value:
        out[key] = out.get(key, 0) + value


def _matches(name: str, pattern: str) -> bool:
    """``modules_to_not_convert`` semantics: ``re:`` regex, glob with ``*``, else a substring.

    Multimodal checkpoints keep the text stack under ``model.language_model.``; kvcalc names its
    tensors ``model.layers.…``, so a pattern that names ``language_model`` is tried on both."""
    if "language_model" in pattern and name.startswith("model.layers."):
        text_name = "model.language_model." + name.removeprefix("model.")
        if _matches(text_name, pattern):
            return True
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    if "*" in pattern:
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
    return pattern in name
