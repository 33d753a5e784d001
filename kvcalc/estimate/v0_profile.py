"""vLLM V0's profile run of a text model: the peak of what torch allocates, from vLLM 0.6.4's code.

V0 (every release before 0.8, and the V0 engine of 0.8-0.9) profiles with ``max_num_seqs`` (R)
dummy prompts sharing ``max_num_batched_tokens`` (T) tokens, each sampled once with top-k and
top-p set (``model_runner.py`` ``profile_run``), and reads ``torch.cuda.max_memory_allocated``:
torch's allocated bytes in the caching allocator's 512 B blocks. ``bench/v0_profile_replay.py``
replays that run op by op (0.6.4, Llama and Qwen2 on one GPU); :func:`v0_profile` is the same
arithmetic in closed form, tested equal to the replay for every case it records. With ``b(n)``
= n rounded up to 512 B and ``h = b(T · H · 2)``:

- **Held throughout**: the int64 tokens, positions and slot mapping (``3 · b(8T)``), the
  FlashAttention and sampling metadata per prompt, and the cuBLAS workspace PyTorch 2.4/2.5
  allocates through the caching allocator at the first matmul and keeps (``CublasHandlePool.cpp``:
  32 MiB on sm90, ``4096 · 1024 · 2 + 16 · 1024 · 8`` B = 8.125 MiB elsewhere).
- **Forward**: each decoder layer's input stays referenced by the model's loop while the layer
  runs, so from the second layer on the residual, that input and the attention output are live
  (``3h``) beside the MLP's tensors. ``models/llama.py``'s ``LlamaMLP`` rebinds ``x = act_fn(x)``,
  freeing ``gate_up`` before ``down_proj``: ``3h + b(T·2I·2) + b(T·I·2)``; ``Qwen2MLP`` and most
  other V0 modules keep ``gate_up`` to the end: ``4h + b(T·2I·2) + b(T·I·2)``. The attention moment
  (``2h`` + qkv + output + FlashAttention's fp32 log-sum-exp, or + ``o_proj``'s output) is smaller
  for these models but counted.
- **Sampler** (last PP stage): the forward's hidden states ``h``, the bf16 logits
  ``b(R · V₆₄ · 2)`` (vocabulary padded to 64) that ``execute_model`` holds, the sampling tensors,
  the fp32 copy ``b(4RV)``, then ``torch.sort``'s values ``b(4RV)`` and int64 indices ``b(8RV)`` with
  PyTorch's scratch (``SortStable.cu``): ≥ 128 rows an int64 iota ``b(8RV)`` and cub's alternate
  keys and values ``b(4RV + 8RV)``; 2-127 rows two int2 arrays ``2 · b(8RV)``, a keys buffer
  ``b(4RV)`` and cub's alternates; one row an iota of that row and cub's alternates. That moment
  (38 B per logit from 128 rows, 50 B under) is the sampler's peak: after the sort the top-k/top-p
  masks and the scatter hold 32 B, sampling 22 B. With ``VLLM_USE_FLASHINFER_SAMPLER=1`` there is
  no sort: the fp32 logits, probabilities, log-probabilities and the gathered copy FlashInfer
  samples from, 18 B per logit.
- **Peak** = max(forward, sampler).

Worked examples: Llama-3.1-8B, T = 29,000, R = 256 on an RTX 3090 (vllm-10517): forward 3h +
b(29,000 · 28,672 · 2) + b(29,000 · 14,336 · 2) = 29,000 · 2 · 55,296 = 3,207,168,000 B + 8,519,680
(workspace) + 697,344 (inputs) + 8,192 (metadata) = 3,216,393,216 B = 2.9955 GiB; the log prints
17.98 GiB peak − 14.9888 GiB weights = 2.991 ± 0.005. Meta-Llama-3-8B, T = 8,192, R = 256 on an
H100 (PR #10511): the sampler, 256 · 128,256 logits × 38 B + h (64 MiB) + the 32 MiB workspace +
the inputs = 1,348,546,560 B = 1.2559 GiB; printed "PyTorch activation peak memory 1.26GiB".

Not derived here (the widths fall back to :func:`~kvcalc.estimate.activation.live_width_per_token`
plus the layer input V0's loop keeps, and :attr:`V0Profile.replayed` is False): MoE, MLA, Mamba
and other mixers; tensor parallelism is the per-rank widths (the all-reduce is pynccl's in-place
one at profile sizes, and the driver rank gathers the logits and samples the whole vocabulary) and
is not replayed. Not modelled: a block the allocator does not split (a request within 1 MiB of a
free block's size takes the whole block: at most ~1 MiB per live tensor), cuBLASLt's transient
1 MiB workspace for a matmul with bias, cub's radix-sort lookback tables (well under 1 B per
logit). Releases up to 0.6.3 read the free memory after the profile instead (reserved segments
and non-torch memory, ``worker.py``): this peak is a lower bound there.
"""

