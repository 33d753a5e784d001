"""The weight-related dimensions of a model, as frozen records (:func:`kvcalc.hfconfig.weights.read_weight_shape`
fills them from ``config.json``; :mod:`kvcalc.estimate` counts and prices them). Plain data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcalc.frozen import frozen
from kvcalc.hfconfig.moe_router import MoeRouter
from kvcalc.hfconfig.quant import QuantSpec

if TYPE_CHECKING:  # records only some families have (their own module, imported when read)
    from kvcalc.hfconfig.weight_shape_extra import (
        Dsv4Weights,
        GdnWeights,
        Gemma3nWeights,
        KdaWeights,
        Mamba1Weights,
        Mamba2Weights,
        MlaWeights,
        NgramEmbeddingWeights,
        ShortConvWeights,
        VisionWeights,
        WhisperWeights,
        Zamba2Weights,
    )


@frozen
class AttentionWeights:
    """q/k/v/o projections of a (grouped-query) attention layer."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    o_bias: bool = False
    #: weighted per-head RMSNorm on q and k (Qwen3, Gemma 3)
    qk_norm: bool = False
    #: q_proj also produces a sigmoid output gate, doubling its width (Qwen3-Next)
    output_gate: bool = False
    #: one learned attention-sink logit per head (gpt-oss)
    sinks: bool = False
    #: a v_proj of its own (Gemma 4's global layers reuse K as V: ``attention_k_eq_v``)
    v_proj: bool = True
    #: RMSNorm over the whole q and k projections rather than per head (MiniMax-M2 ``use_qk_norm``)
    qk_norm_full: bool = False
    #: q through a low-rank path this wide (Step3's ``share_q_dim``): a down-projection replicated
    #: on every rank, its RMSNorm, then the up-projection to the heads split over TP; 0: q_proj
    q_lora_rank: int = 0
    #: V's head width where it differs from K's (MiMo-V2's ``v_head_dim``); 0: ``head_dim``
    v_head_dim: int = 0
    #: the ``qk_norm_full`` norms held whole on every rank (vLLM's OLMoE and OLMo-Hybrid:
    #: ``RMSNorm(total heads × head_dim)``), not split with the heads
    qk_norm_whole: bool = False
    #: vLLM keeps a V slot where ``v_proj`` is False (Gemma 4's ``attention_k_eq_v``: K loaded
    #: into both)
    v_slot: bool = False
    #: a head-wise sigmoid gate on the output, one value per head (Step-3.5's ``g_proj``,
    #: ``use_head_wise_attn_gate``): heads × hidden, split with the heads
    head_gate: bool = False


@frozen
class MlpWeights:
    intermediate_size: int
    gated: bool = True
    bias: bool = False


@frozen
class MoeWeights:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    gated: bool = True
    expert_bias: bool = False  # gpt-oss
    router_bias: bool = False  # gpt-oss
    #: total width of the always-on shared expert(s); 0 when there are none
    shared_intermediate_size: int = 0
    #: Qwen2-MoE/Qwen3-Next: a 1 x hidden sigmoid gate on the shared expert
    shared_expert_gate: bool = False
    #: Nemotron-3 latent MoE: routed experts work in this width, behind hidden → latent → hidden
    #: projections (``moe_latent_size``); 0: experts work in the hidden size
    latent_size: int = 0
    #: the router's keys, read for DeepSeek-style configs (the defaults elsewhere)
    router: MoeRouter = MoeRouter()
    #: an fp32 per-expert ``e_score_correction_bias`` beside the router: a buffer in transformers
    #: (no parameter), a parameter vLLM keeps whole on every rank
    score_bias: bool = False
    #: ERNIE 4.5's ``moe_statics.e_score_correction_bias``: one value per expert, a parameter in
    #: transformers (counted with the router)
    statics_bias: bool = False
    #: the router (and ``moe_statics``) stored in fp32 whatever the model's dtype: vLLM 0.33's
    #: ``GateLinear(..., params_dtype=torch.float32)`` (ERNIE 4.5 MoE, GLM-4.5, MiniMax-M2,
    #: MiMo-V2 unless ``moe_router_dtype`` says otherwise)
    router_fp32: bool = False
    #: vLLM pads each rank's share of an expert's width up to this when TP splits it thinner
    #: (Kimi-Linear: ``min_moe_intermediate_per_partition``, 256); 0: no padding
    min_width_per_rank: int = 0
    #: router outputs beyond the routed experts, for experts without weights (LongCat-Flash's
    #: ``zero_expert_num`` identity experts): the router and its score bias are this much wider
    zero_experts: int = 0
    #: Gemma 4's router: a per-dimension input ``scale`` and a ``per_expert_scale`` beside the
    #: projection, and three more norms around the MoE block
    gemma4_router: bool = False
    #: the ``statics_bias`` held in fp32 whatever the router's dtype (Laguna's
    #: ``e_score_correction_bias``, a parameter in transformers and vLLM)
    statics_fp32: bool = False


