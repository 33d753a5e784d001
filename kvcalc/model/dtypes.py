"""Cache storage formats: how many bytes a row of ``n`` values really takes, scales included.

A *row* here is one KV head's K (or V) vector for one token. Every format is a frozen
:class:`CacheDtype` that owns its arithmetic (:meth:`CacheDtype.row_bytes`); no string matching
happens past :func:`parse_cache_dtype`.

Formats (see ``engine-accounting.md`` §1.2 and §3):

- plain: fp32 (4 B), fp16/bf16 (2 B), fp8 e4m3/e5m2 (1 B, per-layer scalar scales only);
- vLLM per-token-head quantisation: int8 and fp8 add two float32 scales per token per head
  (one for K, one for V), i.e. ``row + 4`` bytes per side;
  int4 packs two values a byte plus the same float32 scale (as the Triton backend's
  ``customize_spec`` sizes it, read in a copy of vLLM's source; upstream **unconfirmed**);
- ``int4``/``int8`` alone are engine-specific (:mod:`kvcalc.engines.formats` resolves them) and are
  refused here (``ambiguous-dtype``);
- nvfp4: ``n/2`` bytes of fp4 data + one fp8 scale per 16 values (``n/2 + n/16``);
- llama.cpp block formats: 32 values in 34 (q8_0), 18 (q4_0, iq4_nl), 20 (q4_1), 22 (q5_0),
  24 (q5_1) bytes.
"""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.units import cdiv


@frozen
class CacheDtype:
    """One storage format. ``block_values`` values take ``block_bytes`` bytes."""

    name: str
    block_values: int = 1
    block_bytes: int
    #: extra bytes per row (per token per head per side): float32 scales of per-token-head modes
    row_scale_bytes: int = 0
    #: sub-byte formats pack ``block_values`` per ``block_bytes`` and need whole blocks per row
    block_format: bool = False
    #: True for formats that need a quantised kernel (all but fp32/fp16/bf16)
    is_quantized: bool = False
    #: the torch dtype that holds it (``uint8`` for raw byte formats); used only by ``verify``
    torch_name: str = "uint8"
    description: str = ""
    #: fixed bytes per token per layer for an MLA-only record format (vLLM ``fp8_ds_mla``)
    mla_record_bytes: int = 0

    def row_bytes(self, num_values: int) -> int:
        """Bytes of one row of ``num_values`` values, scales included.

        >>> BF16.row_bytes(128), FP8.row_bytes(128), INT8.row_bytes(128), NVFP4.row_bytes(128)
        (256, 128, 132, 72)
        >>> Q8_0.row_bytes(128)  # 4 blocks of 32 values, 34 bytes each
        136
        """
        if num_values <= 0:
            return 0
        if self.block_format and num_values % self.block_values:
            raise InputError(
                f"cache dtype {self.name} needs rows that are a multiple of {self.block_values} "
                f"values, got {num_values}",
                hint="choose fp8, int8 or bf16 for this model",
                code="unsupported-dtype",
            )
        return cdiv(num_values, self.block_values) * self.block_bytes + self.row_scale_bytes

    @property
    def bits_per_value(self) -> float:
        """Average storage bits per value, ignoring per-row scales (for display)."""
        return self.block_bytes * 8 / self.block_values


FP32 = CacheDtype(name="fp32", block_bytes=4, torch_name="float32", description="32-bit float")
FP16 = CacheDtype(name="fp16", block_bytes=2, torch_name="float16", description="16-bit float")
BF16 = CacheDtype(name="bf16", block_bytes=2, torch_name="bfloat16", description="bfloat16")
FP8 = CacheDtype(
    name="fp8", block_bytes=1, is_quantized=True, description="fp8 e4m3, per-layer scales"
)
FP8_E5M2 = CacheDtype(
    name="fp8_e5m2", block_bytes=1, is_quantized=True, description="fp8 e5m2, per-layer scales"
)
FP8_PER_TOKEN_HEAD = CacheDtype(
    name="fp8_per_token_head",
    block_bytes=1,
    row_scale_bytes=4,
    is_quantized=True,
    description="fp8 + one float32 scale per token per head",
)
INT8 = CacheDtype(
    name="int8_per_token_head",
    block_bytes=1,
    row_scale_bytes=4,
    is_quantized=True,
    description="int8 + one float32 scale per token per head (vLLM int8_per_token_head)",
)
INT4 = CacheDtype(
    name="int4_per_token_head",
    block_values=2,
    block_bytes=1,
    row_scale_bytes=4,
    block_format=True,
    is_quantized=True,
    description="int4 packed + one float32 scale per token per head (vLLM int4_per_token_head)",
)
NVFP4 = CacheDtype(
    name="nvfp4",
    block_values=16,
    block_bytes=9,  # 16 fp4 values = 8 bytes, + one fp8 scale
    block_format=True,
    is_quantized=True,
    description="fp4 e2m1 + one fp8 scale per 16 values",
)