from __future__ import annotations

from kvcalc.estimate.activation import ACT_BYTES, live_width_per_token
from kvcalc.frozen import frozen
from kvcalc.hfconfig.weight_shape import WeightShape
from kvcalc.units import GIB, cdiv

#: the CUDA caching allocator's block: every allocation is counted rounded up to it
BLOCK_BYTES = 512
#: PyTorch's cuBLAS workspace (torch 2.4 and 2.5; ``CUBLAS_WORKSPACE_CONFIG`` ``:4096:2:16:8``)
CUBLAS_WORKSPACE_BYTES = 4096 * 1024 * 2 + 16 * 1024 * 8
#: ... on sm90 (compute capability 9.0)
CUBLAS_WORKSPACE_SM90_BYTES = 4096 * 8 * 1024
#: ``torch.sort`` sorts rows up to this long in place, without scratch (``should_use_small_sort``)
SMALL_SORT_VALUES = 4096
#: PyTorch's segmented sort from this many rows (fewer: the full-sort variant)
SEGMENTED_SORT_ROWS = 128
VOCAB_PADDING = 64
#: architectures vLLM runs with ``models/llama.py`` (its registry; Phi-3 and DeciLM subclass it),
#: whose ``LlamaMLP`` frees ``gate_up`` before ``down_proj``
LLAMA_MLP_ARCHITECTURES = frozenset({
    "LlamaForCausalLM", "LLaMAForCausalLM", "MistralForCausalLM", "AquilaForCausalLM", "AquilaModel",
    "InternLMForCausalLM", "Phi3ForCausalLM", "DeciLMForCausalLM",
})  # fmt: skip
#: architectures whose V0 module ``bench/v0_profile_replay.py`` replays
REPLAYED_ARCHITECTURES = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"})


def _b(n: int) -> int:
    return cdiv(n, BLOCK_BYTES) * BLOCK_BYTES


def _cub(*item_bytes: int) -> int:
    """cub's temporary storage: the 256-B-aligned alternate buffers in one allocation."""
    return _b(sum(cdiv(n, 256) * 256 for n in item_bytes))


@frozen
class V0Profile:
    """One GPU's profile run: the forward's and the sampler's peaks (each with what is held)."""

    forward_bytes: int
    sampler_bytes: int
    #: held in both: the tokens, positions, slot mapping, per-prompt metadata, cuBLAS workspace
    held_bytes: int
    #: the forward's peak per token beyond the held bytes, in activation values
    width: int
    #: the sampler's peak moment per logit, in hundredths of a byte (38 B from 128 rows)
    centibytes_per_logit: int
    #: the shapes ``bench/v0_profile_replay.py`` replays (dense attention and MLP, one GPU)
    replayed: bool

    @property
    def peak_bytes(self) -> int:
        return max(self.forward_bytes, self.sampler_bytes)

    def note(self, tokens: int, rows: int, vocab: int) -> str:
        return (
            f"activation (V0, vLLM 0.6.4's profile run): max(forward {self.forward_bytes / GIB:.2f} GiB, "
            f"sampler {self.sampler_bytes / GIB:.2f} GiB); forward {tokens:,} tokens × {ACT_BYTES} B × "
            f"{self.width:,} values, sampler {rows:,} rows × {vocab:,} logits × "
            f"{self.centibytes_per_logit / 100:.2f} B + the hidden states, each + the inputs and "
            f"cuBLAS workspace ({self.held_bytes / GIB:.2f} GiB)"
            + ("" if self.replayed else "; the forward's shapes generalized, not replayed")
        )


