"""transformers ``QuantizedCache`` (``cache_implementation="quantized"``): what each layer keeps.

From transformers 5.24 ``src/transformers/cache_utils.py`` (``QuantizedLayer``,
``QuantoQuantizedLayer``, ``HQQQuantizedLayer``, ``Fp8QuantizedLayer``) and the backends' own code
(optimum-quanto 0.2.7 ``quantize_weight``/``group``/``PackedTensor``; hqq 0.2.8 ``Quantizer``,
``BitPack``); every figure below was measured with ``kvcalc verify --engine hf --run`` on the CPU.

- **quanto / HQQ** (``QuantizedLayer``): the prefill is quantized whole; decode tokens go to a
  model-dtype *residual* until it would reach ``residual_length`` tokens, then everything
  (dequantized old + residual + new) is re-quantized and the residual emptied. After ``D`` decode
  steps the residual holds ``D mod residual_length`` tokens. Each of K and V is quantized as one
  tensor ``[batch, kv_heads, tokens, head_dim]`` of ``N`` values in groups of ``q_group_size``:
  ``N·nbits/8`` bytes of packed codes plus one scale and one zero point per group in the model
  dtype. Packing rounds per row: quanto packs the grouped ``(N/g, g)`` (axis 0) or ``(g, N/g)``
  (axis −1) tensor along its first dimension (``ceil(rows·nbits/8)``); HQQ packs ``(g, N/g)``
  (axis 0) or ``(N/g, g)`` (axis 1) along its first dimension and 3-bit codes as int32 words of
  10 values.
- **fp8** (``Fp8QuantizedLayer``): float8 e4m3 values appended as they come, one float32 scale
  per K and per V tensor; no residual.

Not in the persistent figure: each update dequantizes the layer's whole cache to the model dtype
(``keys_to_return``), a transient copy of one layer's K and V at full precision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kvcalc.engines.base import EngineRequest, KvCacheGroup, KvCachePlan
from kvcalc.engines.common import binary_search_max_len
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, LayerKind
from kvcalc.model.shape import ModelShape
from kvcalc.units import cdiv

BACKENDS = ("quanto", "hqq", "fp8")
#: what each backend accepts (transformers' own checks)
_NBITS = {"quanto": (2, 4), "hqq": (1, 2, 3, 4, 8)}
_AXES = {"quanto": (0, -1), "hqq": (0, 1)}
#: the group-wise options transformers passes to quanto/HQQ layers (fp8 refuses them)
GROUP_KEYS = ("nbits", "q_group_size", "residual_length", "axis_key", "axis_value")
#: ``--kv-cache-dtype`` spellings that select a quantized cache: (backend, nbits)
NAMED: dict[str, tuple[str, int | None]] = {
    **{f"quanto_int{n}": ("quanto", n) for n in _NBITS["quanto"]},
    **{f"hqq_int{n}": ("hqq", n) for n in _NBITS["hqq"]},
    "fp8": ("fp8", None),
}


@frozen
class QuantizedCacheSpec:
    """One ``QuantizedCache`` configuration; defaults are transformers' own."""

    backend: str = "quanto"
    nbits: int | None = 4
    q_group_size: int = 64
    residual_length: int = 128
    axis_key: int = 0
    axis_value: int = 0

    @property
    def name(self) -> str:
        """The storage format's name in kvcalc (``quanto_int4``, ``hqq_int8``, ``fp8``)."""
        return "fp8" if self.backend == "fp8" else f"{self.backend}_int{self.nbits}"

    @property
    def has_residual(self) -> bool:
        return self.backend != "fp8"

    def max_residual(self, tokens: int) -> int:
        """The most tokens the residual holds at ``tokens`` cached (the prefill is always quantized)."""
        if not self.has_residual:
            return 0
        return max(0, min(self.residual_length - 1, tokens - 1))

    def quantized_bytes(
        self, shape: tuple[int, ...], axis: int, scale_bytes: int
    ) -> dict[str, int]:
        """``{"data", "scale", "zero"}`` bytes of one quantized K or V tensor of ``shape`` (fp8: no zero)."""
        numel = math.prod(shape)
        if self.backend == "fp8":
            return {"data": numel, "scale": 4}  # float8 e4m3 values, one float32 scale per tensor
        assert self.nbits is not None
        if numel == 0:
            return {"data": 0, "scale": 0, "zero": 0}
        g = self.q_group_size
        if self.backend == "quanto":
            axis_dim = shape[0] if axis == 0 else shape[-1]
            if (numel // axis_dim) % g or g > numel // axis_dim:
                raise _indivisible(self, shape, f"{numel // axis_dim:,} values per slice")
            groups = numel // g
            per_item = 8 // self.nbits
            if axis == 0:
                data = cdiv(groups, per_item) * g
                scales = g if groups == 1 else groups  # a single group is scaled per column
            else:
                data = cdiv(g, per_item) * groups
                scales = groups
            return {"data": data, "scale": scales * scale_bytes, "zero": scales * scale_bytes}
        if numel % g:
            raise _indivisible(self, shape, f"{numel:,} values")
        groups = numel // g
        rows, cols = (g, groups) if axis == 0 else (groups, g)
        return {
            "data": self._hqq_packed(rows, shape) * cols,
            "scale": groups * scale_bytes,
            "zero": groups * scale_bytes,
        }

    def _hqq_packed(self, rows: int, shape: tuple[int, ...]) -> int:
        """Bytes per column after HQQ's ``BitPack`` packs ``rows`` codes (``pack_<n>bit_*``)."""
        if self.nbits == 8:
            return rows
        if self.nbits == 3:
            return 4 * cdiv(rows, 10)  # ten 3-bit codes per int32, rows padded to a multiple of 10
        per_byte = 8 // (self.nbits or 1)
        if rows % per_byte:
            raise _indivisible(self, shape, f"{rows:,} rows to pack {per_byte} to a byte")
        return rows // per_byte

    def layer_bytes(
        self, k_shape: tuple[int, ...], v_shape: tuple[int, ...], *, tokens: int, residual: int,
        dtype_bytes: int,
    ) -> dict[str, int]:  # fmt: skip
        """Per part (``"K data"``, ``"K residual"``...) bytes of one layer holding ``tokens``.

        ``k_shape``/``v_shape`` are ``[batch, heads, 1, head_dim]`` (per token); ``residual`` of the
        ``tokens`` are the model-dtype residual, the rest are quantized.
        """
        out: dict[str, int] = {}
        for side, shape, axis in (("K", k_shape, self.axis_key), ("V", v_shape, self.axis_value)):
            b, h, _, d = shape
            quantized = (b, h, tokens - residual, d)
            for part, nbytes in self.quantized_bytes(quantized, axis, dtype_bytes).items():
                out[f"{side} {part}"] = nbytes
            if self.has_residual:
                out[f"{side} residual"] = b * h * residual * d * dtype_bytes
        return out


def _indivisible(spec: QuantizedCacheSpec, shape: tuple[int, ...], what: str) -> InputError:
    return InputError(
        f"{spec.backend} cannot quantize a {list(shape)} cache tensor in groups of "
        f"{spec.q_group_size} ({what}): transformers fails on it",
        hint="choose a q_group_size that divides kv_heads · head_dim, or axis 0",
        code="unsupported-dtype",
    )


def spec_from_options(
    extra: Mapping[str, Any], named: str | None
) -> tuple[QuantizedCacheSpec, list[str]]:
    """The cache ``-E backend=… -E nbits=…`` (and a ``--kv-cache-dtype`` name) ask for."""
    notes: list[str] = []
    backend = extra.get("backend")
    nbits = extra.get("nbits")
    if named is not None:
        name_backend, name_bits = NAMED[named]
        for key, given, wanted in (("backend", backend, name_backend), ("nbits", nbits, name_bits)):
            if given is not None and given != wanted:
                raise InputError(
                    f"--kv-cache-dtype {named} means {key}={wanted}, but -E {key}={given} was given",
                    hint="give one of them", code="conflicting-options",
                )  # fmt: skip
        backend, nbits = name_backend, name_bits
    backend = backend or "quanto"
    if backend not in BACKENDS:
        raise InputError(
            f"QuantizedCache backend must be one of {', '.join(BACKENDS)}, got {backend!r}",
            code="invalid-input",
        )
    if backend == "fp8":
        given = sorted(k for k in GROUP_KEYS if extra.get(k) is not None and k != "nbits")
        if given or (extra.get("nbits") is not None and named is None):
            raise InputError(
                "the fp8 QuantizedCache backend quantizes per tensor and takes no "
                + ", ".join(given or ["nbits"]),
                hint="use backend=quanto or backend=hqq for group-wise options",
                code="invalid-input",
            )
        return QuantizedCacheSpec(backend="fp8", nbits=None), notes
    nbits = 4 if nbits is None else nbits
    if nbits not in _NBITS[backend]:
        raise InputError(
            f"nbits for the {backend} backend must be one of "
            f"{', '.join(map(str, _NBITS[backend]))}, got {nbits!r}",
            code="invalid-input",
        )
    values = {"q_group_size": 64, "residual_length": 128, "axis_key": 0, "axis_value": 0}
    for key, default in values.items():
        value = extra.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{key} must be an integer, got {value!r}", code="invalid-input")
        values[key] = value
    for key in ("axis_key", "axis_value"):
        if values[key] not in _AXES[backend]:
            raise InputError(
                f"{key} for the {backend} backend must be one of "
                f"{', '.join(map(str, _AXES[backend]))}, got {values[key]}",
                code="invalid-input",
            )
    for key in ("q_group_size", "residual_length"):
        if values[key] < 1:
            raise InputError(f"{key} must be at least 1, got {values[key]}", code="invalid-input")
    spec = QuantizedCacheSpec(backend=backend, nbits=nbits, **values)
    return spec, notes


# -- the plan -----------------------------------------------------------------------------------
@frozen
class QuantizedSetup:
    """A resolved ``QuantizedCache`` request: the format, the model dtype, the residual point."""

    spec: QuantizedCacheSpec
    #: the model's compute dtype: residual tokens, scales and zero points are stored in it
    dtype: CacheDtype
    #: tokens in the residual at ``max_model_len`` (None: the most it holds)
    residual_tokens: int | None
    batch_size: int


def layer_shapes(model: ModelShape, tp: int, batch: int) -> list[tuple[int, tuple, tuple]]:
    """(layer index, K shape, V shape) per token; refuses what ``QuantizedCache`` refuses."""
    found = sorted(
        {
            x.kind
            for x in model.layers
            if x.kind is not LayerKind.FULL or not isinstance(x, FullAttention)
        }
    )
    if found:
        raise InputError(
            f"transformers' QuantizedCache takes only full-attention layers; {model.name} has "
            f"{', '.join(found)} layers",
            hint="use the dynamic or static cache for this model",
            code="unsupported-model",
        )
    out = []
    for index, layer in enumerate(model.layers):
        assert isinstance(layer, FullAttention)
        x = layer.per_rank(tp)
        assert isinstance(x, FullAttention)
        out.append((index, (batch, x.kv_heads, 1, x.k_dim), (batch, x.kv_heads, 1, x.v_dim)))
    return out


def residual_at(setup: QuantizedSetup, tokens: int) -> int:
    """Tokens in the residual when ``tokens`` are cached (validated against what can happen)."""
    most = setup.spec.max_residual(tokens)
    if setup.residual_tokens is None:
        return most
    if setup.residual_tokens > most:
        raise InputError(
            f"residual_tokens must be at most {most} here (residual_length − 1, and the prefill is "
            f"always quantized), got {setup.residual_tokens}",
            code="invalid-input",
        )
    return setup.residual_tokens


def parts_at(
    setup: QuantizedSetup, shapes: list[tuple[int, tuple, tuple]], tokens: int, residual: int
) -> list[tuple[int, dict[str, int]]]:
    """(layer index, part → bytes) for every layer holding ``tokens`` (``residual`` unquantized)."""
    return [
        (i, setup.spec.layer_bytes(k, v, tokens=tokens, residual=residual,
                                   dtype_bytes=setup.dtype.block_bytes))
        for i, k, v in shapes
    ]  # fmt: skip


def _total(setup: QuantizedSetup, shapes: list, tokens: int, residual: int) -> int:
    return sum(sum(p.values()) for _, p in parts_at(setup, shapes, tokens, residual))


def _fits(setup: QuantizedSetup, shapes: list, tokens: int, residual: int, available: int) -> bool:
    """``tokens`` fit; a length the backend cannot group (transformers fails there) does not."""
    try:
        return (
            _total(setup, shapes, tokens, min(residual, setup.spec.max_residual(tokens)))
            <= available
        )
    except InputError:
        return False


def plan_quantized(
    request: EngineRequest, profile: str, setup: QuantizedSetup, notes: list[str]
) -> KvCachePlan:
    L = request.max_model_len
    b = setup.batch_size
    spec = setup.spec
    shapes = layer_shapes(request.model, request.tensor_parallel_size, b)
    one = layer_shapes(request.model, request.tensor_parallel_size, 1)
    r = residual_at(setup, L)
    total = _total(setup, shapes, L, r)
    per_request = _total(setup, one, L, r)
    available = request.available_kv_bytes
    fits = total <= available
    estimate = None
    if not fits:
        estimate = binary_search_max_len(L, lambda n: _fits(setup, shapes, n, r, available))
    sample = (
        8 * spec.q_group_size
    )  # the marginal bytes of a token, fixed per-tensor scales left out
    per_token = cdiv(_total(setup, one, 2 * sample, 0) - _total(setup, one, sample, 0), sample)
    group = KvCacheGroup(kind=LayerKind.FULL, num_layers=len(shapes), page_bytes=per_token, block_size=1,
                         blocks_per_request=L, num_blocks=b * L,
                         layer_indices=tuple(i for i, _, _ in shapes))  # fmt: skip
    dsize = setup.dtype.block_bytes
    transient = max((k[1] * (k[3] + v[3]) for _, k, v in one), default=0) * L * dsize
    what = f"QuantizedCache {spec.name}"
    if spec.has_residual:
        what += (f" (groups of {spec.q_group_size}, axis {spec.axis_key}/{spec.axis_value}): {r:,} of "
                 f"{L:,} tokens in the {setup.dtype.name} residual (residual_length {spec.residual_length}; "
                 f"{'the most it holds' if setup.residual_tokens is None else 'as given'}), the rest "
                 f"quantized with {setup.dtype.name} scales and zero points")  # fmt: skip
    else:
        what += ": float8 e4m3 values and one float32 scale per K and V tensor"
    notes += [what, f"not counted: each update dequantizes a layer's whole cache to {setup.dtype.name} "
              f"(about {transient:,} B for one layer at {L:,} tokens, freed after the layer)"]  # fmt: skip
    return KvCachePlan(
        engine="hf", engine_version=profile, kv_cache_dtype=spec.name, block_size=1,
        num_blocks=b * L, kv_cache_bytes=total, kv_cache_tokens=b * L,
        max_concurrency=max(0, available) / per_request if per_request else 0.0,
        kv_bytes_per_token=per_token, bytes_per_request=per_request, fits=fits,
        estimated_max_model_len=estimate, groups=(group,), log_lines=(), notes=tuple(notes),
        max_model_len=L, available_kv_bytes=available, fit_budget_bytes=available // b,
        max_num_seqs=b, max_num_batched_tokens=b * L,  # generate() prefills whole prompts (hf.py)
    )  # fmt: skip
