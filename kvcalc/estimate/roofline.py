"""The memory-bandwidth roofline of one decode step, and of one prefill (pure arithmetic).

:func:`step_cost` turns a :class:`~kvcalc.model.shape.ModelShape` into what one decode step costs on the
busiest GPU (weights read, KV read per sequence, FLOPs per token); :func:`decode_point` prices a
batch on a :class:`Roofline`; :func:`prefill_estimate` one prompt. :mod:`kvcalc.planning.throughput` builds
the reports and the plan integration on top. The formulas are documented there and in
``docs/throughput.md``.
"""

from __future__ import annotations

import math

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.dtypes import parse_cache_dtype
from kvcalc.model.gpus import GpuSpec
from kvcalc.model.layouts import ATTENTION_KINDS, MLALatent
from kvcalc.model.shape import ModelShape


@frozen
class Roofline:
    """One GPU's roofs: memory bandwidth and (optional) dense tensor-core peak."""

    name: str = ""
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: float | None = None

    def __post_init__(self) -> None:
        if not (
            self.memory_bandwidth_bytes_per_s > 0
            and math.isfinite(self.memory_bandwidth_bytes_per_s)
        ):
            raise InputError(f"memory bandwidth must be positive, got {self.memory_bandwidth_bytes_per_s!r}",
                             code="invalid-input")  # fmt: skip
        if self.peak_flops_per_s is not None and not self.peak_flops_per_s > 0:
            raise InputError(
                f"peak FLOP/s must be positive, got {self.peak_flops_per_s!r}", code="invalid-input"
            )


def gpu_roofline(gpu: GpuSpec, *, fp8_compute: bool = False) -> Roofline:
    """A :class:`~kvcalc.model.gpus.GpuSpec`'s roofs: bf16 (else fp16) peak; fp8 peak for fp8 weights."""
    tflops = gpu.bf16_dense_tflops or gpu.fp16_dense_tflops
    if fp8_compute and gpu.fp8_dense_tflops:
        tflops = gpu.fp8_dense_tflops
    return Roofline(name=gpu.name, memory_bandwidth_bytes_per_s=gpu.memory_bandwidth_bytes_per_s,
                    peak_flops_per_s=tflops * 1e12 if tflops else None)  # fmt: skip


@frozen
class StepCost:
    """What one decode step costs on the busiest GPU, before batching."""

    #: weights every step reads whatever the batch
    dense_weight_bytes: int
    #: all routed experts on this GPU; a batch reads ``expert_fraction(B)`` of them
    expert_weight_bytes: int
    experts_per_token: int = 0
    num_experts: int = 0
    context_tokens: int
    #: KV (and recurrent state) one running sequence reads per step at ``context_tokens``
    kv_bytes_per_sequence: int
    #: KV one token adds (prefill writes it)
    kv_bytes_per_token: int
    #: 2 × active parameters (matmuls), per token
    matmul_flops_per_token: float
    #: per attention layer: (FLOPs per token per context token, window or None)
    attention_layers: tuple[tuple[float, int | None], ...] = ()

    def expert_fraction(self, batch: int) -> float:
        if not self.num_experts or not self.expert_weight_bytes:
            return 0.0
        return 1.0 - (1.0 - min(1.0, self.experts_per_token / self.num_experts)) ** batch

    def weight_bytes(self, batch: int) -> int:
        return self.dense_weight_bytes + round(
            self.expert_weight_bytes * self.expert_fraction(batch)
        )

    def attention_flops_per_token(self, context_tokens: int) -> float:
        return sum(
            c * (context_tokens if w is None else min(context_tokens, w))
            for c, w in self.attention_layers
        )

    @property
    def flops_per_token(self) -> float:
        return self.matmul_flops_per_token + self.attention_flops_per_token(self.context_tokens)


@frozen
class DecodePoint:
    batch: int
    #: weights read per step, per GPU (experts a batch of this size touches)
    weights_bytes_per_step: int
    kv_bytes_per_step: int
    bytes_per_step: int
    memory_seconds: float
    compute_seconds: float | None
    step_seconds: float
    bound: str
    tokens_per_s: float
    per_request_tokens_per_s: float
    #: more sequences than the KV cache holds at this context
    beyond_kv_limit: bool = False


