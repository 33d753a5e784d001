"""A checkpoint's ``quantization_config`` as a frozen :class:`QuantSpec` (how weights are stored).

Storage of one quantized ``rows × cols`` (out × in) matrix, which :mod:`kvcalc.estimate.weights` computes:

    data   = rows · cols · weight_bits / 8
    scales = one per tensor | per output row | per ``group_size`` inputs of a row | per block
    zeros  = one ``zero_point_bits`` value per scale (asymmetric int formats)
    g_idx  = one int32 per input column (GPTQ act-order index)

Per method (each as its engine loads it; sizes per parameter for a large matrix in brackets):

- ``fp8`` (DeepSeek-V3 style): e4m3 data + one float32 scale per 128×128 block when
  ``weight_block_size`` is set, else one per tensor; ``activation_scheme: static`` adds one float32
  input scale per matrix [1.0002 B];
- ``awq``: int4 packed, fp16 scale and packed int4 zero per ``group_size`` (128) inputs [0.527 B];
- ``gptq``: as AWQ plus ``g_idx`` (int32 per input column) [≈0.53 B];
- ``mxfp4`` (gpt-oss): MoE experts only, fp4 e2m1 + one uint8 e8m0 scale per 32 values
  [17/32 = 0.531 B]; everything else stays in the model dtype;
- ``bitsandbytes``: nf4 with one float32 absmax per 64 values [0.5625 B] (double quantisation: one
  uint8 per 64, the second-level fp32 scales ignored [≈0.516 B]); 8-bit: int8 + one float32 per row;
- ``compressed-tensors``: from ``config_groups[*].weights`` (bits, int/float, strategy, group size,
  symmetric); nvfp4 (4-bit float, group 16) stores fp8 scales plus one float32 global scale;
- ``modelopt``: ``FP8`` per tensor, ``NVFP4`` as compressed-tensors nvfp4.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvcalc.frozen import frozen
from kvcalc.hfconfig.reader import ConfigReader


@frozen
class QuantSpec:
    method: str
    #: False for a method kvcalc cannot size (its bytes are then refused, not guessed)
    supported: bool = True
    weight_bits: int = 16
    weight_format: str = "int"  # "int" or "float"
    scale_granularity: str = "tensor"  # "tensor", "channel", "group" or "block"
    group_size: int = 0
    block_rows: int = 0
    block_cols: int = 0
    scale_bytes: int = 2
    zero_point_bits: int = 0
    g_idx: bool = False
    #: fixed extra bytes per quantized matrix (static fp8 input scale, nvfp4 global scale)
    per_matrix_bytes: int = 0
    #: only MoE expert weights are quantized (vLLM's mxfp4 has no linear method)
    experts_only: bool = False
    #: modules kept in the model dtype, as written (glob patterns, or ``re:`` regexes)
    skip_modules: tuple[str, ...] = ()
    #: ``skip_modules`` name whole modules only (vLLM 0.33's fp8 ``ignored_layers_match_mode``
    #: "exact": ``"gate"`` skips no ``gate_proj``), not substrings of their names
    skip_exact: bool = False


#: What ``--quantization <name>`` means for a checkpoint that is not already in that format.
DEFAULT_SPECS: dict[str, QuantSpec] = {
    # vLLM's online fp8: per-tensor float32 weight scale (dynamic activation scales)
    "fp8": QuantSpec(method="fp8", weight_bits=8, weight_format="float", scale_bytes=4),
    "awq": QuantSpec(method="awq", weight_bits=4, scale_granularity="group", group_size=128,
                     scale_bytes=2, zero_point_bits=4),
    "gptq": QuantSpec(method="gptq", weight_bits=4, scale_granularity="group", group_size=128,
                      scale_bytes=2, zero_point_bits=4, g_idx=True),
    "mxfp4": QuantSpec(method="mxfp4", weight_bits=4, weight_format="float",
                       scale_granularity="group", group_size=32, scale_bytes=1, experts_only=True),
    "bitsandbytes": QuantSpec(method="bitsandbytes", weight_bits=4, weight_format="float",
                              scale_granularity="group", group_size=64, scale_bytes=4,
                              skip_modules=("lm_head",)),
}  # fmt: skip

_NVFP4 = QuantSpec(
    method="nvfp4",
    weight_bits=4,
    weight_format="float",
    scale_granularity="group",
    group_size=16,
    scale_bytes=1,
    per_matrix_bytes=4,
)


def read_quant_spec(r: ConfigReader) -> QuantSpec | None:
    """The checkpoint's storage format, or ``None`` for an unquantized checkpoint."""
    raw = r.mapping("quantization_config")
    if raw is None:
        return None
    q = ConfigReader(raw, source=f"{r.source}: quantization_config")
    method = str(q.str("quant_method", "") or "").lower()
    expert_dtype = r.value("expert_dtype")
    if expert_dtype not in (None, "", "bf16", "bfloat16"):
        # DeepSeek-V4: routed experts stored in another format (fp4) than quant_method says; how
        # vLLM lays them out is not modelled, so their bytes are refused rather than guessed
        return QuantSpec(method=f"{method or 'unknown'} with expert_dtype {expert_dtype}",
                         supported=False)  # fmt: skip
    reader = _READERS.get(method)
    if reader is None:
        return QuantSpec(method=method or "unknown", supported=False)
    return reader(q)


