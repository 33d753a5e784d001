"""The widths an engine's compute graph is built from, beyond the cache layout. Plain numbers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class GraphDims:
    #: the architecture whose graph these feed (a GGUF ``general.architecture``)
    arch: str
    n_embd: int
    #: the dense MLP's width (``feed_forward_length``); 0 when the layers are all experts
    n_ff: int
    n_vocab: int
    n_expert: int = 0
    n_expert_used: int = 0
    #: one expert's MLP width (``expert_feed_forward_length``)
    n_ff_exp: int = 0
    #: the shared experts' width (``expert_shared_feed_forward_length``; 0: the loader's default)
    n_ff_shexp: int = 0
    #: shared-expert tensors present (``blk.N.ffn_up_shexp.weight``)
    shared_expert: bool = False
    #: separate Q, K and V biases (``blk.N.attn_q.bias`` ...): one more ``add`` per projection
    qkv_bias: bool = False
    #: final logit soft-capping written in the file (``{arch}.final_logit_softcapping``, Gemma-3)
    final_logit_softcap: bool = False
    #: tensors present that add graph nodes kvcalc does not rebuild (a fused ``attn_qkv``, an
    #: output-projection, MLP or ``output`` bias): the compute buffer is then not modelled
    unmodelled_tensors: tuple[str, ...] = ()
