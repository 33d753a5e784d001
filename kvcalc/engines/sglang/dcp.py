"""SGLang 0.5.23's decode context parallelism (``--dcp-size``) as it reaches the pool.

DCP reuses the TP ranks: the DCP group of ``dcp`` ranks shares one request's tokens, each rank
storing every ``dcp``-th token of its MLA latent (``runtime_context.derive_parallel_widths``:
``attn_dcp_size``). Read in SGLang 0.5.23 and recorded with its own sizing code
(tests/fixtures/sglang_0_5_23/dcp_pool.json):

- the cell per token does not change: MLA's latent is TP-independent, and each rank's pool holds
  ``max_total_num_tokens = rest // cell`` rows of it (DeepSeek-V3 TP 8 at 20 GiB: 70,272 B,
  305,595 rows, as without DCP);
- the allocator widens those rows into ``rows × dcp`` logical tokens
  (``KVCacheConfigurator.logical_token_capacity``; its page is ``page_size × dcp``), which the
  scheduler reports as ``max_total_num_tokens`` and requests fill (``logical_max_total_num_tokens``);
  ``max_running_requests`` is still estimated from the rows (``resolve_max_num_reqs``);
- prefill CUDA graphs are off under DCP (``cuda_graph_hook.py``: "decode context parallel"), so the
  default ``mem_fraction_static`` keeps no prefill-graph reserve (0.818 instead of 0.799 for
  DeepSeek-V3 at TP 8 on an H100).

On Hopper SGLang resolves its default ``fa3`` backend under DCP and starts; its MLA decode returns
the log-sum-exp the cross-rank merge needs (``flashattention_backend.forward_decode``
``return_lse``). **Unconfirmed**: serving on a GPU (not run). **Not modelled** (refused by name):
MHA models (SGLang's MHA DCP shards heads over ``tp // dcp`` and runs only in the architectures
that implement it), DSA (its indexer stays replicated, priced × dcp), sliding-window and Mamba
hybrids, speculative decoding, DP attention, pipeline parallelism, HiCache beside DCP.
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.errors import InputError
from kvcalc.model.layouts import LayerKind

CODE = "unsupported-parallelism"


def check(request: EngineRequest, profile: str, notes: list[str]) -> int:
    """The DCP size SGLang runs (1: off), after SGLang's refusals and kvcalc's; a note says how
    the pool is shared."""
    from kvcalc.engines.sglang import layers, mamba

    dcp = request.decode_context_parallel_size
    if dcp == 1:
        return 1
    tp, model = request.tensor_parallel_size, request.model
    if profile != "latest":
        raise InputError(f"SGLang {profile}: --dcp-size is modelled for SGLang 0.5.23 only",
                         hint="plan it with --engine-version latest", code=CODE)  # fmt: skip
    what = None
    if tp % dcp:  # SGLang starts, with DCP groups of unequal sizes (parallel_state.py)
        what = (f"--tp {tp} it does not divide (SGLang cuts each TP group into DCP groups of "
                f"{dcp} ranks and a smaller last one, unchecked)")  # fmt: skip
    elif not model.is_mla:
        what = ("an MHA model (SGLang shards its KV heads over tp // dcp, in the architectures "
                "whose attention implements DCP; not recorded)")  # fmt: skip
    elif layers.is_dsa(model):
        what = "a DSA model (the indexer cache stays replicated on every DCP rank; not recorded)"
    elif mamba.is_hybrid(model) or any(x.kind is LayerKind.SLIDING for x in model.layers):
        what = "a hybrid (Mamba or sliding-window) model"
    elif request.speculative is not None:
        what = "speculative decoding (the draft pool spans the widened token space)"
    elif request.attention_data_parallel_size > 1:
        what = "DP attention"
    elif request.pipeline_parallel_size > 1:
        what = "pipeline parallelism"
    elif request.extra.get("enable_hierarchical_cache"):
        what = "HiCache (the host pool's DCP index translation)"
    if what is not None:
        raise InputError(f"SGLang --dcp-size {dcp} with {what} is not modelled",
                         hint="plan it without --dcp-size", code=CODE)  # fmt: skip
    notes.append(f"decode context parallelism: each of the {dcp} DCP ranks keeps every {dcp}th "
                 f"token of a request's MLA latent; the pool's rows × {dcp} logical tokens "
                 "(KVCacheConfigurator.logical_token_capacity), max_running_requests from the "
                 "rows; prefill CUDA graphs off (their reserve is not kept)")  # fmt: skip
    return dcp
