"""The weight-related dimensions of a model, as frozen records (:func:`kvcalc.hfconfig.weights.read_weight_shape`
fills them from ``config.json``; :mod:`kvcalc.estimate` counts and prices them). Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcalc.hfconfig.moe_router import MoeRouter
from kvcalc.hfconfig.quant import QuantSpec


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class MlaWeights:
    """DeepSeek multi-head latent attention projections."""

    num_heads: int
    q_lora_rank: int  # 0: q_proj maps hidden -> heads directly (DeepSeek-V2-Lite)
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    #: the sparse-attention indexer (DeepSeek-V3.2, GLM-5): ``index_n_heads`` × ``index_head_dim``
    #: queries from the q LoRA, one key projection, a LayerNorm and per-head weights; 0: none
    index_n_heads: int = 0
    index_head_dim: int = 0


@dataclass(frozen=True, kw_only=True)
class MlpWeights:
    intermediate_size: int
    gated: bool = True
    bias: bool = False


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class Mamba2Weights:
    num_heads: int
    head_dim: int
    n_groups: int
    state_size: int
    conv_kernel: int
    conv_bias: bool = True
    proj_bias: bool = False
    #: the mixer's inner width when the config sets it apart from heads × head_dim (Granite-4.0-H:
    #: ``mamba_expand · hidden_size``); 0: heads × head_dim
    inner: int = 0
    #: the gated RMSNorm before out_proj (Falcon-H1 ``mamba_rms_norm`` false: none)
    gated_norm: bool = True

    @property
    def intermediate_size(self) -> int:
        return self.inner or self.num_heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        return self.intermediate_size + 2 * self.n_groups * self.state_size


@dataclass(frozen=True, kw_only=True)
class GdnWeights:
    """Gated DeltaNet linear attention (Qwen3-Next)."""

    num_k_heads: int
    num_v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_kernel: int


@dataclass(frozen=True, kw_only=True)
class Mamba1Weights:
    """Jamba's Mamba1 mixer (transformers' JambaMambaMixer): in_proj hidden → 2 × inner, a
    depthwise conv, x_proj inner → dt_rank + 2 × state, dt_proj dt_rank → inner (biased), A_log
    inner × state, D, out_proj, and RMSNorms on dt, B and C."""

    inner: int
    state_size: int
    conv_kernel: int
    dt_rank: int
    conv_bias: bool = True
    proj_bias: bool = False


@dataclass(frozen=True, kw_only=True)
class ShortConvWeights:
    """LFM2's gated short convolution: in_proj hidden → 3 × hidden (B, C, x), a depthwise
    ``conv_kernel``-tap convolution over hidden channels, out_proj hidden → hidden."""

    conv_kernel: int
    bias: bool = False


@dataclass(frozen=True, kw_only=True)
class Dsv4Weights:
    """DeepSeek-V4 attention (transformers' DeepseekV4Attention): one shared KV head, q and grouped
    output LoRAs, sinks, and per layer a compressor by its compress ratio (0: none; the CSA rate:
    overlapping compressor plus the sparse indexer; the HCA rate: compressor only); manifold
    hyper-connections around every block (``hc_mult`` streams)."""

    num_heads: int
    head_dim: int
    q_lora_rank: int
    o_groups: int
    o_lora_rank: int
    index_n_heads: int
    index_head_dim: int
    hc_mult: int
    #: per decoder layer: 0, ``csa_rate`` or ``hca_rate``
    compress_ratios: tuple[int, ...]
    csa_rate: int = 4
    hca_rate: int = 128


@dataclass(frozen=True, kw_only=True)
class VisionWeights:
    """A ViT tower and its projector: Llama 4's (pixel-shuffle adapter), SigLIP's (Gemma 3),
    Pixtral's (Mistral 3: gated MLP, RMSNorm, patch merger), Qwen3-VL's (Qwen3-VL, Qwen3.5/3.6:
    3D patch embedding, learned positions, patch merger and DeepStack mergers) or Gemma 4's."""

    #: ``llama4``, ``siglip``, ``pixtral``, ``qwen3_vl``, ``qwen2_5_vl`` or ``gemma4``
    family: str = "llama4"
    hidden_size: int
    intermediate_size: int
    num_layers: int
    image_size: int
    patch_size: int
    num_channels: int
    text_hidden_size: int
    pixel_shuffle_ratio: float = 0.5
    projector_input_dim: int = 0
    projector_output_dim: int = 0
    vision_output_dim: int = 0
    projector_bias: bool = False
    #: Pixtral's patch merger folds ``n × n`` patches
    spatial_merge_size: int = 1
    #: Qwen3-VL: frames per 3D patch, learned position rows, DeepStack mergers
    temporal_patch_size: int = 1
    num_positions: int = 0
    deepstack_layers: int = 0
    #: Gemma 4: per-head q/k RMSNorm width in the tower; Qwen2.5-VL: the tower's head width
    head_dim: int = 0


@dataclass(frozen=True, kw_only=True)
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
    mixers: tuple[str, ...] = ()
    ffns: tuple[str, ...] = ()
    attention: AttentionWeights | None = None
    #: Gemma 4's global (full-attention) layers, whose heads differ from the sliding ones
    #: (mixer ``attention_global``)
    global_attention: AttentionWeights | None = None
    mla: MlaWeights | None = None
    dsv4: Dsv4Weights | None = None
    mlp: MlpWeights | None = None
    moe: MoeWeights | None = None
    mamba2: Mamba2Weights | None = None
    gdn: GdnWeights | None = None
    short_conv: ShortConvWeights | None = None
    mamba1: Mamba1Weights | None = None
    vision: VisionWeights | None = None
    #: the config has a vision tower (vLLM profiles its encoder too), counted in ``vision`` or not
    vision_encoder: bool = False
    quantization: QuantSpec | None = None
    #: MTP layers in the checkpoint that transformers and vLLM (without speculation) do not load
    mtp_layers: int = 0
    #: rows and width of the RoPE cos/sin cache vLLM keeps next to the weights (0: no RoPE)
    rope_cache_positions: int = 0
    rotary_dim: int = 0
    notes: tuple[str, ...] = ()
    #: why the weights cannot be counted (a key they need is missing or malformed); None when fine
    problem: str | None = None
