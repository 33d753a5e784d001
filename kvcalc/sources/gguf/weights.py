"""The weight dimensions of a GGUF file (:class:`~kvcalc.hfconfig.weight_shape.WeightShape`), for the
engines that size their activation peak from them (vLLM's profile run under older releases, SGLang,
transformers): the widths the header already holds — ``embedding_length``, ``feed_forward_length``,
the expert keys, the attention heads of the layers read, and the vocabulary (``token_embd.weight``'s
rows). Without them those engines planned a GGUF with no activation, non-torch or CUDA-graph memory.

Only the plain and MoE attention architectures and MLA are described; recurrent mixers (Mamba-2,
Gated DeltaNet, short convolutions) are not read from GGUF keys here, so such files keep no weight
shape and their plans say the overhead is not estimated. The exact weight bytes still come from the
tensor infos (:mod:`kvcalc.sources.gguf.files`), not from these dimensions.
"""

from __future__ import annotations

from kvcalc.hfconfig.weight_shape import AttentionWeights, MlpWeights, MoeWeights, WeightShape
from kvcalc.hfconfig.weight_shape_extra import MlaWeights
from kvcalc.model.graph_dims import GraphDims
from kvcalc.model.layouts import FullAttention, Layout, MLALatent


def gguf_weight_shape(
    arch: str, layers: tuple[Layout, ...], heads: int, graph: GraphDims | None
) -> WeightShape | None:
    """The dimensions of an attention GGUF (``None``: a recurrent or hybrid file, or no tensor infos)."""
    if graph is None or not layers:
        return None
    n = len(layers)
    attention = mla = None
    if all(isinstance(x, MLALatent) for x in layers):
        m = layers[0]
        assert isinstance(m, MLALatent)
        if not (graph.head_k_mla and graph.head_v_mla):
            return None  # a legacy file with one attn_kv_b: the decompressed widths are not written
        mla = MlaWeights(num_heads=heads, q_lora_rank=graph.n_lora_q, kv_lora_rank=m.kv_lora_rank,
                         qk_nope_head_dim=graph.head_k_mla - m.rope_dim, qk_rope_head_dim=m.rope_dim,
                         v_head_dim=graph.head_v_mla)  # fmt: skip
        mixers = ("mla",) * n
    elif all(isinstance(x, FullAttention) for x in layers):  # sliding and chunked layers too
        widest = max(layers, key=lambda x: x.kv_heads * x.k_dim)  # type: ignore[attr-defined]
        assert isinstance(widest, FullAttention)
        attention = AttentionWeights(num_heads=heads, num_kv_heads=widest.kv_heads,
                                     head_dim=widest.k_dim, qkv_bias=graph.qkv_bias)  # fmt: skip
        mixers = ("attention",) * n
    else:
        return None
    mlp = MlpWeights(intermediate_size=graph.n_ff) if graph.n_ff else None
    moe = None
    if graph.n_expert:
        if not (graph.n_expert_used and graph.n_ff_exp):
            return None
        shared = graph.n_ff_shexp or graph.n_expert_shared * graph.n_ff_exp
        moe = MoeWeights(num_experts=graph.n_expert, experts_per_token=graph.n_expert_used,
                         expert_intermediate_size=graph.n_ff_exp,
                         shared_intermediate_size=shared if graph.shared_expert else 0)  # fmt: skip
        lead = min(graph.n_layer_dense_lead, n)
        ffns = ("dense",) * lead + ("moe",) * (n - lead)
        if lead and mlp is None:
            return None
    elif mlp is not None:
        ffns = ("dense",) * n
    else:
        return None
    return WeightShape(
        model_type=arch,
        num_layers=n,
        hidden_size=graph.n_embd,
        vocab_size=graph.n_vocab,
        intermediate_size=graph.n_ff,
        mixers=mixers,
        ffns=ffns,
        attention=attention,
        mla=mla,
        mlp=mlp,
        moe=moe,
        notes=("dimensions read from the GGUF header (embedding, feed-forward and expert widths, "
               "heads, token_embd rows)",),
    )  # fmt: skip
