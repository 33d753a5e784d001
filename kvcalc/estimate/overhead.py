"""What vLLM subtracts besides the weights before the KV cache: activation peak, non-torch, CUDA graphs.

vLLM sizes the KV cache from a profile run (engine-accounting §1.8)::

    available = ceil(total · gpu_memory_utilization) − weights − torch_peak − non_torch − cudagraph

(the CUDA-graph estimate is subtracted from v0.21 on). This module estimates the last three from the
model's sizes alone, so that a deployment can be judged without running vLLM. The estimate is a
documented model, not a measurement; its constants are calibrated against the engine logs in
``reference/engine_logs.yaml`` and the error per record is printed by ``python bench/accuracy.py``.

**Activation peak** (per GPU) = forward + sampler:

- forward: ``FORWARD_PERCENT/100 · max_num_batched_tokens · act_bytes · w``, where ``w`` is the widest
  layer's live width per token: for a dense MLP ``3 · I/tp + 2 · H`` (the gate/up output, the
  activation output, the hidden state and the residual); for an MoE layer
  ``top_k · (3 · I_e/tp + H) + 3 · I_shared/tp + 2 · H`` (fused-MoE's three intermediate caches);
  for attention and Mamba/GDN mixers their projection widths. Llama-3.1-8B at 29,000 tokens:
  0.87 · 29,000 · 2 · (3 · 14,336 + 2 · 4,096) = 2.41 GiB; vLLM V0 measured 2.99 GiB (vllm-10517)
  of which the sampler explains the rest.
- sampler: the dummy sampler run over ``max_num_seqs`` rows of ``vocab`` logits:
  ``SAMPLER_BYTES_PER_LOGIT`` bytes per logit for the torch top-k/top-p path (bf16 logits 2 B,
  fp32 copy 4, sorted values 4, int64 indices 8, probabilities 4, mask 1, scattered result 4 = 27).

**Non-torch** (CUDA context growth, cuBLAS workspaces, NCCL): ``NON_TORCH_BYTES`` per GPU, plus
``NON_TORCH_TP_EXTRA_BYTES`` with tensor parallelism (NCCL buffers).

**CUDA graphs** (0 with ``enforce_eager``): ``CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER · L``.
No record in the reference logs prints the graph pool, so these two are **uncalibrated** guesses
from vLLM's "Graph capturing finished … took 0.3–1.5 GiB" lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvcalc.errors import InputError
from kvcalc.hfconfig.weights import WeightShape
from kvcalc.model.gpus import GpuSpec
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, MIB, cdiv

# -- calibration constants ---------------------------------------------------------------------
#: Percent of the nominal per-token width that is live at the forward peak. Fitted to two vLLM V0
#: profiles of Llama-3-8B (same model, sampler rows and vocabulary, so the sampler term cancels):
#: 2.99 GiB at 29,000 tokens (vllm-10517, RTX 3090) and 1.26 GiB at 8,192 tokens (vLLM PR #10511,
#: H100): (2.99 − 1.26) GiB / 20,808 tokens = 89,270 B/token = 0.87 × 2 · (3 · 14,336 + 2 · 4,096).
FORWARD_PERCENT = 87
#: Bytes per logit of the dummy sampler run (torch sort-based top-k/top-p; see the module doc).
#: gpt-oss-120b on an H100 (vllm-23278 and vllm-27508: 1,024 rows × 201,088 logits) leaves about
#: 5.7 GiB after weights, forward and non-torch, i.e. ~29 B/logit. A FlashInfer sampler needs
#: far less; Qwen3-0.6B on an A100 (vllm-24577) suggests ~0 B/logit there.
SAMPLER_BYTES_PER_LOGIT = 27
#: Non-torch memory per GPU: 0.35 GiB on an RTX 3090 (vllm-10517), 0.34–0.43 GiB per rank on
#: A100-40GB with TP 4 (vllm-16570). (vLLM PR #10511 printed 1.79 GiB on an H100 with TP 1 under an
#: older accounting; not used.)
NON_TORCH_BYTES = round(0.35 * GIB)
NON_TORCH_TP_EXTRA_BYTES = round(0.05 * GIB)
#: CUDA-graph pool (uncalibrated; see the module doc).
CUDAGRAPH_BASE_BYTES = 256 * MIB
CUDAGRAPH_BYTES_PER_LAYER = 8 * MIB
#: Activation dtype bytes (bf16/fp16 activations; quantized weights still run 16-bit activations).
ACT_BYTES = 2
#: vLLM's default ``max_num_seqs`` when no GPU is given.
DEFAULT_MAX_NUM_SEQS = 256


@dataclass(frozen=True, kw_only=True)
class Overhead:
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    #: the parts of ``activation_bytes``
    forward_bytes: int = 0
    sampler_bytes: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def total_bytes(self) -> int:
        return self.activation_bytes + self.non_torch_bytes + self.cudagraph_bytes


def estimate_overhead(
    model: ModelShape,
    *,
    max_num_batched_tokens: int,
    tensor_parallel_size: int = 1,
    enforce_eager: bool = False,
    gpu: GpuSpec | None = None,
    max_num_seqs: int | None = None,
) -> Overhead:
    """vLLM's non-weight, non-KV memory per GPU for one profile run (see the module doc)."""
    w = model.weights
    if not isinstance(w, WeightShape) or w.hidden_size <= 0:
        raise InputError(f"{model.name}: config.json lacks hidden_size", code="weights-unknown")
    for what, value in (("max_num_batched_tokens", max_num_batched_tokens),
                        ("tensor_parallel_size", tensor_parallel_size)):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(
                f"{what} must be a positive integer, got {value!r}", code="invalid-input"
            )
    tp = tensor_parallel_size
    notes: list[str] = []
    if max_num_seqs is None:
        max_num_seqs = gpu.vllm_default_max_num_seqs if gpu else DEFAULT_MAX_NUM_SEQS
        notes.append(
            f"max_num_seqs {max_num_seqs}: vLLM's default for "
            + (f"{gpu.name} ({gpu.mnbt_tier} tier)" if gpu else "GPUs under 70 GiB")
        )
    width = _live_width_per_token(w, tp)
    forward = cdiv(FORWARD_PERCENT * max_num_batched_tokens * ACT_BYTES * width, 100)
    sampler = max_num_seqs * w.vocab_size * SAMPLER_BYTES_PER_LOGIT
    non_torch = NON_TORCH_BYTES + (NON_TORCH_TP_EXTRA_BYTES if tp > 1 else 0)
    graphs = 0 if enforce_eager else CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER * w.num_layers
    notes.append(
        f"forward: {FORWARD_PERCENT}% × {max_num_batched_tokens:,} tokens × {ACT_BYTES} B × "
        f"{width:,} values live per token; sampler: {max_num_seqs:,} rows × {w.vocab_size:,} "
        f"logits × {SAMPLER_BYTES_PER_LOGIT} B"
    )
    if not enforce_eager:
        notes.append("CUDA-graph pool is an uncalibrated estimate")
    return Overhead(
        activation_bytes=forward + sampler,
        non_torch_bytes=non_torch,
        cudagraph_bytes=graphs,
        forward_bytes=forward,
        sampler_bytes=sampler,
        notes=tuple(notes),
    )


