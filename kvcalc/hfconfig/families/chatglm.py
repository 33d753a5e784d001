"""ChatGLM / GLM-4 in its ``chatglm`` spelling (``ChatGLMModel``, ``ChatGLMForConditionalGeneration``):
full attention on every layer.

vLLM 0.33 ``models/chatglm.py`` (``GLMAttention``) with vLLM's own ``ChatGLMConfig``
(``transformers_utils/configs/chatglm.py``): heads ``hidden_size / num_attention_heads`` wide (the
config's ``kv_channels`` is not read for them); KV heads ``multi_query_group_num`` when
``multi_query_attention``, else every query head (a ``multi_query_group_num`` is then not read),
split over TP or replicated when fewer than TP (``tp % kv == 0``); no window. It reads
``config.original_rope`` (the rotary's style), which ``ChatGLMConfig`` does not default, so a config
without it fails to build (``AttributeError``): refused here. Weights: ``query_key_value`` biased
when ``add_bias_linear`` or ``add_qkv_bias``, ``dense`` and the gated MLP (``dense_h_to_4h`` two
``ffn_hidden_size`` halves, ``dense_4h_to_h``) when ``add_bias_linear``; RMSNorm, or LayerNorm
with bias when ``rmsnorm`` is false, two per layer and a final one when ``post_layer_norm``; an
embedding and ``output_layer`` of ``padded_vocab_size`` rows; the RoPE cache ``seq_length`` rows
of half a head (``partial_rotary_factor`` 0.5, whatever the config says). GLM-4V
(``GLM4VForCausalLM``: ``glm4v.py``'s ``GLM4VModel`` subclasses ``ChatGLMModel``) is the same text
model with a ``vision_config`` dict beside it; its EVA2CLIP tower holds no cache.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._plain import split_head_width
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights
from kvcalc.model.layouts import FullAttention, Layout


def chatglm_kv_heads(r: ConfigReader, heads: int, prov: dict[str, str] | None = None) -> int:
    """The KV heads vLLM's ``GLMAttention`` builds."""
    if r.bool("multi_query_attention"):
        kv = r.int("multi_query_group_num", default=1, minimum=1)  # ChatGLMConfig's default: 1
        why = f"multi_query_attention: {r.path('multi_query_group_num')} = {kv}"
    else:
        kv, why = heads, f"no multi_query_attention: every query head ({heads})"
    if prov is not None:
        prov["num_kv_heads"] = why + " (vLLM 0.33 chatglm.py)"
    return kv


def chatglm_attention(r: ConfigReader, heads: int, hidden: int) -> AttentionWeights:
    bias = r.bool("add_bias_linear")
    return AttentionWeights(
        num_heads=heads,
        num_kv_heads=chatglm_kv_heads(r, heads),
        head_dim=hidden // heads,
        qkv_bias=bias or r.bool("add_qkv_bias"),
        o_bias=bias,
    )


def chatglm_vocab(r: ConfigReader) -> int:
    """The embedding's and ``output_layer``'s rows: ``padded_vocab_size`` (what chatglm.py builds)."""
    return r.int("padded_vocab_size", "vocab_size", minimum=1)


def chatglm_norms(r: ConfigReader) -> tuple[str, bool]:
    """The norm kind (``rmsnorm``: RMSNorm, else LayerNorm) and whether a final one is built."""
    return ("rms" if r.bool("rmsnorm", True) else "layer"), r.bool("post_layer_norm", True)


def read_chatglm(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if r.value("original_rope") is None:
        raise ConfigError(
            f"{r.source}: original_rope is not set, which vLLM 0.33's chatglm.py reads "
            "(config.original_rope: AttributeError; ChatGLMConfig does not default it)",
            hint="set original_rope in config.json (ChatGLM3 and GLM-4 checkpoints write true)",
            code="config-invalid",
        )
    if "tie_word_embeddings" not in r.raw:  # GLM-4V's class defaults (recorded)
        raise ConfigError(
            f"{r.source}: no tie_word_embeddings, which vLLM 0.33's chatglm.py reads "
            "(ChatGLMBaseModel: config.tie_word_embeddings: AttributeError; ChatGLMConfig does "
            "not default it under transformers 5.20)",
            hint="set tie_word_embeddings in config.json (ChatGLM and GLM-4V checkpoints write false)",
            code="config-invalid",
        )
    width = split_head_width(r, ctx, "chatglm.py")
    kv = chatglm_kv_heads(r, ctx.num_attention_heads, ctx.provenance)
    ctx.provenance["layer pattern"] = "ChatGLM: every layer full attention (vLLM 0.33 chatglm.py)"
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=width, v_dim=width)] * ctx.num_layers
    )


FAMILIES = (
    Family(
        name="chatglm",
        model_types={"chatglm"},
        # registry.py maps both to chatglm.py's ChatGLMForCausalLM (the text model)
        # and GLM-4V (glm4v.py's GLM4VForCausalLM: the same text model, an EVA2CLIP tower beside)
        architectures={"ChatGLMModel", "ChatGLMForConditionalGeneration", "GLM4VForCausalLM"},
        # the KV-head spellings GLMAttention reads, original_rope (required), and the weights' keys
        keys={
            "multi_query_attention",
            "multi_query_group_num",
            "kv_channels",  # not read: heads are hidden_size / num_attention_heads wide
            "original_rope",
            "add_bias_linear",
            "add_qkv_bias",
            "rmsnorm",
            "post_layer_norm",
        },
        layouts=read_chatglm,
        note="ChatGLM / GLM-4 (chatglm): full attention per layer, KV heads as vLLM 0.33 "
        "chatglm.py picks them",
    ),
)