def v0_profile(
    w: WeightShape,
    *,
    architectures: tuple[str, ...],
    tokens: int,
    rows: int,
    tp: int = 1,
    sm90: bool = True,
    last_stage: bool = True,
    flashinfer: bool = False,
) -> V0Profile:
    """vLLM V0's profile-run peak on one GPU (see the module doc); ``rows`` = the dummy prompts,
    ``min(max_num_seqs, max_num_batched_tokens)``; ``sm90``: the GPU's compute capability is 9.0
    (the larger cuBLAS workspace); ``flashinfer``: ``VLLM_USE_FLASHINFER_SAMPLER=1``."""
    T, R, h = tokens, rows, _b(tokens * w.hidden_size * ACT_BYTES)
    held = (
        3 * _b(8 * T)  # int64 input tokens, positions, slot mapping
        + 2 * _b(4 * R) + 2 * _b(4 * (R + 1))  # context and sequence lengths, query and sequence starts
        + _b(8 * R) + _b(4 * R)  # selected token indices, the random-sampling indices
        + (CUBLAS_WORKSPACE_SM90_BYTES if sm90 else CUBLAS_WORKSPACE_BYTES)
    )  # fmt: skip
    dense = set(w.ffns) == {"dense"} and set(w.mixers) == {"attention"}
    replayed = dense and tp == 1 and bool(set(architectures) & REPLAYED_ARCHITECTURES)
    if dense and w.mlp and w.attention:
        a, inter = w.attention, cdiv(w.mlp.intermediate_size, tp)
        q = cdiv(a.num_heads, tp) * a.head_dim
        kv = max(1, a.num_kv_heads // tp) * a.head_dim
        lse = _b(4 * cdiv(a.num_heads, tp) * T) + _b(16)
        attention = 2 * h + _b(T * (q + 2 * kv) * ACT_BYTES) + _b(T * q * ACT_BYTES) + max(lse, h)
        gate_up, act = _b(T * 2 * inter * ACT_BYTES), _b(T * inter * ACT_BYTES)
        if set(architectures) & LLAMA_MLP_ARCHITECTURES:
            mlp = 3 * h + max(gate_up + act, act + h)
        else:
            mlp = 4 * h + gate_up + act
        layer = max(attention, mlp)
    else:
        layer = T * ACT_BYTES * (live_width_per_token(w, tp) + w.hidden_size)
    width = cdiv(layer, T * ACT_BYTES)
    sampler, per_logit = 0, 0
    if last_stage:
        rv, vocab = R * w.vocab_size, cdiv(w.vocab_size, VOCAB_PADDING) * VOCAB_PADDING
        tensors = 6 * _b(ACT_BYTES * R) + _b(4 * R)  # SamplingTensors in the logits' dtype, top-k
        start = held + h + _b(R * vocab * ACT_BYTES) + tensors + _b(4 * rv)  # + the fp32 copy
        if flashinfer:  # probs, logprobs, the gathered copy; int64 indices, top-k/p rows,
            # 32 fp32 uniforms per row, the int32 tokens and bool success flags
            rows_bytes = (8 * R, 4 * R, 2 * R, 4 * 32 * R, 4 * R, R)
            moment = 3 * _b(4 * rv) + sum(_b(n) for n in rows_bytes)
        else:
            moment = _b(4 * rv) + _b(8 * rv) + _sort_scratch(R, w.vocab_size)
        sampler = start + moment
        per_logit = cdiv(100 * (sampler - held - h), rv)
    return V0Profile(forward_bytes=held + layer, sampler_bytes=sampler, held_bytes=held,
                     width=width, centibytes_per_logit=per_logit, replayed=replayed)  # fmt: skip


def _sort_scratch(rows: int, n: int) -> int:
    """What ``torch.sort`` of a ``rows × n`` fp32 matrix allocates beside its outputs (PyTorch 2.5)."""
    numel = rows * n
    if n <= SMALL_SORT_VALUES:
        return 0
    if rows == 1:  # segmented_sort_large_segments: an iota of the row, cub's alternates
        return _b(8 * n) + _cub(4 * n, 8 * n)
    if rows < SEGMENTED_SORT_ROWS:  # by_full_sort: two int2 arrays, keys out, cub's alternates
        return 2 * _b(8 * numel) + _b(4 * numel) + _cub(4 * numel, 8 * numel)
    return _b(8 * numel) + _cub(4 * numel, 8 * numel)  # segmented_sort_pairs
