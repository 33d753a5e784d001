"""How each range of vLLM releases profiles memory: one frozen :class:`ProfileEra` per range.

The constants are checked against the records that print them (``reference/engine_logs.yaml``;
``python bench/accuracy.py``). The terms themselves are computed in :mod:`kvcalc.estimate.overhead`.
V0 (the ``0.6`` era) uses none of the activation constants below: its activation is vLLM 0.6.4's
profile run in closed form (:mod:`kvcalc.estimate.v0_profile`), its sampler the sort (38 B per
logit from 128 rows; 50 B for 2-127; 18 B with ``VLLM_USE_FLASHINFER_SAMPLER=1``).

**The dummy sampler** (the profile run samples ``R = min(max_num_seqs, max_num_batched_tokens)``
rows of the full vocabulary with top-k and top-p set) costs bytes per logit by implementation:

- :attr:`SamplerKind.FUSED` — FlashInfer's top-k/top-p sampling, or from v0.17 on the Triton
  top-k/top-p kernel (rows ≥ 8), which masks in place: the bf16 logits (2 B), their fp32 copy (4 B),
  the masked copy or probabilities (4 B) and the sampling buffer (4 B), 14 B per logit by the code;
  14.94 B measured (Llama-3.1-8B on an H100, vLLM 0.19: "torch peak memory increase: 1.89GiB").
- :attr:`SamplerKind.SORT` — the PyTorch-native path (``apply_top_k_top_p``) sorts the whole fp32
  logits. PyTorch's segmented sort (``SortStable.cu``, ≥ 128 rows) holds the sorted values (4 B)
  and indices (8 B), an int64 iota (8 B) and cub's alternate keys and values (4 + 8 B) beside the
  bf16 and fp32 logits: 38 B per logit. Under 128 rows the full-sort variant holds two int2
  index/segment arrays, a keys buffer and the int2 alternates instead: 50 B; one row
  (``segmented_sort_large_segments``) holds an iota of the row and cub's alternates: 38 B again.

Which one runs (``vllm/v1/sample/ops/topk_topp_sampler.py`` of each release, read from the wheels):
0.8.x falls back to the sort when FlashInfer ≥ 0.2.3 is installed and FlashInfer is not a vLLM
dependency; 0.9.0–0.11 use FlashInfer (≥ 0.2.3) when it is installed (PyPI: only the
``vllm[flashinfer]`` extra; the Docker image ships it); 0.12–0.16 sort unless ``VLLM_USE_FLASHINFER_SAMPLER=1``; 0.17 on use
the Triton kernel (0.21 on: FlashInfer by default), sorting only under 8 rows. The vLLM engine option
``flashinfer_sampler`` says which applies where the release leaves it to the installation.

**What counts as non-torch** (``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``, read
in every wheel from 0.8.0 to 0.9.2): 0.8.0-0.9.0 measure, after the profile run and
``torch.cuda.empty_cache()``, ``(total − free) − torch allocated`` and add it to the torch peak —
every byte on the device this process's torch did not allocate: its CUDA context, NCCL buffers, and
the memory of any other process on the GPU. 0.9.1 on (``memory_profiling`` from the worker's start-up
snapshot, as V0) count only the increase during the profile run. So the 0.8 era (0.8.0-0.9.0) adds
the CUDA context to the later figures and cannot see other processes: its pessimistic end allows for
them. 0.8.x uses FlashInfer's sampler only for FlashInfer < 0.2.3 (the Docker images install
0.2.1.post2; FlashInfer is no pip dependency), 0.9.0-0.9.2 for >= 0.2.3.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from kvcalc.frozen import frozen
from kvcalc.units import GIB

#: bytes per logit of the sorting sampler: bf16 + fp32 logits, sorted values + int64 indices,
#: int64 iota, cub alternate keys + values (PyTorch ``segmented_sort_pairs``, ≥ 128 rows)
SORT_BYTES_PER_LOGIT = 2 + 4 + 4 + 8 + 8 + 4 + 8
#: under 128 rows (``segmented_sort_pairs_by_full_sort``): two int2 arrays, a keys buffer, int2 alternates
SORT_FEW_ROWS_BYTES_PER_LOGIT = 2 + 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8
SORT_FEW_ROWS = 128
#: the Triton top-k/top-p kernel runs from 8 rows (``apply_top_k_top_p``, v0.17 on)
TRITON_TOPK_MIN_ROWS = 8


class SamplerKind(enum.Enum):
    FUSED = "fused"
    SORT = "sort"


@dataclass(frozen=True)
class NonTorch:
    """Non-torch memory per GPU (CUDA context growth, cuBLAS, NCCL and all-reduce buffers)."""

    one_gpu_bytes: int
    #: tensor parallelism on NVSwitch-class Hopper/Blackwell boards (NCCL NVLS buffers)
    tp_nvswitch_bytes: int
    #: tensor parallelism elsewhere (PCIe, NVL pairs, Ampere and older)
    tp_other_bytes: int
    pp_only_bytes: int

    @classmethod
    def gib(cls, one: float, tp: float, tp_other: float, pp: float) -> NonTorch:
        return cls(*(round(v * GIB) for v in (one, tp, tp_other, pp)))


@frozen
class ProfileEra:
    """How one range of vLLM releases profiles memory (constants, with the records they come from)."""

    name: str
    #: first release, (major, minor) or (major, minor, patch)
    since: tuple[int, ...]
    non_torch: NonTorch
    #: ± error measured on the era's records (see ``bench/accuracy.py``)
    band_bytes: int
    #: how much lower the engine's figure may be for memory kvcalc cannot see (0.8: other processes)
    band_low_extra_bytes: int = 0
    sources: str
    #: V0: the profile run of vLLM 0.6.4's code (:mod:`kvcalc.estimate.v0_profile`), not the
    #: two constants below
    v0_profile: bool = False
    forward_percent: int = 141
    #: the fused sampler's bytes per logit, in hundredths of a byte
    fused_centibytes_per_logit: int = 1494
    #: the Triton top-k/top-p kernel (no sort from 8 rows), whatever is installed
    triton_topk: bool = False
    #: what runs when the installation is not stated: FlashInfer's sampler (True) or the sort
    flashinfer_by_default: bool = False
    #: FlashInfer is optional in this release: the pessimistic end allows for an install without it
    flashinfer_optional: bool = False
    moe_workspace_kept: bool = True
    #: V0's profile run of a multimodal model: the largest items, the prompt not cut
    #: (:mod:`kvcalc.estimate.encoder_profile`)
    v0_multimodal_profile: bool = False

    def sampler(self, rows: int, flashinfer: bool | None) -> SamplerKind:
        """Which sampler the profile run uses (``flashinfer``: the engine option, None = unstated)."""
        if self.v0_profile:  # V0 sorts unless VLLM_USE_FLASHINFER_SAMPLER=1
            return SamplerKind.FUSED if flashinfer else SamplerKind.SORT
        if self.triton_topk:
            return SamplerKind.FUSED if rows >= TRITON_TOPK_MIN_ROWS else SamplerKind.SORT
        use = self.flashinfer_by_default if flashinfer is None else flashinfer
        return SamplerKind.FUSED if use else SamplerKind.SORT

    def centibytes_per_logit(self, kind: SamplerKind, rows: int) -> int:
        if kind is SamplerKind.FUSED:
            return self.fused_centibytes_per_logit
        return 100 * (
            SORT_FEW_ROWS_BYTES_PER_LOGIT if 1 < rows < SORT_FEW_ROWS else SORT_BYTES_PER_LOGIT
        )


_BAND = round(0.25 * GIB)
_BAND_010 = round(0.35 * GIB)
_NON_TORCH_010 = NonTorch.gib(0.02, 0.11, 0.11, 0.02)
#: what a vLLM worker holds on the GPU before its model loads (CUDA context, library handles):
#: "Initial free memory: 43.82 GiB" of 44.31 (39.88 GiB requested at 0.90) in the Llama-3.2-1B
#: dev-build record (vLLM 0.10, torch 2.7); 0.8 ran torch 2.6 (not measured there)
CUDA_CONTEXT_BYTES = round(0.49 * GIB)
_NON_TORCH_08 = NonTorch(*(CUDA_CONTEXT_BYTES + b for b in (
    _NON_TORCH_010.one_gpu_bytes, round(2.10 * GIB), _NON_TORCH_010.tp_other_bytes,
    _NON_TORCH_010.pp_only_bytes)))  # fmt: skip
#: memory other processes hold on the GPU, which 0.8.0-0.9.0 subtract and kvcalc cannot see: the
#: shortfall of vllm-17122 (4.0 GiB below the modelled terms), rounded up
OTHER_PROCESSES_BAND_BYTES = round(4.5 * GIB)
_SOURCES_010 = (
    "Llama-3.2-1B dev build (non-torch 0.02 GiB printed); Qwen2-7B TP 2 on A100-80GB (vLLM 0.10.1: "
    "0.11 GiB left after weights, activation and KV); activation terms of 0.19"
)

ERAS: tuple[ProfileEra, ...] = (
    ProfileEra(
        name="0.19", since=(0, 19), non_torch=NonTorch.gib(0.26, 2.10, 0.11, 0.07), band_bytes=_BAND,
        triton_topk=True,
        sources="H100 sweep, vLLM 0.19 (15 records): sampler 14.94 B/logit and non-torch 0.26 GiB "
        "from Llama-3.1-8B TP 1; forward 141% from its PP 4 first stage (1.10 GiB); TP non-torch "
        "2.10 GiB from Qwen2.5-72B TP 2 (2.07-2.21 GiB at TP 2 and 4, H100 SXM); PP-only 0.07 GiB; "
        "TP off NVSwitch boards: the 0.10 figure (unconfirmed for 0.19)",
    ),
    ProfileEra(name="0.17", since=(0, 17), non_torch=_NON_TORCH_010, band_bytes=_BAND, triton_topk=True,
               sources=_SOURCES_010 + "; the Triton top-k/top-p kernel of 0.17 (no record)"),
    ProfileEra(name="0.12", since=(0, 12), non_torch=_NON_TORCH_010, band_bytes=_BAND,
               sources=_SOURCES_010 + "; FlashInfer's sampler is opt-in in 0.12-0.16 (no record)"),
    ProfileEra(
        name="0.10", since=(0, 9, 1), non_torch=_NON_TORCH_010, band_bytes=_BAND_010,
        flashinfer_by_default=True, flashinfer_optional=True,
        sources=_SOURCES_010 + "; from 0.9.1 (memory_profiling from the start-up snapshot, read in "
        "the 0.9.1 and 0.9.2 wheels); FlashInfer installed in those records, not in the two gpt-oss-120b "
        "pip installs (vllm-23278, vllm-27508: the sort); band: the worst single-node record not "
        "fitted, vllm-27508 (+0.32 GiB)",
    ),
    ProfileEra(
        name="0.8", since=(0, 8), non_torch=_NON_TORCH_08, band_bytes=_BAND_010,
        band_low_extra_bytes=OTHER_PROCESSES_BAND_BYTES, flashinfer_by_default=True,
        flashinfer_optional=True,
        sources="early V1 (0.8.0-0.9.0): non-torch = everything on the GPU torch did not allocate "
        "after the profile run, so the 0.10 figures plus the CUDA context (0.49 GiB: 43.82 GiB free "
        "of 44.31 before loading in the Llama-3.2-1B dev build; TP on NVSwitch boards: 0.19's 2.10 "
        "GiB, unconfirmed for 0.8); FlashInfer's sampler as the 0.8 "
        "Docker images install it (vllm-17327 fits it, the sort does not); the pessimistic end "
        "allows 4.5 GiB of memory held by other processes, which these releases subtract: "
        "vllm-17122 is 4.0 GiB below every modelled term",
    ),
    ProfileEra(
        name="0.6", since=(0, 0), non_torch=NonTorch.gib(0.35, 0.40, 0.40, 0.35), band_bytes=round(0.5 * GIB),
        v0_profile=True, moe_workspace_kept=False, v0_multimodal_profile=True,
        sources="V0: the activation from vLLM 0.6.4's profile run (kvcalc/estimate/v0_profile.py, "
        "bench/v0_profile_replay.py), fitted on nothing: 2.9955 GiB against 2.991 printed for "
        "Llama-3.1-8B at 29,000 tokens on an RTX 3090 (vllm-10517), 1.2559 GiB against 1.26 for "
        "Meta-Llama-3-8B at 8,192 on an H100 (vLLM PR #10511); non-torch 0.35 GiB from vllm-10517",
    ),
)  # fmt: skip


def era_for(engine_version: str | None) -> ProfileEra:
    """The era of ``engine_version`` (``"0.19.0"``, a profile name, None = newest); a version
    without a patch number is its ``.0`` release (``"0.9"`` = 0.9.0, the 0.8 era)."""
    match = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", engine_version or "")
    if match is None:
        return ERAS[0]
    wanted = (int(match[1]), int(match[2]), int(match[3] or 0))
    for era in ERAS:
        if wanted >= era.since:
            return era
    return ERAS[-1]  # pragma: no cover - the last era starts at 0.0
