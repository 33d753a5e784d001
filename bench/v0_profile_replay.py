"""Replay vLLM 0.6.4's V0 profile run of a text model (Llama, Qwen2) on the meta device and measure
the peak of the bytes torch holds (a stand-in for ``torch.cuda.max_memory_allocated``).

Run from the repo root (needs torch): ``python bench/v0_profile_replay.py [--write]``; ``--write``
records the results in ``tests/fixtures/v0_profile_replay.json``, against which
``tests/test_v0_profile.py`` checks :mod:`kvcalc.estimate.v0_profile`.

What runs is the allocation sequence of 0.6.4's code, op for op, on one GPU:

- ``worker/model_runner.py`` ``profile_run``: ``max_num_seqs`` dummy prompts sharing
  ``max_num_batched_tokens`` tokens, each sampled with ``SamplingParams(top_p=0.99,
  top_k=vocab_size - 1)``; ``prepare_model_input`` (int64 tokens, positions and slot mapping per
  token; the FlashAttention metadata and the sampling indices per prompt); ``execute_model`` keeps
  the forward's hidden states and the bf16 logits while the sampler runs;
- ``models/llama.py`` / ``models/qwen2.py``: the decoder loop (each layer's input stays referenced
  by the caller while the layer runs), ``LlamaMLP`` (``x = self.act_fn(x)`` frees ``gate_up``
  before ``down_proj``) against ``Qwen2MLP`` (``gate_up`` kept to the end);
  ``layers/layernorm.py`` ``RMSNorm.forward_cuda`` (``empty_like`` in the first layer, then
  ``fused_add_rms_norm`` in place); ``SiluAndMul.forward_cuda`` (one output); the rotary embedding
  in place (``ops.rotary_embedding``); ``attention/backends/flash_attn.py``
  ``unified_flash_attention``: ``flash_attn_varlen_func`` (vllm-flash-attn 2.6: the output, the
  fp32 ``softmax_lse`` of heads × tokens and the RNG state, the last two freed on return);
- ``layers/logits_processor.py``: ``index_select`` of the sampled rows, the lm_head matmul
  (the vocabulary padded to 64);
- ``layers/sampler.py`` ``Sampler.forward``: ``SamplingTensors`` in the logits' dtype, the fp32
  copy, ``_apply_top_k_top_p`` (a full sort of the fp32 logits, the top-k and top-p masks, the
  scatter back), ``softmax`` and ``log_softmax``, ``_multinomial`` on a gathered copy of the
  probabilities (``VLLM_USE_FLASHINFER_SAMPLER=1``: FlashInfer's sampling on that copy instead,
  no sort). No logprobs are asked, so ``get_logprobs`` allocates nothing.

Inside kernels, what PyTorch 2.5.1 (vLLM 0.6.4's torch) allocates through the caching allocator:
``torch.sort`` over more than 4,096 values (``Sort.cpp``, ``SortStable.cu``) holds an int64 iota and
cub's alternate keys and values (≥ 128 rows, ``segmented_sort_pairs``), two int2 index/segment
arrays, a keys buffer and cub's alternates (2-127 rows, ``segmented_sort_pairs_by_full_sort``), or
an int64 iota of one row and cub's alternates (one row, ``segmented_sort_large_segments``); the
first cuBLAS call allocates the handle's workspace (``CublasHandlePool.cpp``: 32 MiB on sm90,
``4096 · 1024 · 2 + 16 · 1024 · 8`` B elsewhere) and keeps it. Every storage is counted rounded up to
the allocator's 512 B blocks. Weights are made outside the counter: the profile's figure is the
peak minus what was allocated before it. Three decoder layers are replayed (from the second on,
each layer repeats the same moment).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vl_profile_replay import LiveBytes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "v0_profile_replay.json"
D, BF, LONG, INT = "meta", torch.bfloat16, torch.long, torch.int32
BLOCK = 512
SMALL_SORT = 4096
CUBLAS_WORKSPACE = {"sm90": 4096 * 8 * 1024, "other": 4096 * 1024 * 2 + 16 * 1024 * 8}


def empty(*shape, dtype=BF):
    return torch.empty(*shape, dtype=dtype, device=D)


def cub_temp(*item_bytes):
    """cub's temporary storage: one allocation of the 256-B-aligned alternate buffers."""
    return empty(sum(-(-n // 256) * 256 for n in item_bytes), dtype=torch.uint8)


def sort(x):
    """``torch.sort(x, dim=-1)`` of a contiguous fp32 matrix, with the scratch PyTorch allocates."""
    rows, n = x.shape
    values, indices = torch.empty_like(x), empty(rows, n, dtype=LONG)
    if n > SMALL_SORT:
        numel = rows * n
        if rows == 1:  # segmented_sort_large_segments: an iota, radix_sort_pairs per row
            iota = empty(n, dtype=LONG)
            temp = cub_temp(n * 4, n * 8)
            del temp, iota
        elif rows < 128:  # segmented_sort_pairs_by_full_sort
            i_s, i_s2 = empty(numel, 2, dtype=INT), empty(numel, 2, dtype=INT)
            keys_out = empty(numel, dtype=torch.float32)  # radix_sort_pairs(keys_out=nullptr)
            temp = cub_temp(numel * 4, numel * 8)
            del temp, keys_out
            temp = cub_temp(numel * 8)  # radix_sort_keys on the int64 (segment, index) pairs
            del temp, i_s, i_s2
        else:  # segmented_sort_pairs: a reverse-index iota, cub's segmented radix sort
            iota = empty(numel, dtype=LONG)
            temp = cub_temp(numel * 4, numel * 8)
            del temp, iota
    return values, indices


class Model:
    """``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` of 0.6.4 on one GPU, weights outside the count."""

    def __init__(self, c):
        self.c = c
        h, i, qh, kvh, hd = c["hidden"], c["inter"], c["heads"], c["kv_heads"], c["head_dim"]
        self.dims = qh, kvh, hd
        bias = c["family"] == "qwen2"
        vocab_padded = -(-c["vocab"] // 64) * 64  # VocabParallelEmbedding pads to 64
        self.embed = empty(vocab_padded, h)
        self.lm_head = self.embed if c["tied"] else empty(vocab_padded, h)
        self.layers = [dict(qkv=empty((qh + 2 * kvh) * hd, h), qkv_b=empty((qh + 2 * kvh) * hd) if bias else None,
                            o=empty(h, qh * hd), gu=empty(2 * i, h), d=empty(h, i))
                       for _ in range(c["layers"])]  # fmt: skip
        self.workspace = None

    def linear(self, x, w, b=None):
        if self.workspace is None:  # the handle's workspace, kept (getCurrentCUDABlasHandle)
            self.workspace = empty(CUBLAS_WORKSPACE[self.c["arch"]], dtype=torch.uint8)
        return F.linear(x, w, b)

    def flash_attn(self, q, k, v):
        qh, _, hd = self.dims
        tokens = q.shape[0]
        out = empty(tokens, qh, hd)  # mha_varlen_fwd: out, softmax_lse, rng_state
        lse = empty(qh, tokens, dtype=torch.float32)
        rng = empty(2, dtype=LONG)
        del lse, rng
        return out.view(tokens, qh * hd)

    def self_attn(self, L, positions, hidden_states):
        qh, kvh, hd = self.dims
        qkv = self.linear(hidden_states, L["qkv"], L["qkv_b"])
        q, k, v = qkv.split([qh * hd, kvh * hd, kvh * hd], dim=-1)
        # ops.rotary_embedding(positions, q, k, ...): in place
        attn_output = self.flash_attn(q, k, v)
        return self.linear(attn_output, L["o"])

    def mlp(self, L, x):
        if self.c["family"] == "llama":  # LlamaMLP: x, _ = gate_up_proj(x); x = act_fn(x)
            x = self.linear(x, L["gu"])
            x = self.silu_and_mul(x)
            return self.linear(x, L["d"])
        gate_up = self.linear(x, L["gu"])  # Qwen2MLP: gate_up kept until it returns
        x = self.silu_and_mul(gate_up)
        return self.linear(x, L["d"])

    @staticmethod
    def silu_and_mul(x):
        return empty(x.shape[0], x.shape[1] // 2)

    def layer(self, L, positions, hidden_states_in, residual_in):
        if residual_in is None:
            residual = hidden_states_in
            hidden_states = torch.empty_like(hidden_states_in)  # rms_norm(out, x)
        else:
            hidden_states, residual = hidden_states_in, residual_in  # fused_add_rms_norm
        hidden_states = self.self_attn(L, positions, hidden_states)
        # post_attention_layernorm: fused_add_rms_norm(hidden_states, residual), in place
        hidden_states = self.mlp(L, hidden_states)
        return hidden_states, residual

    def forward(self, input_ids, positions):
        hidden_states = F.embedding(input_ids, self.embed)
        residual = None
        for L in self.layers:
            hidden_states, residual = self.layer(L, positions, hidden_states, residual)
        return hidden_states  # the final norm: fused_add_rms_norm, in place

    def compute_logits(self, hidden_states, selected):
        pruned = hidden_states.index_select(0, selected)
        logits = F.linear(pruned, self.lm_head)
        return logits[..., : self.c["vocab"]]


def apply_top_k_top_p(logits, p, k):
    logits_sort, logits_idx = sort(logits)
    top_k_mask = logits_sort.size(1) - k.to(torch.long)
    top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
    top_k_mask = logits_sort < top_k_mask
    logits_sort.masked_fill_(top_k_mask, -float("inf"))
    probs_sort = logits_sort.softmax(dim=-1)
    probs_sum = probs_sort.cumsum(dim=-1)
    top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
    top_p_mask[:, -1] = False
    logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return torch.empty_like(logits_sort).scatter_(dim=-1, index=logits_idx, src=logits_sort)


def sample(logits_in, sample_indices, rows, flashinfer):
    """``Sampler.forward`` of 0.6.4 for prompts with top-k and top-p set, no logprobs."""
    st = {name: empty(rows, dtype=logits_in.dtype) for name in (
        "temperatures", "top_ps", "min_ps", "presence", "frequency", "repetition")}  # fmt: skip
    st["top_ks"] = empty(rows, dtype=INT)
    st["tokens"] = empty(0, dtype=LONG)  # prompt/output tokens: no penalties
    logits = logits_in.to(torch.float)
    logits.div_(st["temperatures"].unsqueeze(dim=1))
    if not flashinfer:
        logits = apply_top_k_top_p(logits, st["top_ps"], st["top_ks"])
    probs = torch.softmax(logits, dim=-1, dtype=torch.float)
    logprobs = torch.log_softmax(logits, dim=-1, dtype=torch.float)
    long_sample_indices = sample_indices.long()
    picked = probs[long_sample_indices]
    if flashinfer:  # _top_k_top_p_multinomial_with_flashinfer
        ks, ps = st["top_ks"][long_sample_indices], st["top_ps"][long_sample_indices]
        uniform = empty(32, rows, dtype=torch.float32)
        out = (empty(rows, dtype=INT), empty(rows, dtype=torch.bool))
        del ks, ps, uniform, out
    else:  # _multinomial
        q = torch.empty_like(picked)
        q.exponential_()
        tokens = picked.div_(q).argmax(dim=1).view(-1, 1)
        del q, tokens
    del picked, probs, logprobs, logits, st


def profile(c):
    """(forward peak, sampler peak, peak) in bytes above what was allocated before the run."""
    model, m = Model(c), LiveBytes(block_bytes=BLOCK)
    tokens, rows = c["tokens"], c["seqs"]
    with m:
        input_tokens, input_positions = empty(tokens, dtype=LONG), empty(tokens, dtype=LONG)
        attn = [empty(rows, dtype=INT), empty(rows, dtype=INT), empty(tokens, dtype=LONG),
                empty(rows + 1, dtype=INT), empty(rows + 1, dtype=INT), empty(rows, 0, dtype=INT)]  # fmt: skip
        selected, random_indices = empty(rows, dtype=LONG), empty(rows, dtype=INT)
        kv_caches = [empty(0, dtype=torch.float32) for _ in model.layers]
        hidden = model.forward(input_tokens, input_positions)
        forward_peak = m.peak
        m.peak = m.live
        logits = model.compute_logits(hidden, selected)
        sample(logits, random_indices, rows, c["flashinfer"])
        sampler_peak = m.peak
        del logits, hidden, attn, kv_caches
    return forward_peak, sampler_peak


CONFIGS = {
    "meta-llama/Llama-3.1-8B": dict(family="llama", hidden=4096, inter=14336, heads=32, kv_heads=8,
                                    head_dim=128, vocab=128256, tied=False),
    "Qwen/Qwen2.5-7B": dict(family="qwen2", hidden=3584, inter=18944, heads=28, kv_heads=4, head_dim=128,
                            vocab=152064, tied=False),
    "Qwen/Qwen2.5-1.5B": dict(family="qwen2", hidden=1536, inter=8960, heads=12, kv_heads=2, head_dim=128,
                              vocab=151936, tied=True),
}  # fmt: skip

#: (model, max_num_batched_tokens, max_num_seqs, GPU class, FlashInfer sampler, what it is)
CASES = (
    ("meta-llama/Llama-3.1-8B", 29000, 256, "other", False, "vllm-10517 (RTX 3090, max_model_len 29,000)"),
    ("meta-llama/Llama-3.1-8B", 8192, 256, "sm90", False, "vLLM PR #10511 (H100, Meta-Llama-3-8B)"),
    ("meta-llama/Llama-3.1-8B", 2048, 256, "sm90", False, "sampler-bound"),
    ("meta-llama/Llama-3.1-8B", 16384, 512, "sm90", False, "more rows"),
    ("meta-llama/Llama-3.1-8B", 8192, 64, "other", False, "under 128 rows: the full-sort variant"),
    ("meta-llama/Llama-3.1-8B", 4096, 1, "other", False, "one row"),
    ("meta-llama/Llama-3.1-8B", 8192, 256, "sm90", True, "VLLM_USE_FLASHINFER_SAMPLER=1"),
    ("Qwen/Qwen2.5-7B", 8192, 256, "sm90", False, "Qwen2: gate_up kept"),
    ("Qwen/Qwen2.5-7B", 32768, 256, "other", False, "Qwen2, forward-bound"),
    ("Qwen/Qwen2.5-1.5B", 4096, 128, "other", False, "small hidden, tied embeddings"),
)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    cases = []
    for name, tokens, seqs, arch, flashinfer, what in CASES:
        c = dict(
            CONFIGS[name], tokens=tokens, seqs=seqs, arch=arch, flashinfer=flashinfer, layers=3
        )
        forward, sampler = profile(c)
        cases.append({"config": name, "max_num_batched_tokens": tokens, "max_num_seqs": seqs,
                      "sm90": arch == "sm90", "flashinfer_sampler": flashinfer, "case": what,
                      "forward_peak_bytes": forward, "sampler_peak_bytes": sampler,
                      "peak_bytes": max(forward, sampler)})  # fmt: skip
        print(
            f"{name} T={tokens} R={seqs} {arch}{' flashinfer' if flashinfer else ''}: forward "
            f"{forward / 2**30:.4f} GiB, sampler {sampler / 2**30:.4f} GiB ({what})"
        )
    if args.write:
        OUT.write_text(json.dumps({
            "source": "bench/v0_profile_replay.py: vLLM 0.6.4's V0 profile run (forward, logits, "
            "sampler) replayed on the meta device, 512 B blocks (torch " + torch.__version__ + ")",
            "cases": cases}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