@frozen
class PrefillEstimate:
    prompt_tokens: int
    flops: float
    compute_seconds: float | None
    memory_seconds: float
    seconds: float
    bound: str
    tokens_per_s: float


def step_cost(
    model: ModelShape,
    *,
    context_tokens: int,
    weights_bytes_per_gpu: int | None = None,
    kv_cache_dtype: str = "auto",
    kv_bytes_per_token: int | None = None,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    dtype: str | None = None,
    quantization: str | None = None,
) -> StepCost:
    """The per-step cost terms of ``model`` (pure).

    ``weights_bytes_per_gpu`` (a plan's figure) is split into dense/expert/never-read bytes in the
    proportions of the config estimate; ``kv_bytes_per_token`` (the engine's per-GPU figure) scales
    the layout's per-token bytes, so engine dtypes and padding carry over.
    """
    from kvcalc.estimate.weights import count_parameters, weight_bytes

    if context_tokens < 0:
        raise InputError(f"context must be >= 0 tokens, got {context_tokens}", code="invalid-input")
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    world = tp * pp
    est = weight_bytes(model, dtype=dtype, quantization=quantization, tensor_parallel_size=tp,
                       pipeline_parallel_size=pp)  # fmt: skip
    params = count_parameters(model.weights)
    dtype_bytes = 4 if est.dtype == "fp32" else 2
    untied_embedding = params.embedding if params.lm_head else 0
    skip_bytes = (untied_embedding + params.vision) * dtype_bytes
    whole = max(1, est.weights_bytes)
    buffers = est.buffers_bytes_per_gpu
    per_gpu = (
        weights_bytes_per_gpu
        if weights_bytes_per_gpu is not None
        else est.weights_bytes_per_gpu + buffers
    )
    # the plan's per-GPU bytes include vLLM's RoPE buffers: scale the split to the weights alone
    per_gpu_weights = (
        per_gpu * est.weights_bytes_per_gpu / max(1, est.weights_bytes_per_gpu + buffers)
    )
    expert = round(per_gpu_weights * est.experts_bytes / whole)
    dense = round(
        per_gpu_weights
        * (whole - est.experts_bytes - min(skip_bytes, whole - est.experts_bytes))
        / whole
    )
    moe = model.weights.moe
    try:
        layout_dtype = parse_cache_dtype(kv_cache_dtype)
    except InputError:  # an engine's own format (QuantizedCache, quant_policy): bytes come scaled
        if kv_bytes_per_token is None:
            raise
        layout_dtype = None
    cached = model.with_cache_dtype(layout_dtype).per_rank(tp)
    attn = [layer for layer in cached.layers if layer.bytes_per_token]
    per_token = sum(layer.bytes_per_token for layer in attn)
    scale = (
        kv_bytes_per_token / per_token if kv_bytes_per_token is not None and per_token else 1 / pp
    )
    held = sum(layer.bytes_per_token * layer.tokens_held(context_tokens) for layer in attn)
    state = cached.state_bytes_per_sequence / pp if context_tokens else 0
    return StepCost(
        dense_weight_bytes=dense,
        expert_weight_bytes=expert,
        experts_per_token=moe.experts_per_token if moe else 0,
        num_experts=moe.num_experts if moe else 0,
        context_tokens=context_tokens,
        kv_bytes_per_sequence=round(held * scale + state),
        kv_bytes_per_token=round(per_token * scale),
        matmul_flops_per_token=2 * (params.active_per_token - untied_embedding) / world,
        attention_layers=tuple((c / world, w) for c, w in _attention_coefficients(model)),
    )


