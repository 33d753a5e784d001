"""The CUDA-graph memory vLLM estimates before sizing the KV cache, from the graphs it captures.

vLLM 0.33 (``gpu_model_runner.profile_cudagraph_memory``; the same form in the 0.22 source) captures
the two largest descriptors of each runtime mode and reads the free device memory around each::

    estimate = max_mode(first capture) + Σ_mode (n_mode − 1) · max(second capture, 1 MiB)

The counts ``n_mode`` follow from the capture sizes (:class:`~kvcalc.estimate.captures.CudaGraphCaptures`,
computed by the engine from ``max_num_seqs``, ``cudagraph_capture_sizes``, the mode ...). The two
captures are measurements of the driver and the graph pool, so kvcalc models them by what they
scale with, with two constants measured on the records:

- **first capture** (the pool the largest graph needs, with its driver state):
  :data:`FIRST_CAPTURE_BYTES`, one figure;
- **each further graph** — with the pool shared, a smaller graph reuses the largest one's memory
  (outputs are weak references, ``compilation/cuda_graph.py``), so what it adds is the driver's copy
  of its kernel nodes, which grow with the layers: :data:`GRAPH_LAYER_BYTES` per graph and layer of
  the stage.

Both are the least-squares fit over the 24 records in ``tests/fixtures/vllm_cudagraph_estimates.yaml``
(vLLM 0.19-0.25 "Estimated CUDA graph memory" lines: the 10 of the H100 sweep in
``reference/engine_logs.yaml`` at 51 + 51 graphs, and 14 public logs at 3 to 86 graphs on L40S,
RTX 3090, 24-48 GB cards): 0.158 GiB and 0.192 MiB; residuals within ± 0.35 GiB but gpt-oss-20b
(vLLM 0.48 GiB above). The band (:data:`CUDAGRAPH_BAND_LOW_BYTES` / :data:`CUDAGRAPH_BAND_HIGH_BYTES`)
is those residuals, rounded up. Two records lie outside it and are not in the fit: Qwen2.5-72B TP 4
on four L40S (2.73 GiB, 1.3 above: custom all-reduce is off on more than two PCIe GPUs, so NCCL's
all-reduce is captured into every graph — the pessimistic end widens by
:data:`NCCL_IN_GRAPHS_BYTES` there) and Qwen3-8B on an A100-40GB with driver 535 (2.35 GiB, 1.6
above; unexplained). Unified-memory devices (GB10) print estimates from −0.87 to 0.61 GiB: vLLM
reads system memory there; not modelled.

Model runner V2 (the default from 0.29 on, ``v1/worker/gpu/cudagraph_utils.py``) captures and
measures every PIECEWISE graph and extrapolates only FULL from its two largest; the same form is
assumed for it (its records are not among the fitted ones: unconfirmed, and said in the plan).
"""

from __future__ import annotations

from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.units import GIB, MIB

#: the first capture of the mode with the larger one (the pool and driver state of the largest
#: graph): fitted, see the module doc
FIRST_CAPTURE_BYTES = round(0.158 * GIB)
#: what every further graph adds, per layer of the stage: fitted, see the module doc
GRAPH_LAYER_BYTES = round(0.192 * MIB)
#: vLLM's floor for a further graph (``max(second capture, 1 MiB)``)
MIN_GRAPH_BYTES = MIB
#: vLLM's estimate may be this much above kvcalc's (gpt-oss-20b TP 2 on H100s: 0.48 GiB) ...
CUDAGRAPH_BAND_LOW_BYTES = round(0.5 * GIB)
#: ... or this much below it (Qwen3-0.6B w4a16: 0.33 GiB)
CUDAGRAPH_BAND_HIGH_BYTES = round(0.35 * GIB)
#: NCCL's all-reduce captured into the graphs (tensor parallelism over more than two PCIe GPUs,
#: where vLLM's custom all-reduce is off): Qwen2.5-72B TP 4 on L40S estimated 1.3 GiB above
NCCL_IN_GRAPHS_BYTES = round(1.4 * GIB)

#: the capture set the H100 sweep measured (vLLM 0.19, max_num_seqs 1,024: sizes 1, 2, 4, 8-248 by
#: 8, 256-512 by 16 = 51, FULL_AND_PIECEWISE): what kvcalc assumes where no engine says
SWEEP_CAPTURES = CudaGraphCaptures(
    piecewise_graphs=51, full_graphs=51, largest_piecewise_tokens=512, largest_full_tokens=512,
    source="the capture sizes of vLLM's default at max_num_seqs >= 256",
)  # fmt: skip


def cudagraph_bytes(captures: CudaGraphCaptures, layers: int) -> int:
    """vLLM's CUDA-graph estimate for one worker holding ``layers`` layers.

    >>> c = CudaGraphCaptures(piecewise_graphs=51, full_graphs=35, largest_piecewise_tokens=512,
    ...                       largest_full_tokens=256)
    >>> round(cudagraph_bytes(c, 36) / GIB, 2)   # Qwen3-8B; vLLM printed 0.52 (LMCache #3430)
    0.73
    """
    if layers < 0:
        raise ValueError(f"layers must be non-negative, got {layers}")
    if captures.total_graphs == 0:
        return 0
    per_graph = max(GRAPH_LAYER_BYTES * layers, MIN_GRAPH_BYTES)
    return FIRST_CAPTURE_BYTES + captures.further_graphs * per_graph


def describe(captures: CudaGraphCaptures, layers: int) -> str:
    """The plan's note on the term."""
    further = captures.further_graphs
    total = cudagraph_bytes(captures, layers)
    modes = " + ".join(
        f"{n} {name} (largest {t:,})"
        for name, n, t in (("PIECEWISE", captures.piecewise_graphs, captures.largest_piecewise_tokens),
                           ("FULL", captures.full_graphs, captures.largest_full_tokens))
        if n
    )  # fmt: skip
    return (
        f"CUDA graphs {total / GIB:.2f} GiB: {modes} graphs"
        + (f", {captures.source}" if captures.source else "")
        + f"; first capture {FIRST_CAPTURE_BYTES / GIB:.2f} GiB + {further} more × "
        f"{GRAPH_LAYER_BYTES / MIB:.3f} MiB × {layers} layers (fitted on vLLM's own estimates)"
        + (
            "; model runner V2 measures every PIECEWISE graph where V1 extrapolates from two: "
            "the constants come from V1-era logs (0.19-0.25), unconfirmed for V2"
            if captures.runner_v2
            else ""
        )
    )
