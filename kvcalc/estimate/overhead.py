"""What vLLM subtracts besides the weights before the KV cache: activation peak, non-torch, CUDA graphs.

vLLM sizes the KV cache from a profile run (engine-accounting §1.8)::

    available = ceil(total · gpu_memory_utilization) − weights − torch_peak − non_torch − cudagraph

(the CUDA-graph estimate is subtracted from v0.21 on). Each term is modelled from what decides it,
per engine era (:data:`~kvcalc.estimate.eras.ERAS`), and checked against the records that print it
(``reference/engine_logs.yaml``; ``python bench/accuracy.py`` prints every record's error).

**Activation peak** (the profile run's "torch peak increase", per GPU) — the profile run does a
forward over ``max_num_batched_tokens`` (T) tokens, then (last PP stage) a dummy sampler run over
``R = min(max_num_seqs, T)`` rows of logits. V1 frees the forward's temporaries before sampling, so
the peak is the larger of the two (V0: vLLM 0.6.4's profile run, :mod:`kvcalc.estimate.v0_profile`):

- forward ``F = FORWARD_PERCENT/100 · T · 2 B · w``, ``w`` the widest layer's live width per token
  (dense MLP ``3 · I/tp + 2 · H``; MoE ``top_k · (3 · I_e/tp + H) + 3 · I_shared/tp + 2 · H``; attention
  and Mamba/GDN mixers their projection widths);
- sampler ``S = R · V · b + T · H · 2 B`` (the logits and the sampler's copies, plus the forward's
  output hidden states still held); ``b`` the sampler's bytes per logit, 14.94 fused or 38 sorting
  (:mod:`kvcalc.estimate.eras` derives both from the code and says which release runs which);
- fused-MoE workspace (Triton fused MoE, bf16 or fp8 experts; not mxfp4): the modular kernel keeps
  its workspaces between calls, so they are live during sampling too:
  ``T · top_k · (max(I_e/tp, H) + 2 · I_e/tp) · 2 B + T · H · 2 B``;
- non-first PP stages also hold the received hidden states and residual: ``2 · T · H · 2 B``.

Worked example, Llama-3.1-8B on an H100 with vLLM 0.19 (8,192 tokens, 1,024 seqs): F = 1.41 ·
8,192 · 2 · 51,200 = 1.10 GiB; S = 1,024 · 128,256 · 14.94 + 8,192 · 4,096 · 2 = 1.885 GiB; peak
1.885 GiB, logged "torch peak memory increase: 1.89GiB" (repolog-llmd-llama31-8b-h100-tp1-8k).

**Non-torch** (CUDA context growth, cuBLAS workspaces, NCCL and custom all-reduce buffers): a
figure per era for one GPU, for tensor parallelism and for pipeline-only parallelism.

**CUDA graphs** (0 with ``enforce_eager``): vLLM's own estimate from the graphs it captures — the
first capture plus, per further graph, a cost per layer of the stage (:mod:`kvcalc.estimate.cudagraph`;
the counts from the engine's capture sizes, :class:`~kvcalc.estimate.captures.CudaGraphCaptures`);
subtracted by the engine only from v0.20 on (``VllmProfile.subtracts_cudagraph``).

**Band**: how far the engine's figure may lie from the prediction, measured on the records
(:data:`ERAS` ``band_bytes``), widened on the pessimistic side for what the model does not cover
(vision encoders other than Qwen2.5-VL's in V0, a 0.10-0.11 install without FlashInfer, the
CUDA-graph estimate where it is subtracted).

**Vision encoder, V0**: for Qwen2.5-VL the V0 profile run is modelled from vLLM 0.8.3's code
(:mod:`kvcalc.estimate.encoder_profile`): the dummy prompt holds the largest image (and video) and is
not cut, so the text forward runs over its placeholders with the fp32 pixels held; the activation is
the larger of that and the estimate above.
"""

from __future__ import annotations

import math
from dataclasses import field, replace