def vllm_available_kv_bytes(
    *,
    total_memory_bytes: int,
    gpu_memory_utilization: float,
    weights_bytes: int,
    overhead: Overhead,
    subtract_cudagraph: bool,
) -> int:
    """vLLM's KV budget per GPU: ``ceil(total · util) − weights − activation − non_torch``, minus the
    CUDA-graph estimate from v0.21 on (``subtract_cudagraph``). May be negative (vLLM then refuses).

    >>> o = Overhead(activation_bytes=2 * GIB, non_torch_bytes=GIB // 2, cudagraph_bytes=GIB)
    >>> vllm_available_kv_bytes(total_memory_bytes=80 * GIB, gpu_memory_utilization=0.9,
    ...     weights_bytes=15 * GIB, overhead=o, subtract_cudagraph=False) / GIB
    54.5
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise InputError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}",
                         code="invalid-input")  # fmt: skip
    requested = math.ceil(total_memory_bytes * gpu_memory_utilization)
    graphs = overhead.cudagraph_bytes if subtract_cudagraph else 0
    return requested - weights_bytes - overhead.activation_bytes - overhead.non_torch_bytes - graphs


def _live_width_per_token(w: WeightShape, tp: int) -> int:
    """Values per token live at the widest layer's peak, one TP rank (see the module doc)."""
    h = w.hidden_size
    widths = [2 * h]
    if "dense" in w.ffns and w.mlp:
        widths.append(3 * cdiv(w.mlp.intermediate_size, tp) + 2 * h)
    if "moe" in w.ffns and w.moe:
        m = w.moe
        shared = 3 * cdiv(m.shared_intermediate_size, tp)
        widths.append(
            m.experts_per_token * (3 * cdiv(m.expert_intermediate_size, tp) + h) + shared + 2 * h
        )
    if w.attention:
        a = w.attention
        q = cdiv(a.num_heads, tp) * a.head_dim * (2 if a.output_gate else 1)
        kv = max(1, a.num_kv_heads // tp) * a.head_dim
        widths.append(q + 2 * kv + a.num_heads * a.head_dim // tp + 2 * h)
    if w.mla:
        m = w.mla
        heads = cdiv(m.num_heads, tp)
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        widths.append(heads * (qk + m.qk_nope_head_dim + m.v_head_dim + m.v_head_dim) + 2 * h)
    if w.mamba2:
        m = w.mamba2
        widths.append(cdiv(2 * m.intermediate_size + 2 * m.n_groups * m.state_size + m.num_heads, tp)
                      + cdiv(m.conv_dim, tp) + 2 * h)  # fmt: skip
    if w.gdn:
        g = w.gdn
        key, value = g.num_k_heads * g.k_head_dim, g.num_v_heads * g.v_head_dim
        widths.append(cdiv(2 * key + 2 * value, tp) + cdiv(2 * key + value, tp) + 2 * h)
    return max(widths)