#: TensorRT-LLM's INT8 KV (TensorRT-engine backend): 1 byte a value, one float32 scale per layer
#: (``kv_orig_quant_scale``, shape (1,)), so no per-token bytes. Engine-specific: not in
#: :data:`CACHE_DTYPES`; the ``trtllm`` engine hands it out for ``int8``.
INT8_PER_TENSOR = CacheDtype(
    name="int8_per_tensor",
    block_bytes=1,
    is_quantized=True,
    torch_name="int8",
    description="int8, per-tensor scales (TensorRT-LLM INT8 KV)",
)

FP8_DS_MLA = CacheDtype(
    name="fp8_ds_mla",
    block_bytes=1,
    is_quantized=True,
    mla_record_bytes=656,
    description="DeepSeek sparse-MLA record: 656 B per token per layer (MLA only)",
)


def _ggml(name: str, block_bytes: int) -> CacheDtype:
    return CacheDtype(
        name=name,
        block_values=32,
        block_bytes=block_bytes,
        block_format=True,
        is_quantized=True,
        description=f"llama.cpp block format: 32 values in {block_bytes} bytes",
    )


Q8_0 = _ggml("q8_0", 34)
Q4_0 = _ggml("q4_0", 18)
Q4_1 = _ggml("q4_1", 20)
Q5_0 = _ggml("q5_0", 22)
Q5_1 = _ggml("q5_1", 24)
IQ4_NL = _ggml("iq4_nl", 18)

#: Every format, by canonical name, in display order.
CACHE_DTYPES: dict[str, CacheDtype] = {
    d.name: d
    for d in (
        FP32, FP16, BF16, FP8, FP8_E5M2, FP8_PER_TOKEN_HEAD, INT8, INT4, NVFP4, FP8_DS_MLA,
        Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
    )
}  # fmt: skip

#: Accepted spellings (vLLM's and llama.cpp's) for each canonical name.
ALIASES: dict[str, str] = {
    "float32": "fp32",
    "f32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "f16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8",
    "fp8_inc": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8_e5m2",
    "nvfp4_4over6": "nvfp4",
}

#: Cache dtype names that mean "the model's own dtype".
AUTO = "auto"


def parse_cache_dtype(name: str) -> CacheDtype | None:
    """The format called ``name``; ``None`` for ``auto`` (the caller picks the model dtype)."""
    key = str(name).strip().lower()
    if key == AUTO:
        return None
    if key in ("int8", "int4"):
        raise InputError(
            f"{key} names each engine's own {key[3:]}-bit KV cache, which differ in layout",
            hint="give the engine (--engine), or its format: vLLM int8_per_token_head/"
            "int4_per_token_head, llama.cpp q8_0/q4_0 (kvcalc inspect lists each engine's)",
            code="ambiguous-dtype",
        )
    key = ALIASES.get(key, key)
    try:
        return CACHE_DTYPES[key]
    except KeyError:
        raise InputError(
            f"unknown cache dtype {name!r}",
            hint="choose one of: auto, " + ", ".join(CACHE_DTYPES),
            code="unknown-dtype",
        ) from None


#: Model (weight) dtype names from config.json to a cache format.
MODEL_DTYPES: dict[str, CacheDtype] = {
    "float32": FP32,
    "float16": FP16,
    "bfloat16": BF16,
    "fp32": FP32,
    "fp16": FP16,
    "bf16": BF16,
    "half": FP16,
    "float": FP32,
}
