"""Which CUDA graphs a vLLM worker captures: the descriptor counts its memory estimate multiplies.

vLLM (``gpu_model_runner.profile_cudagraph_memory``) captures the two largest descriptors of each
runtime mode, takes the first capture as the pool the mode needs and the second as what every
further graph adds, and multiplies by the descriptor count. The counts and largest sizes come from
the engine's capture sizes (``kvcalc.engines.vllm``); this record carries them as plain numbers to
the memory estimate (:mod:`kvcalc.estimate.cudagraph`).
"""

from __future__ import annotations

from kvcalc.frozen import frozen


@frozen
class CudaGraphCaptures:
    """The graphs one worker captures, per runtime mode (0: the mode is not captured)."""

    #: PIECEWISE descriptors (mixed prefill-decode batches), one per capture size
    piecewise_graphs: int = 0
    #: FULL descriptors (uniform decode batches, or every size in FULL mode)
    full_graphs: int = 0
    #: the largest PIECEWISE descriptor's tokens
    largest_piecewise_tokens: int = 0
    #: the largest FULL descriptor's tokens
    largest_full_tokens: int = 0
    #: how the counts were found, for the plan's note (e.g. "FULL_AND_PIECEWISE, sizes 1-512")
    source: str = ""
    #: vLLM's model runner V2 captures them (the default from 0.29 on). Its estimate
    #: (``v1/worker/gpu/cudagraph_utils.py``) captures every PIECEWISE graph and measures them,
    #: extrapolating only FULL from the two largest; before 0.29 it returns 0. Runner V1's
    #: (``gpu_model_runner.py``) samples the two largest of each mode.
    runner_v2: bool = False
    #: vLLM estimates their memory before sizing the cache (False: model runner V2 before 0.29,
    #: whose ``profile_cudagraph_memory`` returns 0 — the graphs are captured after, unbudgeted)
    estimated: bool = True

    def __post_init__(self) -> None:
        for name in ("piecewise_graphs", "full_graphs", "largest_piecewise_tokens",
                     "largest_full_tokens"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if (self.piecewise_graphs > 0) != (self.largest_piecewise_tokens > 0):
            raise ValueError("piecewise_graphs and largest_piecewise_tokens go together")
        if (self.full_graphs > 0) != (self.largest_full_tokens > 0):
            raise ValueError("full_graphs and largest_full_tokens go together")

    @property
    def total_graphs(self) -> int:
        return self.piecewise_graphs + self.full_graphs

    @property
    def further_graphs(self) -> int:
        """The graphs after each mode's first (vLLM's ``n − 1`` per mode)."""
        return max(self.piecewise_graphs - 1, 0) + max(self.full_graphs - 1, 0)
