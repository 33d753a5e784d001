"""The weight records only some families have — MLA, DeepSeek-V4 attention, the recurrent mixers
(Mamba1/Mamba2, Gated DeltaNet, LFM2's short convolution) and vision towers — as frozen records
beside :mod:`kvcalc.hfconfig.weight_shape`, in a module of their own so that planning a plain
attention model does not create them (:mod:`kvcalc.hfconfig.weights` imports it when a config
has one). Plain data.
"""

from __future__ import annotations

from kvcalc.frozen import frozen


@frozen
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


@frozen
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


@frozen
class GdnWeights:
    """Gated DeltaNet linear attention (Qwen3-Next)."""

    num_k_heads: int
    num_v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_kernel: int
    #: ``A_log`` stored in fp32 (vLLM's Qwen3-Next/3.5 layer); OLMo-Hybrid's is the model dtype
    a_log_fp32: bool = True


@frozen
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
    #: Jamba's weighted RMSNorms on dt, B and C (Mamba's and FalconMamba's mixers have none)
    dt_b_c_norms: bool = True


@frozen
class ShortConvWeights:
    """LFM2's gated short convolution: in_proj hidden → 3 × hidden (B, C, x), a depthwise
    ``conv_kernel``-tap convolution over hidden channels, out_proj hidden → hidden."""

    conv_kernel: int
    bias: bool = False


@frozen
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


@frozen
class Zamba2Weights:
    """Zamba2's shared transformer blocks (transformers' Zamba2AttentionDecoderLayer; vLLM 0.33
    ``zamba2.py``): ``mem_blocks`` blocks of attention over the concatenated ``2 × hidden`` input
    (q, k, v ``width`` × ``width``, o_proj hidden × ``width``) and a gated MLP, used in turn by the
    ``hybrid_layers``; each hybrid layer adds a hidden × hidden projection and its own LoRA
    adapters (rank ``adapter_rank``) on the MLP's gate_up and, with ``attention_adapters``, on q,
    k and v."""

    hybrid_layers: tuple[int, ...]
    mem_blocks: int
    num_heads: int
    width: int
    intermediate_size: int
    adapter_rank: int
    attention_adapters: bool = False
    bias: bool = False


@frozen
class NgramEmbeddingWeights:
    """LongCat-Flash-Ngram's hashed n-gram embedding (vLLM 0.33 ``longcat_flash_ngram.py``
    ``NgramEmbedding``): ``embedders`` tables concatenated into one vocabulary-split table of
    ``rows`` × ``width``, a stacked projection ``embedders × width × hidden`` held whole on every
    rank, and ``int32_values`` of int32 hashing buffers (``ne_weights``, ``ne_mods``,
    ``exclusive_sizes``)."""

    rows: int
    width: int
    embedders: int
    int32_values: int


@frozen
class KdaWeights:
    """Kimi Delta Attention (transformers' KimiDeltaAttention; vLLM 0.33's
    ``KimiGatedDeltaNetAttention``): q, k, v projections of heads × head_dim each with a
    depthwise conv (fp32 in vLLM), the beta projection (a value per head), the low-rank forget gate
    (``f_a`` hidden → head_dim, replicated, and ``f_b`` back to the heads) with its fp32 ``dt_bias``
    and ``A_log``, the low-rank output gate (``g_a``, ``g_b``), a gated RMSNorm of one head and
    o_proj."""

    num_heads: int
    head_dim: int
    conv_kernel: int


@frozen
class Gemma3nWeights:
    """Gemma-3n's decoder extras (transformers' Gemma3nTextModel, vLLM 0.33 ``gemma3n.py``): per
    layer an MLP of its own width, AltUp (``altup_num_inputs`` streams: correction and prediction
    coefficients, a modality router, its norm and an fp32 output scale), a LAuReL low-rank residual
    (``laurel_rank``) and the per-layer input gate and projection (``hidden_size_per_layer_input``);
    per model the per-layer embeddings (``vocab_size_per_layer_input`` rows of layers × that
    width), their projection and norm, and the AltUp in/out projections. Layers from
    ``first_kv_shared`` on reuse an earlier layer's K and V: q_proj and q_norm only."""

    intermediate_sizes: tuple[int, ...]
    altup_num_inputs: int
    laurel_rank: int
    per_layer_width: int
    per_layer_vocab: int
    first_kv_shared: int


