"""What vLLM subtracts besides the weights before the KV cache: activation peak, non-torch, CUDA graphs.

vLLM sizes the KV cache from a profile run (engine-accounting §1.8)::

    available = ceil(total · gpu_memory_utilization) − weights − torch_peak − non_torch − cudagraph

(the CUDA-graph estimate is subtracted from v0.21 on). Each term is modelled from what decides it,
per engine era (:data:`ERAS`), and checked against the records that print it
(``reference/engine_logs.yaml``; ``python bench/accuracy.py`` prints every record's error).

**Activation peak** (the profile run's "torch peak increase", per GPU) — the profile run does a
forward over ``max_num_batched_tokens`` (T) tokens, then (last PP stage) a dummy sampler run over
``R = min(max_num_seqs, T)`` rows of logits. V1 frees the forward's temporaries before sampling, so
the peak is the larger of the two; V0 keeps both:

- forward ``F = FORWARD_PERCENT/100 · T · 2 B · w``, ``w`` the widest layer's live width per token
  (dense MLP ``3 · I/tp + 2 · H``; MoE ``top_k · (3 · I_e/tp + H) + 3 · I_shared/tp + 2 · H``; attention
  and Mamba/GDN mixers their projection widths);
- sampler ``S = R · V · SAMPLER_BYTES_PER_LOGIT + T · H · 2 B`` (the logits and the sampler's
  copies, plus the forward's output hidden states still held);
- fused-MoE workspace (Triton fused MoE, bf16 or fp8 experts; not mxfp4): the modular kernel keeps
  its workspaces between calls, so they are live during sampling too:
  ``T · top_k · (max(I_e/tp, H) + 2 · I_e/tp) · 2 B + T · H · 2 B``;
- non-first PP stages also hold the received hidden states and residual: ``2 · T · H · 2 B``.

Worked example, Llama-3.1-8B on an H100 with vLLM 0.19 (8,192 tokens, 1,024 seqs): F = 1.41 ·
8,192 · 2 · 51,200 = 1.10 GiB; S = 1,024 · 128,256 · 14.94 + 8,192 · 4,096 · 2 = 1.885 GiB; peak
1.885 GiB, logged "torch peak memory increase: 1.89GiB" (repolog-llmd-llama31-8b-h100-tp1-8k).

**Non-torch** (CUDA context growth, cuBLAS workspaces, NCCL and custom all-reduce buffers): a
figure per era for one GPU, for tensor parallelism and for pipeline-only parallelism.

**CUDA graphs** (0 with ``enforce_eager``): ``CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER · L``
(layers on the stage), fitted to vLLM 0.19's own "Estimated CUDA graph memory" lines; subtracted by
the engine only from v0.21 on (``VllmProfile.subtracts_cudagraph``).

**Band**: how far the engine's figure may lie from the prediction, measured on the records
(:data:`ERAS` ``band_bytes``), widened on the pessimistic side for what the model does not cover
(vision encoders, the 0.10-era sampler beyond 256 rows, the CUDA-graph estimate where it is
subtracted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from kvcalc.errors import InputError
from kvcalc.hfconfig.weight_shape import WeightShape
from kvcalc.model.gpus import GpuSpec
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, MIB, cdiv

#: Activation dtype bytes (bf16/fp16 activations; quantized weights still run 16-bit activations).
ACT_BYTES = 2
#: vLLM's default ``max_num_seqs`` when no GPU is given.
DEFAULT_MAX_NUM_SEQS = 256
#: CUDA-graph pool, fitted to vLLM 0.19's "Estimated CUDA graph memory" on an H100 (capture sizes up
#: to 512): 0.49 GiB for 8 layers (PP 4 stage), 0.84 for 32 (Llama-3.1-8B), 1.63 for 80 (Qwen2.5-72B
#: TP 2) → 0.39 GiB + 16 MiB per layer. The other seven records of the sweep lie within 0.33 GiB
#: (gpt-oss-20b: 0.77 predicted, 1.09 estimated and 1.55 used).
CUDAGRAPH_BASE_BYTES = round(0.39 * GIB)
CUDAGRAPH_BYTES_PER_LAYER = 16 * MIB
#: How much the CUDA-graph estimate may be off where vLLM subtracts it (0.33 GiB in the sweep).
CUDAGRAPH_BAND_BYTES = round(0.35 * GIB)
#: Vision encoders are profiled with the text model and their towers are not all counted: the
#: pessimistic side widens by the worst such record (vllm-16570, Qwen2.5-VL-72B: 2.55 GiB).
VISION_BAND_BYTES = round(2.6 * GIB)
#: The 0.10-era sampler beyond 256 rows: gpt-oss-120b on an H100 (1,024 rows × 201,088 logits) used
#: 7.5 GiB beyond its weights at 1,024 and at 8,192 batched tokens (vllm-27508, vllm-23278): 4.75 and
#: 4.60 GiB more than this model, i.e. up to 24.8 B more per logit. Every other 0.10-era record samples
#: 256 rows and fits 14.94 B/logit; 0.19 samples 1,024 rows at 14.94 too. Unexplained, so the
#: pessimistic end allows 25 B per logit more there.
EARLY_WIDE_SAMPLER_EXTRA_BYTES_PER_LOGIT = 25
EARLY_WIDE_SAMPLER_ROWS = 256


@dataclass(frozen=True, kw_only=True)
class ProfileEra:
    """How one range of vLLM releases profiles memory (constants per era, with their records)."""

    name: str
    since: tuple[int, int]
    #: V0 keeps the forward's temporaries while sampling (peak = F + S); V1 frees them (max)
    sampler_adds_to_forward: bool
    forward_percent: int
    #: sampler bytes per logit, in hundredths of a byte
    sampler_centibytes_per_logit: int
    moe_workspace_kept: bool
    non_torch_bytes: int
    #: with tensor parallelism on NVSwitch-class Hopper/Blackwell boards (NCCL NVLS buffers)
    non_torch_tp_bytes: int
    #: with tensor parallelism elsewhere (PCIe, NVL pairs, Ampere and older)
    non_torch_tp_other_bytes: int
    non_torch_pp_bytes: int
    #: ± error measured on the era's records (see ``bench/accuracy.py``)
    band_bytes: int
    sources: str


ERAS: tuple[ProfileEra, ...] = (
    ProfileEra(
        name="0.19", since=(0, 19), sampler_adds_to_forward=False, forward_percent=141,
        sampler_centibytes_per_logit=1494, moe_workspace_kept=True,
        non_torch_bytes=round(0.26 * GIB), non_torch_tp_bytes=round(2.10 * GIB),
        non_torch_tp_other_bytes=round(0.11 * GIB), non_torch_pp_bytes=round(0.07 * GIB),
        band_bytes=round(0.25 * GIB),
        sources="H100 sweep, vLLM 0.19 (15 records): sampler 14.94 B/logit and non-torch 0.26 GiB "
        "from Llama-3.1-8B TP 1; forward 141% from its PP 4 first stage (1.10 GiB); TP non-torch "
        "2.10 GiB from Qwen2.5-72B TP 2 (2.07-2.21 GiB at TP 2 and 4, H100 SXM); PP-only 0.07 GiB; "
        "TP off NVSwitch boards: the 0.10 figure (unconfirmed for 0.19)",
    ),
    ProfileEra(
        name="0.10", since=(0, 10), sampler_adds_to_forward=False, forward_percent=141,
        sampler_centibytes_per_logit=1494, moe_workspace_kept=True,
        non_torch_bytes=round(0.02 * GIB), non_torch_tp_bytes=round(0.11 * GIB),
        non_torch_tp_other_bytes=round(0.11 * GIB), non_torch_pp_bytes=round(0.02 * GIB),
        band_bytes=round(0.25 * GIB),
        sources="Llama-3.2-1B dev build (non-torch 0.02 GiB printed); Qwen2-7B TP 2 on A100-80GB "
        "(vLLM 0.10.1: 0.11 GiB left after weights, activation and KV); activation terms of 0.19",
    ),
    ProfileEra(
        name="0.8", since=(0, 8), sampler_adds_to_forward=False, forward_percent=141,
        sampler_centibytes_per_logit=1494, moe_workspace_kept=True,
        non_torch_bytes=round(0.38 * GIB), non_torch_tp_bytes=round(0.38 * GIB),
        non_torch_tp_other_bytes=round(0.38 * GIB), non_torch_pp_bytes=round(0.38 * GIB),
        band_bytes=round(5.0 * GIB),
        sources="early V1: non-torch 0.34-0.43 GiB per rank (vllm-16570); an L40S log of April "
        "2025 main (vllm-17122) shows 4.9 GiB more overhead than any term explains, hence the band",
    ),
    ProfileEra(
        name="0.6", since=(0, 0), sampler_adds_to_forward=True, forward_percent=87,
        sampler_centibytes_per_logit=1900, moe_workspace_kept=False,
        non_torch_bytes=round(0.35 * GIB), non_torch_tp_bytes=round(0.40 * GIB),
        non_torch_tp_other_bytes=round(0.40 * GIB), non_torch_pp_bytes=round(0.35 * GIB),
        band_bytes=round(0.5 * GIB),
        sources="V0: two profiles of Llama-3-8B, 2.99 GiB at 29,000 tokens (vllm-10517) and "
        "1.26 GiB at 8,192 (vLLM PR #10511): slope 87% of the width, 19 B per sampler logit",
    ),
)  # fmt: skip


def era_for(engine_version: str | None) -> ProfileEra:
    """The era of ``engine_version`` (``"0.19.0"``, a profile name, None = newest)."""
    match = re.match(r"\s*v?(\d+)\.(\d+)", engine_version or "")
    if match is None:
        return ERAS[0]
    wanted = (int(match[1]), int(match[2]))
    for era in ERAS:
        if wanted >= era.since:
            return era
    return ERAS[-1]  # pragma: no cover - the last era starts at 0.0


@dataclass(frozen=True, kw_only=True)
class StageOverhead:
    """One pipeline stage's terms (per GPU of that stage)."""

    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    forward_bytes: int = 0
    sampler_bytes: int = 0
    moe_workspace_bytes: int = 0
    pp_buffers_bytes: int = 0