from kvcalc.errors import InputError
from kvcalc.estimate.activation import (
    ACT_BYTES,
    live_width_per_token,
    moe_workspace_bytes,
    stage_layers,
)
from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.estimate.cudagraph import (
    CUDAGRAPH_BAND_HIGH_BYTES,
    CUDAGRAPH_BAND_LOW_BYTES,
    NCCL_IN_GRAPHS_BYTES,
    SWEEP_CAPTURES,
    cudagraph_bytes,
    describe,
)
from kvcalc.estimate.eras import ERAS, ProfileEra, SamplerKind, era_for
from kvcalc.estimate.interconnect import nccl_in_graphs, nvswitch_class
from kvcalc.frozen import frozen
from kvcalc.hfconfig.weight_shape import WeightShape
from kvcalc.model.gpus import GpuSpec
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB, cdiv

__all__ = [
    "ACT_BYTES", "CUDAGRAPH_BAND_HIGH_BYTES", "CUDAGRAPH_BAND_LOW_BYTES", "ERAS", "Overhead", "ProfileEra",
    "StageOverhead", "era_for", "estimate_overhead", "moe_workspace_bytes",
    "nvswitch_class", "vllm_available_kv_bytes",
]  # fmt: skip

#: vLLM's default ``max_num_seqs`` when no GPU is given.
DEFAULT_MAX_NUM_SEQS = 256
#: Vision encoders kvcalc does not model in the profile run (every tower but Qwen2.5-VL's in V0,
#: :mod:`kvcalc.estimate.encoder_profile`): the pessimistic side widens by what the one such record
#: showed before it was modelled (vllm-16570, Qwen2.5-VL-72B in V0: 2.18 GiB above kvcalc's text
#: estimate, the text forward over the image's 16,384 placeholders). Unconfirmed for V1, whose
#: encoder budget is another rule: the multimodal records of the 0.19 sweep print torch peaks
#: within 0.17 GiB of kvcalc's text and sampler estimate (Gemma 3 27B 3.99 GiB against 3.82,
#: Mistral Small 3.1 2.18 against 2.34; their samplers over 262,208 / 131,072 logits set it); what
#: their encoders take there was not derived.
VISION_BAND_BYTES = round(2.6 * GIB)


@frozen
class StageOverhead:
    """One pipeline stage's terms (per GPU of that stage)."""

    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    forward_bytes: int = 0
    sampler_bytes: int = 0
    moe_workspace_bytes: int = 0
    pp_buffers_bytes: int = 0


