"""Audio towers read from ``audio_config``, for the parameter count (see
:mod:`kvcalc.hfconfig.weights`), as vLLM 0.33's model files build them: Audio Flamingo 3's
(``audioflamingo3``: ``audioflamingo3.py``), GLM-ASR's (``glmasr``: ``glmasr.py``) and MOSS
Transcribe-Diarize's (``moss_transcribe_diarize``: ``moss_transcribe_diarize.py``) and
Qwen3-ASR's (``qwen3_asr``: ``qwen3_asr.py``, its ``thinker_config.audio_config``) and Granite
Speech's (``granite_speech``, ``granite_speech_plus``: ``granite_speech.py``, its
``encoder_config`` and ``projector_config``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.reader import ConfigReader

if TYPE_CHECKING:  # imported where a tower is read
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights


def _audio_config(r: ConfigReader, kind: str) -> ConfigReader:
    """``audio_config``, of the encoder model type ``kind`` (its config class's)."""
    a = r.mapping("audio_config") if r.has("audio_config") else None
    if a is None:
        raise ConfigError(f"{r.source}: no audio_config: the audio tower is sized from it",
                          code="config-invalid")  # fmt: skip
    ar = ConfigReader(a, source=f"{r.source}: audio_config")
    got = ar.str("model_type", kind)
    if got != kind:
        raise ar.bad(ar.path("model_type"), got, kind)
    return ar


def _audioflamingo3(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """Audio Flamingo 3's tower as vLLM 0.33 builds it (``audioflamingo3.py``:
    ``AudioFlamingo3Encoder`` subclasses transformers' ``Qwen2AudioEncoder``, whole on every rank,
    and adds a parameterless ``AvgPool1d``): Qwen2-Audio's encoder (see
    :func:`kvcalc.hfconfig.weights_vision._qwen2_audio`) on ``AudioFlamingo3EncoderConfig``'s
    ``hidden_size``, ``intermediate_size`` and ``num_hidden_layers``; then the projector, two
    ``nn.Linear`` (tower → text width → text width) biased where ``projector_bias``, whole."""
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

    ar = _audio_config(r, "audioflamingo3_encoder")
    return VisionWeights(
        family="audioflamingo3",
        hidden_size=ar.int("hidden_size", default=1280),
        intermediate_size=ar.int("intermediate_size", default=5120),
        num_layers=ar.int("num_hidden_layers", default=32),
        image_size=0,
        patch_size=0,
        num_channels=ar.int("num_mel_bins", default=128),
        num_positions=ar.int("max_source_positions", default=1500),
        projector_bias=r.bool("projector_bias", True),
        text_hidden_size=text_hidden,
    )


def _glmasr(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """GLM-ASR's tower as vLLM 0.33 builds it (``glmasr.py`` ``GlmAsrEncoder``): two biased
    convolutions (``num_mel_bins`` → ``hidden_size`` → the same, kernel 3), whole; every layer a
    biased ``QKVParallelLinear`` (``num_attention_heads`` and ``num_key_value_heads`` of
    ``hidden_size / num_attention_heads``) and ``o_proj`` (row), a biased fc1/fc2
    ``intermediate_size`` wide (column, row), two LayerNorms; the final LayerNorm; the rotary
    ``inv_freq`` buffer (fp32). The projector: ``linear_1`` (``intermediate_size`` → twice the
    text width, column) and ``linear_2`` (→ the text width, row), both biased. The tower's
    heads split over TP (a bare assert where they do not)."""
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

    ar = _audio_config(r, "glmasr_encoder")
    hidden, heads = ar.int("hidden_size", default=1280), ar.int("num_attention_heads", default=20)
    # GlmAsrEncoderRotaryEmbedding: getattr(config, "head_dim", hidden / heads) times
    # rope_parameters' partial_rotary_factor (1.0 where absent): inv_freq holds half of it
    rotary = ar.int("head_dim", default=hidden // heads)
    rope = ar.mapping("rope_parameters") if ar.has("rope_parameters") else None
    if rope:
        rr = ConfigReader(rope, source=f"{ar.source}: rope_parameters")
        factor = rr.value("partial_rotary_factor", 1.0)
        if not isinstance(factor, (int, float)) or isinstance(factor, bool):
            raise rr.bad(rr.path("partial_rotary_factor"), factor, "a number")
        rotary = int(rotary * factor)
    return VisionWeights(
        family="glmasr",
        hidden_size=hidden,
        intermediate_size=ar.int("intermediate_size", default=5120),
        num_layers=ar.int("num_hidden_layers", default=32),
        image_size=0,
        patch_size=0,
        num_channels=ar.int("num_mel_bins", default=128),
        num_heads=heads,
        num_kv_heads=ar.int("num_key_value_heads", default=heads),
        head_dim=rotary,  # the rotary width (inv_freq: half of it, fp32)
        text_hidden_size=text_hidden,
    )


def _moss_transcribe_diarize(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """MOSS Transcribe-Diarize's tower as vLLM 0.33 builds it (``moss_transcribe_diarize.py``:
    ``MossTranscribeDiarizeWhisperEncoder`` is ``whisper.py``'s ``WhisperEncoder`` on the Whisper
    ``audio_config``): two biased convolutions (``num_mel_bins`` → ``d_model`` → the same, kernel
    3) and ``max_source_positions`` position rows (an ``nn.Embedding``), whole; every encoder layer
    a biased ``QKVParallelLinear`` (``encoder_attention_heads``, as many KV heads, q, k and v all
    biased) and ``out_proj`` (row), a biased fc1/fc2 ``encoder_ffn_dim`` wide (column, row), two
    LayerNorms; the final LayerNorm. Then the ``vq_adaptor``, whole: two biased ``nn.Linear``
    (``adaptor_input_dim`` → the text width → the same) and a LayerNorm."""
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

    ar = _audio_config(r, "whisper")
    return VisionWeights(
        family="moss_transcribe_diarize",
        hidden_size=ar.int("d_model"),
        intermediate_size=ar.int("encoder_ffn_dim"),
        num_layers=ar.int("encoder_layers"),
        image_size=0,
        patch_size=0,
        num_channels=ar.int("num_mel_bins", default=80),
        num_positions=ar.int("max_source_positions", default=1500),
        num_heads=ar.int("encoder_attention_heads"),
        projector_input_dim=r.int("adaptor_input_dim"),
        text_hidden_size=text_hidden,
    )


def _qwen3_asr(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """Qwen3-ASR's tower as vLLM 0.33 builds it (``qwen3_asr.py``: ``qwen3_omni_moe_thinker.py``'s
    ``Qwen3OmniMoeAudioEncoder`` on ``thinker_config.audio_config``): three biased 3 × 3
    ``Conv2d`` (1 → ``downsample_hidden_size`` → the same → the same), the unbiased ``conv_out``
    (``downsample_hidden_size`` × the thrice-halved mel bins → ``d_model``), whole; every layer a
    biased ``QKVParallelLinear`` (``encoder_attention_heads``, as many KV heads) and ``out_proj``,
    a biased fc1/fc2 ``encoder_ffn_dim`` wide, split over TP only where the heads divide it
    (``disable_tp`` otherwise: whole), two LayerNorms; ``ln_post``, the biased ``proj1``
    (``d_model`` → the same) and ``proj2`` (→ ``output_dim``), whole; the fp32 sinusoid
    ``positional_embedding`` buffer, ``max_source_positions`` × ``d_model``."""

    thinker = r.mapping("thinker_config") if r.has("thinker_config") else None
    if thinker is None:
        raise ConfigError(f"{r.source}: no thinker_config: Qwen3-ASR's tower is sized from it",
                          code="config-invalid")  # fmt: skip
    ar = _audio_config(ConfigReader(thinker, source=f"{r.source}: thinker_config"),
                       "qwen3_asr_audio_encoder")  # fmt: skip
    return _qwen3_omni_encoder(ar, text_hidden)


def _encoder_fields(ar: ConfigReader) -> dict[str, Any]:
    """The Whisper-style audio encoder's shape, as the Qwen audio encoders' configs name it."""
    return {
        "hidden_size": ar.int("d_model"),
        "intermediate_size": ar.int("encoder_ffn_dim"),
        "num_layers": ar.int("encoder_layers"),
        "image_size": 0,
        "patch_size": 0,
        "num_channels": ar.int("num_mel_bins"),
        "num_positions": ar.int("max_source_positions"),
    }


def _qwen3_omni_encoder(ar: ConfigReader, text_hidden: int) -> VisionWeights:
    """``Qwen3OmniMoeAudioEncoder`` on its ``audio_config`` (``ar``): Qwen3-ASR's and Qwen3-Omni's."""
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

    return VisionWeights(
        family="qwen3_asr",
        **_encoder_fields(ar),
        # the heads as num_kv_heads (as many): num_heads names heads vLLM asserts TP divides,
        # which Qwen3OmniMoeAudioAttention does not (disable_tp where TP does not divide them)
        num_kv_heads=ar.int("encoder_attention_heads"),
        projector_input_dim=ar.int("downsample_hidden_size"),
        projector_output_dim=ar.int("output_dim"),
        text_hidden_size=text_hidden,
    )


def _granite_speech(r: ConfigReader, text_hidden: int) -> VisionWeights:
    """Granite Speech's tower as vLLM 0.33 builds it (``granite_speech.py``; Granite Speech Plus's
    ``granite_speech_plus.py`` subclasses it, its encoder only concatenating layers' outputs):
    the CTC encoder on ``encoder_config``: the biased ``input_linear`` (``input_dim`` →
    ``hidden_dim``), ``num_layers`` conformer blocks (two feed-forwards, each a LayerNorm and
    biased up/down projections ``feedforward_mult`` × wide split over TP; the attention's
    LayerNorm, unbiased ``to_q`` and ``to_kv`` and biased ``to_out``, ``dim_head × num_heads``
    wide, and its ``2 · max_pos_emb + 1`` relative positions; the convolution module's LayerNorm,
    biased pointwise ``up_conv`` into twice ``conv_expansion_factor`` × the width, the unbiased
    depthwise ``conv_kernel_size`` convolution, a BatchNorm and the biased ``down_conv``; the
    post-LayerNorm), the biased ``out`` (→ ``output_dim``, column) and ``out_mid`` (row); the
    projector: ``window_size / downsample_rate`` learned queries, the Q-Former on
    ``projector_config`` (BLIP-2's, cross-attending ``encoder_hidden_size`` every
    ``cross_attention_frequency`` layers) and a biased ``nn.Linear`` into the text width. Fields:
    ``head_dim`` the attention head, ``vision_output_dim`` its inner width, ``temporal_patch_size``
    the expansion factor, ``patch_size`` the kernel, ``num_positions`` the relative positions,
    ``projector_output_dim`` ``output_dim``, ``projector_input_dim`` the Q-Former's
    ``encoder_hidden_size``."""
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

    e, q = r.mapping("encoder_config"), r.mapping("projector_config")
    if e is None or q is None:
        raise ConfigError(f"{r.source}: no encoder_config or projector_config: Granite Speech's "
                          "tower is sized from both", code="config-invalid")  # fmt: skip
    er = ConfigReader(e, source=f"{r.source}: encoder_config")
    qr = ConfigReader(q, source=f"{r.source}: projector_config")
    encoder = f"{r.raw.get('model_type')}_encoder"  # granite_speech(_plus)_encoder
    for sub, kind in ((er, encoder), (qr, "blip_2_qformer")):
        got = sub.str("model_type", kind)
        if got != kind:
            raise sub.bad(sub.path("model_type"), got, kind)
    if qr.str("position_embedding_type", "absolute") != "absolute":  # blip2.py refuses others
        raise qr.bad(qr.path("position_embedding_type"), qr.raw.get("position_embedding_type"),
                     "absolute (vLLM 0.33's blip2.py)")  # fmt: skip
    hidden, head = er.int("hidden_dim"), er.int("dim_head")
    return VisionWeights(
        family="granite_speech",
        hidden_size=hidden,
        intermediate_size=hidden * er.int("feedforward_mult"),
        num_layers=er.int("num_layers"),
        image_size=0,
        patch_size=er.int("conv_kernel_size"),
        num_channels=er.int("input_dim"),
        head_dim=head,
        vision_output_dim=head * er.int("num_heads"),
        temporal_patch_size=er.int("conv_expansion_factor"),
        num_positions=2 * er.int("max_pos_emb") + 1,
        projector_output_dim=er.int("output_dim"),
        projector_input_dim=qr.int("encoder_hidden_size"),
        query_tokens=r.int("window_size") // r.int("downsample_rate"),
        qformer_layers=qr.int("num_hidden_layers"),
        qformer_hidden_size=qr.int("hidden_size"),
        qformer_intermediate_size=qr.int("intermediate_size"),
        cross_attention_frequency=qr.int("cross_attention_frequency"),
        text_hidden_size=text_hidden,
    )


#: the config's top-level ``model_type`` → its audio tower's reader
def qwen3_omni_audio(tr: ConfigReader, text_hidden: int) -> VisionWeights:
    """Qwen3-Omni-MoE's audio encoder (``qwen3_omni_moe_thinker.py`` ``Qwen3OmniMoeAudioEncoder``
    on ``thinker_config.audio_config``, ``tr``): Qwen3-ASR's (:func:`_qwen3_asr`)."""
    return _qwen3_omni_encoder(_audio_config(tr, "qwen3_omni_moe_audio_encoder"), text_hidden)


def qwen2_5_omni_audio(tr: ConfigReader, text_hidden: int) -> VisionWeights:
    """Qwen2.5-Omni's audio encoder (``qwen2_5_omni_thinker.py``: transformers'
    ``Qwen2_5OmniAudioEncoder`` on ``thinker_config.audio_config``, ``tr``), whole on every rank:
    two biased convolutions (``num_mel_bins`` → ``d_model`` → the same, kernel 3), every layer
    Whisper's (biased q, v and out, unbiased k, two LayerNorms, a biased fc1/fc2
    ``encoder_ffn_dim`` wide), ``ln_post``, the biased ``proj`` (``d_model`` → ``output_dim``),
    ``audio_bos_eos_token`` (2 rows of ``output_dim``) and the fp32 sinusoid
    ``positional_embedding`` buffer (``max_source_positions`` × ``d_model``)."""
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

    ar = _audio_config(tr, "qwen2_5_omni_audio_encoder")
    return VisionWeights(
        family="qwen2_5_omni_audio",
        **_encoder_fields(ar),
        projector_output_dim=ar.int("output_dim"),
        text_hidden_size=text_hidden,
    )


TOWERS: dict[str, Callable[[ConfigReader, int], VisionWeights]] = {
    "audioflamingo3": _audioflamingo3,
    "glmasr": _glmasr,
    "moss_transcribe_diarize": _moss_transcribe_diarize,
    "qwen3_asr": _qwen3_asr,
    "granite_speech": _granite_speech,
    "granite_speech_plus": _granite_speech,
}