@frozen
class WeightShape:
    """Dimensions that decide a model's parameter count. Plain numbers only."""

    model_type: str = ""
    num_layers: int
    hidden_size: int
    vocab_size: int
    intermediate_size: int = 0
    tie_word_embeddings: bool = False
    #: a bias on lm_head (PhiMoE ``lm_head_bias``)
    lm_head_bias: bool = False
    #: rows of a learned absolute position table (gpt2's ``n_positions``); 0 for RoPE models
    learned_positions: int = 0
    norm: str = "rms"  # "rms" (weight only) or "layer" (weight + bias)
    norms_per_layer: int = 2
    #: a norm after the last layer (ChatGLM's ``post_layer_norm`` false builds none)
    final_norm: bool = True
    #: a norm right after the token embedding (BLOOM's ``word_embeddings_layernorm``)
    embedding_norm: bool = False
    #: learned scalars of each layer's MLP activation (Apertus's xIELU ``alpha_p``, ``alpha_n``)
    activation_params: int = 0
    mixers: tuple[str, ...] = ()
    ffns: tuple[str, ...] = ()
    attention: AttentionWeights | None = None
    #: Gemma 4's global (full-attention) layers, whose heads differ from the sliding ones
    #: (mixer ``attention_global``)
    global_attention: AttentionWeights | None = None
    #: each layer's attention where heads differ layer by layer (Laguna's
    #: ``num_attention_heads_per_layer``); empty: ``attention`` / ``global_attention`` by mixer
    layer_attention: tuple[AttentionWeights, ...] = ()
    mla: MlaWeights | None = None
    dsv4: Dsv4Weights | None = None
    mlp: MlpWeights | None = None
    moe: MoeWeights | None = None
    #: Gemma-3n's per-layer MLP widths, AltUp, LAuReL and per-layer embeddings (mixer ``gemma3n``)
    gemma3n: Gemma3nWeights | None = None
    mamba2: Mamba2Weights | None = None
    gdn: GdnWeights | None = None
    kda: KdaWeights | None = None
    #: LongCat-Flash-Ngram's n-gram embedding tables beside ``embed_tokens``
    ngram: NgramEmbeddingWeights | None = None
    #: Zamba2's shared transformer blocks and per-layer adapters (mixer ``zamba2_hybrid``)
    zamba2: Zamba2Weights | None = None
    short_conv: ShortConvWeights | None = None
    mamba1: Mamba1Weights | None = None
    vision: VisionWeights | None = None
    #: Whisper's encoder and decoder (``hfconfig/families/whisper.py``): the inventory is theirs
    whisper: WhisperWeights | None = None
    #: the config has a vision tower (vLLM profiles its encoder too), counted in ``vision`` or not
    vision_encoder: bool = False
    quantization: QuantSpec | None = None
    #: MTP layers in the checkpoint that transformers and vLLM (without speculation) do not load
    mtp_layers: int = 0
    #: rows and width of the RoPE cos/sin cache vLLM keeps next to the weights (0: no RoPE)
    rope_cache_positions: int = 0
    rotary_dim: int = 0
    #: values of RoPE caches beside ``rope_cache_positions × rotary_dim`` (Gemma 4's global
    #: layers' own cache, ``global_head_dim`` wide)
    extra_rope_values: int = 0
    notes: tuple[str, ...] = ()
    #: why the weights cannot be counted (a key they need is missing or malformed); None when fine
    problem: str | None = None