def _attention_coefficients(model: ModelShape) -> list[tuple[float, int | None]]:
    """Per attention layer ``(2·h_q·(d_k + d_v), window)``: FLOPs per token per context token."""
    out: list[tuple[float, int | None]] = []
    for layer in model.layers:
        if isinstance(layer, MLALatent):  # the only layout of kind "mla"
            heads = layer.num_heads or model.num_attention_heads
            out.append((2.0 * heads * (layer.latent_dim + layer.kv_lora_rank), None))
        elif layer.kind in ATTENTION_KINDS:
            out.append(
                (
                    2.0 * model.num_attention_heads * (layer.head_dim_k + layer.head_dim_v),
                    layer.window,
                )
            )
    return out


def decode_point(cost: StepCost, roof: Roofline, batch: int, *, efficiency: float = 1.0,
                 kv_limit: float | None = None) -> DecodePoint:  # fmt: skip
    """Tokens/s for ``batch`` sequences at ``cost.context_tokens`` (pure)."""
    if batch < 1:
        raise InputError(f"batch must be >= 1, got {batch}", code="invalid-input")
    weights = cost.weight_bytes(batch)
    kv = batch * cost.kv_bytes_per_sequence
    memory_s = (weights + kv) / roof.memory_bandwidth_bytes_per_s
    compute_s = (
        batch * cost.flops_per_token / roof.peak_flops_per_s if roof.peak_flops_per_s else None
    )
    step = max(memory_s, compute_s or 0.0)
    tokens = efficiency * batch / step if step > 0 else 0.0
    return DecodePoint(
        batch=batch, weights_bytes_per_step=weights, kv_bytes_per_step=kv, bytes_per_step=weights + kv,
        memory_seconds=memory_s, compute_seconds=compute_s, step_seconds=step,
        bound="compute" if compute_s is not None and compute_s > memory_s else "memory",
        tokens_per_s=tokens, per_request_tokens_per_s=tokens / batch,
        beyond_kv_limit=kv_limit is not None and batch > kv_limit,
    )  # fmt: skip


def causal_context_sum(prompt_tokens: int, window: int | None) -> int:
    """``Σ_{t=1..P} min(t, W)``: context tokens all prompt positions attend to.

    >>> causal_context_sum(4, None), causal_context_sum(4, 2)
    (10, 7)
    """
    p = prompt_tokens
    if window is None or p <= window:
        return p * (p + 1) // 2
    return window * (window + 1) // 2 + (p - window) * window


def prefill_estimate(
    cost: StepCost, roof: Roofline, prompt_tokens: int, *, efficiency: float = 1.0
) -> PrefillEstimate:
    """One prompt's prefill: compute-bound when the peak is known, weights + KV writes otherwise."""
    flops = cost.matmul_flops_per_token * prompt_tokens + sum(
        c * causal_context_sum(prompt_tokens, w) for c, w in cost.attention_layers
    )
    moved = cost.weight_bytes(prompt_tokens) + prompt_tokens * cost.kv_bytes_per_token
    memory_s = moved / roof.memory_bandwidth_bytes_per_s
    compute_s = flops / roof.peak_flops_per_s if roof.peak_flops_per_s else None
    seconds = max(memory_s, compute_s or 0.0) / efficiency
    return PrefillEstimate(
        prompt_tokens=prompt_tokens, flops=flops, compute_seconds=compute_s, memory_seconds=memory_s,
        seconds=seconds, bound="compute" if compute_s is not None and compute_s > memory_s else "memory",
        tokens_per_s=prompt_tokens / seconds if seconds > 0 else 0.0,
    )  # fmt: skip


def parse_bandwidth(text: str) -> float:
    """``"448GB/s"``, ``"3.35TB/s"``, ``"936 GB"`` → bytes per second (decimal units as vendors quote).

    >>> parse_bandwidth("448GB/s")
    448000000000.0
    """
    from kvcalc.units import parse_size

    cleaned = str(text).strip()
    for suffix in ("/s", "ps", "/sec"):
        if cleaned.lower().endswith(suffix):
            cleaned = cleaned[: -len(suffix)]
    value = float(parse_size(cleaned, bare_unit="gb", what="--bandwidth"))
    if value <= 0:
        raise InputError(f"--bandwidth must be positive, got {text!r}", code="invalid-input")
    return value