@dataclass(frozen=True, kw_only=True)
class Overhead:
    """The last (binding) stage's terms, every stage's, and the error band of the estimate."""

    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    #: the parts of ``activation_bytes``
    forward_bytes: int = 0
    sampler_bytes: int = 0
    moe_workspace_bytes: int = 0
    #: per pipeline stage, first to last (the last is the one above); empty: one stage, as above
    stages: tuple[StageOverhead, ...] = ()
    #: the engine's figure may be this much below the prediction ...
    band_low_bytes: int = 0
    #: ... or this much above it
    band_high_bytes: int = 0
    era: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def total_bytes(self) -> int:
        return self.activation_bytes + self.non_torch_bytes + self.cudagraph_bytes

    def per_stage(self) -> tuple[StageOverhead, ...]:
        if self.stages:
            return self.stages
        return (StageOverhead(activation_bytes=self.activation_bytes, non_torch_bytes=self.non_torch_bytes,
                              cudagraph_bytes=self.cudagraph_bytes),)  # fmt: skip


def estimate_overhead(
    model: ModelShape,
    *,
    max_num_batched_tokens: int,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    enforce_eager: bool = False,
    gpu: GpuSpec | None = None,
    max_num_seqs: int | None = None,
    engine_version: str | None = None,
    quantization: str | None = None,
    subtracts_cudagraph: bool = False,
    seqs_default: str = "vLLM's default",
) -> Overhead:
    """vLLM's non-weight, non-KV memory per GPU for one profile run (see the module doc).

    ``quantization`` overrides the checkpoint's method (it decides the MoE kernel);
    ``subtracts_cudagraph`` widens the band by the graph estimate's error where vLLM subtracts it.
    Without ``max_num_seqs`` the sampler is sized for vLLM's default; ``seqs_default`` says in the
    note whose default that is for the engine being planned.
    """
    w = model.weights
    if not isinstance(w, WeightShape) or w.hidden_size <= 0:
        raise InputError(f"{model.name}: config.json lacks hidden_size", code="weights-unknown")
    for what, value in (("max_num_batched_tokens", max_num_batched_tokens),
                        ("tensor_parallel_size", tensor_parallel_size),
                        ("pipeline_parallel_size", pipeline_parallel_size)):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(
                f"{what} must be a positive integer, got {value!r}", code="invalid-input"
            )
    tp, pp, tokens = tensor_parallel_size, pipeline_parallel_size, max_num_batched_tokens
    era = era_for(engine_version)
    notes: list[str] = []
    if max_num_seqs is None:
        max_num_seqs = gpu.vllm_default_max_num_seqs if gpu else DEFAULT_MAX_NUM_SEQS
        notes.append(
            f"max_num_seqs {max_num_seqs}: {seqs_default} for "
            + (f"{gpu.name} ({gpu.mnbt_tier} tier)" if gpu else "GPUs under 70 GiB")
        )
    method = (quantization or (w.quantization.method if w.quantization else "") or "").lower()
    mxfp4 = method == "mxfp4"
    width = _live_width_per_token(w, tp)
    workspace = moe_workspace_bytes(w, tokens, tp) if era.moe_workspace_kept and not mxfp4 else 0
    rows = min(max_num_seqs, tokens)
    layers = _stage_layers(w.num_layers, pp)
    stages = []
    for index in range(pp):
        first, last = index == 0, index == pp - 1
        forward = cdiv(era.forward_percent * tokens * ACT_BYTES * width, 100)
        logits = cdiv(rows * w.vocab_size * era.sampler_centibytes_per_logit, 100) if last else 0
        buffers = 0 if first else 2 * tokens * w.hidden_size * ACT_BYTES
        if era.sampler_adds_to_forward:
            sampler, peak = logits, forward + logits
        else:
            forward = max(forward, workspace + 2 * tokens * w.hidden_size * ACT_BYTES)
            sampler = logits + tokens * w.hidden_size * ACT_BYTES + workspace if last else 0
            peak = max(forward, sampler)
        graphs = (
            0 if enforce_eager else CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER * layers[index]
        )
        stages.append(StageOverhead(
            activation_bytes=peak + buffers, non_torch_bytes=_non_torch(era, tp, pp, gpu),
            cudagraph_bytes=graphs, forward_bytes=forward, sampler_bytes=sampler,
            moe_workspace_bytes=workspace, pp_buffers_bytes=buffers,
        ))  # fmt: skip
    notes.append(
        f"activation ({era.name} era): max(forward {_gib(stages[-1].forward_bytes)}, sampler "
        f"{_gib(stages[-1].sampler_bytes)}); forward {era.forward_percent}% × {tokens:,} tokens × "
        f"{ACT_BYTES} B × {width:,} values, sampler {rows:,} rows × {w.vocab_size:,} logits × "
        f"{era.sampler_centibytes_per_logit / 100:.2f} B"
        + (f", fused-MoE workspace {_gib(workspace)}" if workspace else "")
    )
    low, high = era.band_bytes, era.band_bytes
    if subtracts_cudagraph and not enforce_eager:
        low, high = low + CUDAGRAPH_BAND_BYTES, high + CUDAGRAPH_BAND_BYTES
    if w.vision_encoder:
        low += VISION_BAND_BYTES
        notes.append(
            f"vision encoder: vLLM profiles it beside the text model; the pessimistic end allows "
            f"{_gib(VISION_BAND_BYTES)} for it" + ("" if w.vision else " and its uncounted tower")
        )
    if era.name == "0.10" and rows > EARLY_WIDE_SAMPLER_ROWS:
        extra = rows * w.vocab_size * EARLY_WIDE_SAMPLER_EXTRA_BYTES_PER_LOGIT
        low += extra
        notes.append(
            f"vLLM 0.10-0.18 sampling {rows:,} rows used up to {_gib(extra)} more in the gpt-oss "
            "logs than modelled; the pessimistic end allows for it"
        )
    final = stages[-1]
    return Overhead(
        activation_bytes=final.activation_bytes,
        non_torch_bytes=final.non_torch_bytes,
        cudagraph_bytes=final.cudagraph_bytes,
        forward_bytes=final.forward_bytes,
        sampler_bytes=final.sampler_bytes,
        moe_workspace_bytes=workspace,
        stages=tuple(stages),
        band_low_bytes=low,
        band_high_bytes=high,
        era=era.name,
        notes=tuple(notes),
    )