@frozen
class VisionWeights:
    """A ViT tower and its projector: Llama 4's (pixel-shuffle adapter), SigLIP's (Gemma 3),
    Pixtral's (Mistral 3: gated MLP, RMSNorm, patch merger), Qwen3-VL's (Qwen3-VL, Qwen3.5/3.6:
    3D patch embedding, learned positions, patch merger and DeepStack mergers) or Gemma 4's."""

    #: ``llama4``, ``siglip``, ``pixtral``, ``qwen3_vl``, ``qwen2_5_vl``, ``qwen2_vl``, ``glm4v``,
    #: ``llava`` or ``gemma4``
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
    #: Gemma 4: per-head q/k RMSNorm width in the tower; Qwen2.5-VL and Llama 4: the tower's head
    #: width (Llama 4: for its vision RoPE cache)
    head_dim: int = 0
    #: the tower's attention heads, where vLLM splits them over TP (``dist_utils.divide`` in
    #: Qwen2-VL's, Qwen2.5-VL's and GLM-4.1V's vision attention; 0: not read)
    num_heads: int = 0
    #: EXAONE 4.5's tower: its attention's KV heads (grouped-query; 0: as many as ``num_heads``)
    num_kv_heads: int = 0
    #: LFM2-VL: a LayerNorm before the projector (``projector_use_layernorm``); InternVL: the
    #: tower's final LayerNorm (no ``use_mean_pooling``)
    projector_norm: bool = False
    #: InternVL: q/k/v biases, q/k RMSNorms, a mask token (``attention_bias``, ``use_qk_norm``,
    #: ``use_mask_token``); ``patch_size`` is the patch's area (height × width)
    attention_bias: bool = False
    qk_norm: bool = False
    mask_token: bool = False
    #: InternViT: padding heads beside ``num_heads`` (NVLM-D's 7: ``num_dummy_heads``), every
    #: attention width ``(num_heads + dummy_heads) · head_dim``
    dummy_heads: int = 0
    #: LLaVA: the tower (``clip`` or ``siglip``), the learned ``image_newline`` row (LLaVA-NeXT,
    #: OneVision), a projector vLLM builds unsplit (OneVision's ``nn.Linear``)
    tower: str = ""
    image_newline: bool = False
    projector_replicated: bool = False
    #: Gemma 4: soft tokens per image (``vision_config.default_output_length``)
    default_output_length: int = 0
    #: Gemma 4: the config has an ``audio_config`` (an audio tower beside the vision one)
    audio: bool = False
    #: Qwen2.5-Omni: its audio encoder, a second tower beside this vision one (its own
    #: ``_mark_tower_model`` modality)
    companion: VisionWeights | None = None
    #: BLIP-2: the Q-Former's learned queries, its layers (a cross-attention every
    #: ``cross_attention_frequency``), their width and MLP width (``qformer_config``)
    query_tokens: int = 0
    qformer_layers: int = 0
    qformer_hidden_size: int = 0
    qformer_intermediate_size: int = 0
    cross_attention_frequency: int = 1
    #: Phi-3-Vision: the vocabulary rows of the model class's own ``embed_tokens``, built inside
    #: its tower (``_mark_tower_model``) beside the language model's
    tower_vocab_rows: int = 0
    #: BAGEL: rows of the frozen 2D sin-cos position table (an fp32 buffer, text-width wide)
    sincos_positions: int = 0


@frozen
class WhisperWeights:
    """Whisper's encoder and decoder dimensions (``hfconfig/families/whisper.py`` reads them)."""

    d_model: int
    num_mel_bins: int
    vocab_size: int
    encoder_layers: int
    encoder_heads: int
    encoder_ffn: int
    decoder_layers: int
    decoder_heads: int
    decoder_ffn: int
    source_positions: int
    target_positions: int