@frozen
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
    #: the engine estimates the graphs' memory before sizing the cache (False: captured after,
    #: not in the budget even where the release subtracts its estimate)
    cudagraph_estimated: bool = True

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
    flashinfer_sampler: bool | None = None,
    mm_limits: tuple[int, int] = (1, 1),
    cudagraph_captures: CudaGraphCaptures | None = None,
    communicator_size: int = 1,
) -> Overhead:
    """vLLM's non-weight, non-KV memory per GPU for one profile run (see the module doc).

    ``communicator_size``: the GPUs the rank talks to besides its TP group (vLLM's DP/EP group,
    TP × DP × PCP): above 1 the non-torch term is the multi-GPU one (NCCL communicators).

    ``quantization`` overrides the checkpoint's method (it decides the MoE kernel);
    ``subtracts_cudagraph`` widens the band by the graph estimate's error where vLLM subtracts it;
    ``flashinfer_sampler`` says whether FlashInfer's sampler runs where the release leaves it to the
    installation (None: the era's default, see :mod:`kvcalc.estimate.eras`).
    Without ``max_num_seqs`` the sampler is sized for vLLM's default; ``seqs_default`` says in the
    note whose default that is for the engine being planned. ``mm_limits``: images and videos per
    prompt (``--limit-mm-per-prompt``; vLLM's default one each) for the multimodal profile run.
    ``cudagraph_captures``: the graphs the engine captures (None: the capture set the constants were
    measured at, vLLM's default at max_num_seqs >= 256; ignored with ``enforce_eager``).
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
    width = live_width_per_token(w, tp)
    kept = era.moe_workspace_kept and method != "mxfp4"
    workspace = moe_workspace_bytes(w, tokens, tp) if kept else 0
    rows = min(max_num_seqs, tokens)
    kind = era.sampler(rows, flashinfer_sampler)
    per_logit = era.centibytes_per_logit(kind, rows)
    hidden = tokens * w.hidden_size * ACT_BYTES
    layers = stage_layers(w.num_layers, pp)
    captures = cudagraph_captures or SWEEP_CAPTURES
    stages = []
    for index in range(pp):
        first, last = index == 0, index == pp - 1
        buffers = 0 if first else 2 * hidden
        if era.v0_profile:
            from kvcalc.estimate.v0_profile import v0_profile  # V0 releases only: kept off start-up

            v0 = v0_profile(w, architectures=model.architectures, tokens=tokens, rows=rows, tp=tp,
                            sm90=_sm90(gpu), last_stage=last, flashinfer=bool(flashinfer_sampler))  # fmt: skip
            forward, sampler, peak = v0.forward_bytes, v0.sampler_bytes, v0.peak_bytes
        else:
            forward = cdiv(era.forward_percent * tokens * ACT_BYTES * width, 100)
            forward = max(forward, workspace + 2 * hidden)
            logits = cdiv(rows * w.vocab_size * per_logit, 100) if last else 0
            sampler = logits + hidden + workspace if last else 0
            peak = max(forward, sampler)
        graphs = 0 if enforce_eager else cudagraph_bytes(captures, layers[index])
        stages.append(StageOverhead(
            activation_bytes=peak + buffers, non_torch_bytes=_non_torch(era, max(tp, communicator_size), pp, gpu),
            cudagraph_bytes=graphs, forward_bytes=forward, sampler_bytes=sampler,
            moe_workspace_bytes=workspace, pp_buffers_bytes=buffers,
        ))  # fmt: skip
    notes.append(
        v0.note(tokens, rows, w.vocab_size)
        if era.v0_profile
        else f"activation (profile-run constants fitted on logs of releases {era.name} and later): max(forward "
        f"{_gib(stages[-1].forward_bytes)}, sampler {_gib(stages[-1].sampler_bytes)}); forward "
        f"{era.forward_percent}% (measured peak over the live values) × {tokens:,} tokens × "
        f"{ACT_BYTES} B × {width:,} values live at the widest layer, sampler {rows:,} row{'s' if rows != 1 else ''} × "
        f"{w.vocab_size:,} logits × {per_logit / 100:.2f} B ({_SAMPLER_WORDS[kind]})"
        + (f", fused-MoE workspace {_gib(workspace)}" if workspace else "")
    )
    low, high = era.band_bytes, era.band_bytes
    graphs_counted = (subtracts_cudagraph and not enforce_eager and captures.total_graphs > 0
                      and captures.estimated)  # fmt: skip
    if not enforce_eager and captures.total_graphs:
        unbudgeted = "" if subtracts_cudagraph else "; not subtracted by this release"
        if subtracts_cudagraph and not captures.estimated:
            unbudgeted = (
                "; vLLM estimates none for them (model runner V2 before 0.29): not subtracted"
            )
        notes.append(describe(captures, layers[-1]) + unbudgeted)
    if graphs_counted:
        low, high = low + CUDAGRAPH_BAND_LOW_BYTES, high + CUDAGRAPH_BAND_HIGH_BYTES
        if nccl_in_graphs(gpu, tp):
            low += NCCL_IN_GRAPHS_BYTES
            notes.append(
                f"tensor parallelism {tp} over PCIe: vLLM's custom all-reduce is off, NCCL's is "
                f"captured into every graph; the pessimistic end allows {_gib(NCCL_IN_GRAPHS_BYTES)} "
                "more graph memory (one record: Qwen2.5-72B TP 4 on L40S)"
            )
    if era.band_low_extra_bytes:
        low += era.band_low_extra_bytes
        notes.append(
            f"vLLM {era.name} era (0.8.0-0.9.0): memory other processes hold on the GPU is subtracted "
            f"too; kvcalc assumes none, the pessimistic end allows {_gib(era.band_low_extra_bytes)}"
        )
    # V0 profiles no encoder when the limits are 0 (0.8.3: get_max_multimodal_tokens is 0)
    no_items = era.v0_multimodal_profile and sum(mm_limits) == 0
    mm_modelled = (era.v0_multimodal_profile and pp == 1 and w.vision is not None
                   and w.vision.family == "qwen2_5_vl" and w.mlp is not None)  # fmt: skip
    if w.vision_encoder and not (mm_modelled or no_items):
        low += VISION_BAND_BYTES
        notes.append(
            f"vision encoder: vLLM profiles it beside the text model; the pessimistic end allows "
            f"{_gib(VISION_BAND_BYTES)} for it"
            + ("" if w.vision or w.whisper else " and its uncounted tower")
        )
    if era.flashinfer_optional and flashinfer_sampler is None and kind is SamplerKind.FUSED:
        sort = era.centibytes_per_logit(SamplerKind.SORT, rows)
        extra = cdiv(rows * w.vocab_size * (sort - per_logit), 100)
        low += extra
        notes.append(
            f"FlashInfer's sampler assumed installed (the vLLM {era.name}-era Docker image ships it; "
            f"the vllm wheel does not depend on it): without it the profile run sorts the logits, "
            f"{sort / 100:.0f} B each, {_gib(extra)} more; the pessimistic end allows for it "
            "(engine option flashinfer_sampler=false plans that install)"
        )
    if mm_modelled and not no_items:
        from kvcalc.estimate.encoder_profile import v0_qwen2_5_vl_profile  # V0 Qwen2.5-VL only

        mm = v0_qwen2_5_vl_profile(w, tensor_parallel_size=tp, max_num_batched_tokens=tokens,
                                   max_num_seqs=max_num_seqs, images=mm_limits[0],
                                   videos=mm_limits[1])  # fmt: skip
        notes.append(mm.note())
        if mm.peak_bytes > stages[-1].activation_bytes:
            stages[-1] = replace(stages[-1], activation_bytes=mm.peak_bytes)
    final = stages[-1]
    return Overhead(
        activation_bytes=final.activation_bytes,
        non_torch_bytes=final.non_torch_bytes,
        cudagraph_bytes=final.cudagraph_bytes,
        cudagraph_estimated=captures.estimated,
        forward_bytes=final.forward_bytes,
        sampler_bytes=final.sampler_bytes,
        moe_workspace_bytes=workspace,
        stages=tuple(stages),
        band_low_bytes=low,
        band_high_bytes=high,
        era=era.name,
        notes=tuple(notes),
    )


_SAMPLER_WORDS = {
    SamplerKind.FUSED: "fused top-k/top-p sampler",
    SamplerKind.SORT: "PyTorch top-k/top-p: the logits sorted",
}


def _non_torch(era: ProfileEra, tp: int, pp: int, gpu: GpuSpec | None) -> int:
    n = era.non_torch
    if tp > 1:
        return n.tp_nvswitch_bytes if nvswitch_class(gpu) else n.tp_other_bytes
    return n.pp_only_bytes if pp > 1 else n.one_gpu_bytes


def _sm90(gpu: GpuSpec | None) -> bool:
    """Compute capability 9.0 (PyTorch's larger cuBLAS workspace); an unknown GPU counts as one."""
    return gpu is None or (gpu.compute_capability or "9.0") == "9.0"


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
    CUDA-graph estimate from v0.20 on (``subtract_cudagraph``). May be negative (vLLM then refuses).

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


def without_vision_band(overhead: Overhead, why: str) -> Overhead:
    """``overhead`` without the vision-encoder allowance (the engine builds no tower: ``why``)."""
    notes = tuple(n for n in overhead.notes if not n.startswith("vision encoder: vLLM profiles it"))
    if len(notes) == len(overhead.notes):
        return overhead
    return replace(overhead, band_low_bytes=overhead.band_low_bytes - VISION_BAND_BYTES,
                   notes=(*notes, f"no vision-encoder allowance: {why}"))  # fmt: skip
