"""Tensors of the audio towers :mod:`kvcalc.hfconfig.weights_aud2` reads, for
:mod:`kvcalc.estimate.vision_tensors`; their buffers (:func:`tower_buffer_bytes`) beside them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kvcalc.estimate.tensor_base import Tensor, _linear
from kvcalc.hfconfig.weight_shape_extra import VisionWeights

_FP32_BYTES = 4
_INT64_BYTES = 8
#: the projector :func:`kvcalc.estimate.vision_tensors._qwen2_audio` ends with (Qwen2-Audio's)
_QWEN2_AUDIO_PROJECTOR = "multi_modal_projector.linear"
#: the name every tensor of a second tower (:attr:`VisionWeights.companion`) starts with
COMPANION_PREFIX = "audio_tower."


def _audioflamingo3(v: VisionWeights, whisper: list[Tensor]) -> list[Tensor]:
    """Audio Flamingo 3 (``audioflamingo3.py``): Qwen2-Audio's encoder, whole (``whisper``:
    :func:`kvcalc.estimate.vision_tensors._qwen2_audio`'s tensors for ``v``, given by the caller,
    which this module does not import), then ``linear_1`` and ``linear_2``, whole: see
    :func:`kvcalc.hfconfig.weights_aud2._audioflamingo3`."""
    out = [t for t in whisper if not t.name.startswith(_QWEN2_AUDIO_PROJECTOR)]
    h, p = v.text_hidden_size, "multi_modal_projector"
    out += _linear(f"{p}.linear_1", h, v.hidden_size, None, "replicated", bias=v.projector_bias)
    return out + _linear(f"{p}.linear_2", h, h, None, "replicated", bias=v.projector_bias)


def _split_encoder(v: VisionWeights, p: str, heads: int, kv_heads: int) -> list[Tensor]:
    """The TP-split encoder GLM-ASR's and vLLM's ``WhisperEncoder`` share: the two biased
    convolutions (mel bins → width → width, kernel 3), whole; per layer the biased
    ``QKVParallelLinear`` (``heads`` and ``kv_heads`` of width / heads), the biased output
    projection (row) and fc1/fc2 (column, row), two LayerNorms; the final LayerNorm."""
    d, ffn = v.hidden_size, v.intermediate_size
    head = d // heads
    out = _linear(f"{p}.conv1", d, v.num_channels * 3, None, "replicated", bias=True)
    out += _linear(f"{p}.conv2", d, d * 3, None, "replicated", bias=True)
    for i in range(v.num_layers):
        q = f"{p}.layers.{i}"
        out += _linear(f"{q}.self_attn.q_proj", heads * head, d, None, "kv", bias=True,
                       heads=heads)  # fmt: skip
        for proj in ("k_proj", "v_proj"):
            out += _linear(f"{q}.self_attn.{proj}", kv_heads * head, d, None, "kv", bias=True,
                           heads=kv_heads)  # fmt: skip
        out += _linear(f"{q}.self_attn.o_proj", d, d, None, "row", bias=True)
        out += _linear(f"{q}.mlp.fc1", ffn, d, None, "column", bias=True)
        out += _linear(f"{q}.mlp.fc2", d, ffn, None, "row", bias=True)
        out.append(Tensor(name=f"{q}.layernorms", rows=d, copies=4, role="norm"))
    out.append(Tensor(name=f"{p}.norm", rows=d, copies=2, role="norm"))
    return out


def _glmasr(v: VisionWeights, whisper: list[Tensor]) -> list[Tensor]:
    """GLM-ASR (``glmasr.py``): see :func:`kvcalc.hfconfig.weights_aud2._glmasr` (``whisper``
    unused: its layers are vLLM's own, split over TP)."""
    out, ffn = _split_encoder(v, "audio_tower", v.num_heads, v.num_kv_heads), v.intermediate_size
    m, h = "multi_modal_projector", v.text_hidden_size
    out += _linear(f"{m}.linear_1", 2 * h, ffn, None, "column", bias=True)
    return out + _linear(f"{m}.linear_2", h, 2 * h, None, "row", bias=True)


def _moss_transcribe_diarize(v: VisionWeights, whisper: list[Tensor]) -> list[Tensor]:
    """MOSS Transcribe-Diarize (``moss_transcribe_diarize.py``): vLLM's ``WhisperEncoder`` with
    its position rows, then the ``vq_adaptor``: see
    :func:`kvcalc.hfconfig.weights_aud2._moss_transcribe_diarize` (``whisper`` unused)."""
    d, p, h = v.hidden_size, "whisper_encoder", v.text_hidden_size
    out = _split_encoder(v, p, v.num_heads, v.num_heads)
    out.append(Tensor(name=f"{p}.embed_positions", rows=v.num_positions, cols=d, role="position"))
    out += _linear("vq_adaptor.layers.0", h, v.projector_input_dim, None, "replicated", bias=True)
    out += _linear("vq_adaptor.layers.2", h, h, None, "replicated", bias=True)
    return out + [Tensor(name="vq_adaptor.layers.3", rows=h, copies=2, role="norm")]


def _qwen3_asr(v: VisionWeights, whisper: list[Tensor]) -> list[Tensor]:
    """Qwen3-ASR (``qwen3_asr.py``, ``Qwen3OmniMoeAudioEncoder``): see
    :func:`kvcalc.hfconfig.weights_aud2._qwen3_asr` (``whisper`` unused); the encoder's layers
    split over TP only where TP divides the heads (``disable_tp``: whole otherwise)."""
    d, p, c = v.hidden_size, "audio_tower", v.projector_input_dim
    out: list[Tensor] = []
    for i, cin in enumerate((1, c, c), start=1):
        out += _linear(f"{p}.conv2d{i}", c, cin * 9, None, "replicated", bias=True)
    freq = (((v.num_channels + 1) // 2 + 1) // 2 + 1) // 2
    out += _linear(f"{p}.conv_out", d, c * freq, None, "replicated")
    heads = v.num_kv_heads  # the heads (num_heads 0: no TP check, vLLM keeps them whole)
    layers = _split_encoder(v, p, heads, heads)
    out += [replace(t, split_if_divides=heads) for t in layers if ".layers." in t.name]
    out.append(Tensor(name=f"{p}.ln_post", rows=d, copies=2, role="norm"))
    out += _linear(f"{p}.proj1", d, d, None, "replicated", bias=True)
    return out + _linear(f"{p}.proj2", v.projector_output_dim, d, None, "replicated", bias=True)


def _granite_speech(v: VisionWeights, whisper: list[Tensor]) -> list[Tensor]:
    """Granite Speech (``granite_speech.py``): see
    :func:`kvcalc.hfconfig.weights_aud2._granite_speech` (``whisper`` unused)."""
    h, ffn, inner, p = v.hidden_size, v.intermediate_size, v.vision_output_dim, "encoder"
    conv = h * v.temporal_patch_size
    out = _linear(f"{p}.input_linear", h, v.num_channels, None, "replicated", bias=True)
    for i in range(v.num_layers):
        b = f"{p}.layers.{i}"
        for ff in ("ff1", "ff2"):
            out.append(Tensor(name=f"{b}.{ff}.pre_norm", rows=h, copies=2, role="norm"))
            out += _linear(f"{b}.{ff}.up_proj", ffn, h, None, "column", bias=True)
            out += _linear(f"{b}.{ff}.down_proj", h, ffn, None, "row", bias=True)
        out.append(Tensor(name=f"{b}.attn.pre_norm", rows=h, copies=2, role="norm"))
        out += _linear(f"{b}.attn.to_q", inner, h, None, "replicated")
        out += _linear(f"{b}.attn.to_kv", 2 * inner, h, None, "replicated")
        out += _linear(f"{b}.attn.to_out", h, inner, None, "replicated", bias=True)
        out.append(Tensor(name=f"{b}.attn.rel_pos_emb", rows=v.num_positions, cols=v.head_dim,
                          role="position"))  # fmt: skip
        out.append(Tensor(name=f"{b}.conv.norm", rows=h, copies=2, role="norm"))
        out += _linear(f"{b}.conv.up_conv", 2 * conv, h, None, "replicated", bias=True)
        out += _linear(f"{b}.conv.depth_conv.conv", conv, v.patch_size, None, "replicated")
        # BatchNorm1d: weight, bias and the running mean and variance (buffers in the model dtype)
        out.append(Tensor(name=f"{b}.conv.batch_norm", rows=conv, copies=4, role="norm"))
        out += _linear(f"{b}.conv.down_conv", h, conv, None, "replicated", bias=True)
        out.append(Tensor(name=f"{b}.post_norm", rows=h, copies=2, role="norm"))
    out += _linear(f"{p}.out", v.projector_output_dim, h, None, "column", bias=True)
    out += _linear(f"{p}.out_mid", h, v.projector_output_dim, None, "row", bias=True)
    qh, qi, kv = v.qformer_hidden_size, v.qformer_intermediate_size, v.projector_input_dim
    out.append(Tensor(name="projector.query", rows=v.query_tokens, cols=qh, role="vector"))
    out.append(Tensor(name="projector.qformer.layernorm", rows=qh, copies=2, role="norm"))
    for i in range(v.qformer_layers):  # blip2.py's Blip2QFormerLayer, as BLIP-2's
        q = f"projector.qformer.encoder.layer.{i}"
        kinds = ["attention"] + (["crossattention"] if i % v.cross_attention_frequency == 0 else [])
        for kind in kinds:
            width = kv if kind == "crossattention" else qh
            out += _linear(f"{q}.{kind}.attention.query", qh, qh, None, "replicated", bias=True)
            out += _linear(f"{q}.{kind}.attention.key", qh, width, None, "replicated", bias=True)
            out += _linear(f"{q}.{kind}.attention.value", qh, width, None, "replicated", bias=True)
            out += _linear(f"{q}.{kind}.output.dense", qh, qh, None, "replicated", bias=True)
            out.append(Tensor(name=f"{q}.{kind}.output.LayerNorm", rows=qh, copies=2, role="norm"))
        out += _linear(f"{q}.intermediate_query.dense", qi, qh, None, "replicated", bias=True)
        out += _linear(f"{q}.output_query.dense", qh, qi, None, "replicated", bias=True)
        out.append(Tensor(name=f"{q}.output_query.LayerNorm", rows=qh, copies=2, role="norm"))
    return out + _linear("projector.linear", v.text_hidden_size, qh, None, "replicated", bias=True)


def qwen2_5_omni_audio_tensors(a: VisionWeights) -> list[Tensor]:
    """Qwen2.5-Omni's audio encoder (see :func:`kvcalc.hfconfig.weights_aud2.qwen2_5_omni_audio`),
    whole on every rank."""
    d, ffn, p = a.hidden_size, a.intermediate_size, COMPANION_PREFIX[:-1]
    out = _linear(f"{p}.conv1", d, a.num_channels * 3, None, "replicated", bias=True)
    out += _linear(f"{p}.conv2", d, d * 3, None, "replicated", bias=True)
    for i in range(a.num_layers):
        q = f"{p}.layers.{i}"
        for name, bias in (
            ("q_proj", True),
            ("k_proj", False),
            ("v_proj", True),
            ("out_proj", True),
        ):
            out += _linear(f"{q}.self_attn.{name}", d, d, None, "replicated", bias=bias)
        out.append(Tensor(name=f"{q}.layer_norms", rows=d, copies=4, role="norm"))
        out += _linear(f"{q}.fc1", ffn, d, None, "replicated", bias=True)
        out += _linear(f"{q}.fc2", d, ffn, None, "replicated", bias=True)
    out.append(Tensor(name=f"{p}.ln_post", rows=d, copies=2, role="norm"))
    out += _linear(f"{p}.proj", a.projector_output_dim, d, None, "replicated", bias=True)
    out.append(Tensor(name=f"{p}.audio_bos_eos_token", rows=2, cols=a.projector_output_dim,
                      role="vector"))  # fmt: skip
    return out


def companion_tensors(a: VisionWeights) -> list[Tensor]:
    """The tensors of a second tower (:attr:`VisionWeights.companion`): Qwen2.5-Omni's audio
    encoder, or Qwen3-Omni-MoE's (Qwen3-ASR's), all named under :data:`COMPANION_PREFIX`."""
    if a.family == "qwen2_5_omni_audio":
        return qwen2_5_omni_audio_tensors(a)
    return TOWER_TENSORS[a.family](a, [])


def tower_buffer_bytes(v: VisionWeights) -> int:
    """GLM-ASR's ``GlmAsrEncoderRotaryEmbedding.inv_freq``: fp32, ``arange(0, dim, 2)`` of the
    rotary width (64 B for ``GlmAsrConfig()``'s 32, recorded); Qwen3-ASR's fp32 sinusoid table;
    Granite Speech's int64 ``num_batches_tracked`` per conformer block; the others keep none."""
    if v.family == "granite_speech":  # each BatchNorm1d's int64 num_batches_tracked
        return v.num_layers * _INT64_BYTES
    if v.family == "qwen3_asr":  # SinusoidsPositionEmbedding: an fp32 positions × width table
        return v.num_positions * v.hidden_size * _FP32_BYTES
    if v.family == "qwen2_5_omni_audio":  # Qwen2.5-Omni's encoder's sinusoids, the same
        return v.num_positions * v.hidden_size * _FP32_BYTES
    return len(range(0, v.head_dim, 2)) * _FP32_BYTES if v.family == "glmasr" else 0


#: ``VisionWeights.family`` → its tensors, from Qwen2-Audio's encoder for the same tower
TOWER_TENSORS: dict[str, Callable[[VisionWeights, list[Tensor]], list[Tensor]]] = {
    "audioflamingo3": _audioflamingo3,
    "glmasr": _glmasr,
    "moss_transcribe_diarize": _moss_transcribe_diarize,
    "qwen3_asr": _qwen3_asr,
    "granite_speech": _granite_speech,
}