def moe_workspace_bytes(w: WeightShape, tokens: int, tp: int) -> int:
    """The fused-MoE kernel's kept workspaces and output for ``tokens`` tokens (0 without MoE)."""
    m = w.moe
    if m is None or "moe" not in w.ffns:
        return 0
    inter, h = cdiv(m.expert_intermediate_size, tp), w.hidden_size
    return (
        tokens * m.experts_per_token * (max(inter, h) + 2 * inter) * ACT_BYTES
        + tokens * h * ACT_BYTES
    )


def _non_torch(era: ProfileEra, tp: int, pp: int, gpu: GpuSpec | None) -> int:
    if tp > 1:
        return era.non_torch_tp_bytes if nvswitch_class(gpu) else era.non_torch_tp_other_bytes
    return era.non_torch_pp_bytes if pp > 1 else era.non_torch_bytes


def nvswitch_class(gpu: GpuSpec | None) -> bool:
    """An NVIDIA Hopper/Blackwell data-centre board of NVSwitch systems (SXM, GH200, B200), where
    NCCL allocates NVLink SHARP buffers; unknown GPUs count as one (the larger, measured figure)."""
    if gpu is None:
        return True
    name = gpu.name.lower()
    major = int((gpu.compute_capability or "0").partition(".")[0] or 0)
    consumer = name.startswith("rtx") or "pcie" in name or "nvl" in name
    return gpu.vendor.lower() == "nvidia" and major in (9, 10) and not consumer