def _skips(q: ConfigReader, *keys: str) -> tuple[str, ...]:
    for key in keys:
        found = q.list(key)
        if found is not None:
            return tuple(str(m) for m in found)
    return ()


def _group(q: ConfigReader, key: str, default: int) -> tuple[str, int]:
    value = q.value(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value == 0:
        raise q.bad(key, value, "a positive group size, or -1 for one scale per row")
    return ("channel", 0) if value < 0 else ("group", value)


def _fp8(q: ConfigReader) -> QuantSpec:
    block = q.list("weight_block_size")
    extra = 4 if q.str("activation_scheme", "dynamic") == "static" else 0
    spec = replace(DEFAULT_SPECS["fp8"], per_matrix_bytes=extra, skip_exact=True,
                   skip_modules=_skips(q, "modules_to_not_convert", "ignored_layers"))  # fmt: skip
    if block:
        if len(block) != 2 or not all(isinstance(b, int) and b > 0 for b in block):
            raise q.bad("weight_block_size", block, "two positive integers")
        spec = replace(spec, scale_granularity="block", block_rows=block[0], block_cols=block[1])
    return spec


def _awq_gptq(q: ConfigReader) -> QuantSpec:
    method = str(q.str("quant_method")).lower()
    bits = q.int("bits", "w_bit", default=4)
    granularity, group = _group(q, "group_size" if q.has("group_size") else "q_group_size", 128)
    zero = q.bool("zero_point", True) if method == "awq" else True  # GPTQ always stores qzeros
    return replace(DEFAULT_SPECS[method], weight_bits=bits, scale_granularity=granularity,
                   group_size=group, zero_point_bits=bits if zero else 0,
                   skip_modules=_skips(q, "modules_to_not_convert"))  # fmt: skip


def _mxfp4(q: ConfigReader) -> QuantSpec:
    return replace(DEFAULT_SPECS["mxfp4"], skip_modules=_skips(q, "modules_to_not_convert"))


def _bnb(q: ConfigReader) -> QuantSpec:
    skips = _skips(q, "llm_int8_skip_modules") or ("lm_head",)
    if q.bool("load_in_8bit"):
        return QuantSpec(method="bitsandbytes", weight_bits=8, scale_granularity="channel",
                         scale_bytes=4, skip_modules=skips)  # fmt: skip
    double = q.bool("bnb_4bit_use_double_quant")
    return replace(
        DEFAULT_SPECS["bitsandbytes"], scale_bytes=1 if double else 4, skip_modules=skips
    )


def _compressed_tensors(q: ConfigReader) -> QuantSpec:
    groups = q.mapping("config_groups") or {}
    weights: Mapping[str, Any] | None = None
    for group in groups.values():
        if isinstance(group, Mapping) and isinstance(group.get("weights"), Mapping):
            weights = group["weights"]
            break
    skips = _skips(q, "ignore")
    if weights is None:
        return QuantSpec(method="compressed-tensors", supported=False, skip_modules=skips)
    w = ConfigReader(weights, source=f"{q.source}.config_groups.weights")
    bits = w.int("num_bits", default=8)
    fmt = str(w.str("type", "int") or "int").lower()
    strategy = str(w.str("strategy", "tensor") or "tensor").lower()
    if fmt == "float" and bits == 4:
        return replace(_NVFP4, method="compressed-tensors", skip_modules=skips)
    spec = QuantSpec(method="compressed-tensors", weight_bits=bits, weight_format=fmt,
                     scale_bytes=4 if fmt == "float" else 2, skip_modules=skips)  # fmt: skip
    if not w.bool("symmetric", True):
        spec = replace(spec, zero_point_bits=bits)
    if strategy == "group":
        return replace(spec, scale_granularity="group", group_size=w.int("group_size", default=128))
    if strategy == "block":
        block = w.list("block_structure") or [128, 128]
        return replace(
            spec, scale_granularity="block", block_rows=int(block[0]), block_cols=int(block[1])
        )
    if strategy == "channel":
        return replace(spec, scale_granularity="channel")
    return spec


def _modelopt(q: ConfigReader) -> QuantSpec:
    quant = q.mapping("quantization") or {}
    algo = str(q.str("quant_algo") or quant.get("quant_algo") or "").upper()
    skips = _skips(q, "exclude_modules", "ignore")
    if algo == "FP8":
        return replace(DEFAULT_SPECS["fp8"], method="modelopt", skip_modules=skips)
    if algo == "NVFP4":
        return replace(_NVFP4, method="modelopt", skip_modules=skips)
    return QuantSpec(method="modelopt", supported=False, skip_modules=skips)


_READERS = {
    "fp8": _fp8,
    "awq": _awq_gptq,
    "gptq": _awq_gptq,
    "mxfp4": _mxfp4,
    "bitsandbytes": _bnb,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
}
