"""LongCat-Flash (``LongcatFlashForCausalLM``, ``LongcatFlashNgramForCausalLM``, ``longcat_flash``):
vLLM 0.33 ``models/longcat_flash.py`` and ``longcat_flash_ngram.py`` over transformers'
``LongcatFlashConfig``.

Each of the ``num_layers`` decoder layers holds two MLA attentions (``self_attn.0`` and
``self_attn.1``, DeepSeek-V2's ``DeepseekV2MLAAttention``; vLLM's ``is_deepseek_mla`` lists
``longcat_flash``), each caching one latent of ``kv_lora_rank + qk_rope_head_dim`` whole on every
TP rank: ``2 · num_layers`` caches. The config class derives ``num_hidden_layers`` as ``2 ·
num_layers`` (a property, not saved); a config.json that writes a ``num_hidden_layers`` other than
that is refused. vLLM also reads ``mla_scale_q_lora``, ``mla_scale_kv_lora`` and ``zero_expert_type``,
which the config class does not define: its defaults fail building (``AttributeError``, recorded)
and are refused here. MLA dimensions other than the class's (128, 64, 128) are refused, as for A.X K1
(vLLM's MLA prefill backends take fixed sets). The N-gram embedding variant
(``ngram_vocab_size_ratio``, ``emb_split_num``, ``emb_neighbor_num``) shapes no cache.

Weights: kvcalc's layer ``2j`` is decoder layer ``j``'s first attention (``self_attn.0``), its
first MLP (``mlps.0``, ``ffn_hidden_size``), its two norms and its MoE; layer ``2j + 1`` the second
attention, MLP and norms. The MoE (:func:`longcat_moe`): ``n_routed_experts`` of
``expert_ffn_hidden_size``, top ``moe_topk``, and an fp32 router (``LongcatRouter``'s classifier,
``params_dtype=torch.float32``) over them and the ``zero_expert_num`` weightless zero experts, with
its fp32 ``e_score_correction_bias`` as wide. The N-gram variant's hashed embedding tables
(:func:`longcat_ngram`) are as vLLM builds them (transformers has no class for it).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import MoeWeights
from kvcalc.hfconfig.weight_shape_extra import NgramEmbeddingWeights
from kvcalc.model.layouts import Layout, MLALatent

#: the MLA dimensions recorded (LongcatFlashConfig's): qk_nope_head_dim, qk_rope_head_dim, v_head_dim
_CHECKED_DIMS = (128, 64, 128)


def read_longcat_flash(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    prov = ctx.provenance
    layers = r.int("num_layers", default=28)
    if r.has("num_hidden_layers") and r.int("num_hidden_layers") != 2 * layers:
        raise ConfigError(
            f"{r.source}: num_hidden_layers {r.int('num_hidden_layers')} is not 2 × num_layers "
            f"{layers}: LongcatFlashConfig derives it so (two attentions per decoder layer)",
            code="config-invalid",
        )
    missing = [k for k in ("mla_scale_q_lora", "mla_scale_kv_lora", "zero_expert_type")
               if r.value(k) is None]  # fmt: skip
    if missing:
        raise ConfigError(
            f"{r.source}: no {', '.join(missing)}: vLLM 0.33's longcat_flash.py reads them building "
            "each layer (AttributeError; LongcatFlashConfig does not define them)",
            hint="LongCat-Flash checkpoints set mla_scale_q_lora, mla_scale_kv_lora and "
            "zero_expert_type",  # must be set (read)
            code="config-invalid",
        )
    rank = r.int("kv_lora_rank", default=512)
    dims = (
        r.int("qk_nope_head_dim", default=128),
        r.int("qk_rope_head_dim", default=64),
        r.int("v_head_dim", default=128),
    )
    if dims != _CHECKED_DIMS:
        raise ConfigError(
            f"{r.source}: MLA dimensions (qk_nope_head_dim, qk_rope_head_dim, v_head_dim) {dims}: "
            "vLLM 0.33's MLA prefill backends take fixed dimension sets; only "
            "LongcatFlashConfig's (128, 64, 128) was checked",
            code="config-unverified",
        )
    latent = MLALatent(dtype=ctx.dtype, kv_lora_rank=rank, rope_dim=dims[1],
                       num_heads=ctx.num_attention_heads, qk_nope_dim=dims[0], v_head_dim=dims[2])  # fmt: skip
    prov["num_layers"] = (
        f"num_layers = {layers} decoder layers of two MLA attentions: {2 * layers} caches "
        "(longcat_flash.py)"
    )
    prov["mla"] = (
        f"kv_lora_rank + qk_rope_head_dim = {rank} + {dims[1]} = {rank + dims[1]} (one latent per "
        "attention, no separate K/V)"
    )
    prov["layer pattern"] = "LongCat-Flash: two MLA attentions in every decoder layer"
    n = 2 * layers
    return [latent] * n, (L.FULL,) * n


def longcat_moe(r: ConfigReader, n: int) -> tuple[MoeWeights, tuple[bool, ...]]:
    """The MoE of each decoder layer, on kvcalc's even layers (LongcatFlashConfig's defaults)."""
    moe = MoeWeights(
        num_experts=r.int("n_routed_experts", default=512),
        experts_per_token=r.int("moe_topk", default=12),
        expert_intermediate_size=r.int("expert_ffn_hidden_size", default=2048),
        zero_experts=r.int("zero_expert_num", default=256, minimum=0),
        score_bias=True,
        router_fp32=True,
    )
    return moe, tuple(i % 2 == 0 for i in range(n))


def longcat_ngram(r: ConfigReader, hidden: int) -> NgramEmbeddingWeights | None:
    """``NgramEmbedding``: ``emb_split_num · (emb_neighbor_num − 1)`` embedders of
    ``ngram_vocab_size_ratio · vocab_size + 2i + 1`` rows each, ``hidden // embedders`` wide."""
    if r.value("ngram_vocab_size_ratio") is None:
        return None
    m = r.int("ngram_vocab_size_ratio") * r.int("vocab_size")
    k, n = r.int("emb_split_num"), r.int("emb_neighbor_num", minimum=2)
    embedders = k * (n - 1)
    return NgramEmbeddingWeights(
        rows=sum(m + 2 * i + 1 for i in range(embedders)),
        width=hidden // embedders,
        embedders=embedders,
        # ne_weights (n − 1) × k × n, ne_mods (n − 1) × k, exclusive_sizes embedders + 1
        int32_values=(n - 1) * k * n + (n - 1) * k + embedders + 1,
    )


FAMILIES = (
    Family(
        name="longcat-flash",
        model_types={"longcat_flash"},
        architectures={"LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"},
        keys={
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "qk_head_dim",  # qk_nope_head_dim + qk_rope_head_dim, written by the config class
            "mla_scale_q_lora",  # LoRA-norm scales applied on load: not cache
            "mla_scale_kv_lora",
            "zero_expert_num",  # zero (identity) experts beside the routed ones (weights)
            "zero_expert_type",  # must be set (read)
            "ngram_vocab_size_ratio",  # the N-gram embedding variant's tables: not cache
            "emb_split_num",
            "emb_neighbor_num",
        },
        layouts=read_longcat_flash,
        own_layer_count=True,
        note="LongCat-Flash: two MLA latents (kv_lora_rank + qk_rope_head_dim) per decoder layer "
        "(vLLM 0.33 longcat_flash.py).",
    ),
)
