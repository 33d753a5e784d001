"""The widths an engine's compute graph is built from, beyond the cache layout. Plain numbers."""

from __future__ import annotations

from kvcalc.frozen import frozen


@frozen
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
    #: routed-expert options as llama.cpp reads them (``deepseek2``): ``expert_gating_func`` (its
    #: enum: 0 unset, 1 softmax, 2 sigmoid, 3 softmax over the chosen), ``expert_weights_norm``,
    #: ``expert_weights_scale``, a selection bias (``blk.N.exp_probs_b.bias``), ``expert_group_count`` and
    #: ``expert_group_used_count``
    expert_gating_func: int = 0
    expert_weights_norm: bool = False
    expert_weights_scale: float = 0.0
    expert_probs_bias: bool = False
    n_expert_groups: int = 0
    n_group_used: int = 0
    #: shared experts as a count of routed-expert widths (``expert_shared_count``)
    n_expert_shared: int = 0
    #: ``leading_dense_block_count``: the first layers' FFN is dense, the others' experts
    n_layer_dense_lead: int = 0
    #: MLA (``deepseek2``): the Q LoRA rank (0: one ``attn_q``) and the decompressed head widths
    #: (``key_length_mla``/``value_length_mla``; 0: a legacy file with one ``attn_kv_b``)
    n_lora_q: int = 0
    head_k_mla: int = 0
    head_v_mla: int = 0
    #: separate Q, K and V biases (``blk.N.attn_q.bias`` ...): one more ``add`` per projection
    qkv_bias: bool = False
    #: final logit soft-capping written in the file (``{arch}.final_logit_softcapping``, Gemma-3)
    final_logit_softcap: bool = False
    #: RoPE on the attention layers (``granitehybrid`` switches it off with
    #: ``{arch}.rope.scaling.finetuned`` false: no positions input, no ``rope`` nodes)
    rope: bool = True
    #: tensors present that add graph nodes kvcalc does not rebuild (a fused ``attn_qkv``, an
    #: output-projection, MLP or ``output`` bias): the compute buffer is then not modelled
    unmodelled_tensors: tuple[str, ...] = ()