def _stage_layers(num_layers: int, pp: int) -> list[int]:
    """vLLM's ``get_pp_indices`` split: ``L // pp`` each, the remainder to stages -2, -3, ..."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


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
    import math

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
        mla = w.mla
        heads = cdiv(mla.num_heads, tp)
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        widths.append(heads * (qk + mla.qk_nope_head_dim + 2 * mla.v_head_dim) + 2 * h)
    if w.mamba2:
        ssm = w.mamba2
        widths.append(cdiv(2 * ssm.intermediate_size + 2 * ssm.n_groups * ssm.state_size + ssm.num_heads, tp)
                      + cdiv(ssm.conv_dim, tp) + 2 * h)  # fmt: skip
    if w.gdn:
        g = w.gdn
        key, value = g.num_k_heads * g.k_head_dim, g.num_v_heads * g.v_head_dim
        widths.append(cdiv(2 * key + 2 * value, tp) + cdiv(2 * key + value, tp) + 2 * h)
    return max(widths)


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The overhead correction for one GPU, from ``kvcalc verify --fill --record`` files
    (:mod:`kvcalc.sources.calibration` reads them)."""

    gpu_name: str
    num_records: int
    #: add to the predicted overhead (may be negative); 0 when no record matched
    extra_overhead_bytes: int
    source: str
    #: measured fraction of the decode roofline (no record carries one yet)
    decode_efficiency: float | None = None


def apply_calibration(overhead: Overhead, calibration: Calibration) -> Overhead:
    """``overhead`` corrected by ``kvcalc verify --fill --record`` measurements (pure)."""
    path = calibration.source
    if calibration.num_records == 0:
        note = f"calibration: no --fill record for {calibration.gpu_name} in {path}"
        return replace(overhead, notes=(*overhead.notes, note))
    extra = calibration.extra_overhead_bytes
    non_torch = max(0, overhead.non_torch_bytes + extra)
    note = (f"calibration: {extra / (1 << 20):+,.0f} MiB overhead from "
            f"{calibration.num_records} verify --fill record(s) for {calibration.gpu_name} in {path}")  # fmt: skip
    return replace(overhead, non_torch_bytes=non_torch, notes=(*overhead.notes, note))
