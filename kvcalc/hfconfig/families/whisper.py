"""Whisper (``WhisperForConditionalGeneration``): an encoder-decoder; the decoder caches its own
tokens and the encoder's output.

vLLM 0.33 ``models/whisper.py``: each of the ``decoder_layers`` decoder layers has a self-attention
(``Attention``, a ``FullAttentionSpec``) and a cross-attention over the encoder's output
(``CrossAttention``, a ``CrossAttentionSpec``), both ``decoder_attention_heads`` heads of
``d_model / decoder_attention_heads`` (KV as many; it raises when the division leaves a remainder
and asserts TP divides the heads); the encoder's ``encoder_layers`` run ``MMEncoderAttention``,
which caches nothing. A request's encoder emits ``max_source_positions`` tokens (1,500 for 30 s
of audio: ``get_num_audio_tokens``); the decoder's length is ``max_target_positions`` (448).
``num_hidden_layers`` and ``num_attention_heads`` in a Whisper config are the *encoder's*
(transformers' ``attribute_map``, which the family declares): vLLM checks the TP size against
those heads; the cache reads the decoder's keys. So kvcalc's layers are the decoder's
self-attention layers, then their cross-attention layers (``own_layer_count``).
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import WhisperWeights
from kvcalc.model.cross_attention import CrossAttention
from kvcalc.model.layouts import FullAttention, Layout


def whisper_decoder(r: ConfigReader) -> tuple[int, int, int]:
    """(decoder layers, decoder heads, head width) as ``WhisperDecoderLayer`` builds them."""
    layers = r.int("decoder_layers")
    heads = r.int("decoder_attention_heads")
    width = r.int("d_model")
    if width % heads:
        raise ConfigError(
            f"{r.source}: d_model {width} is not divisible by decoder_attention_heads {heads} "
            "(vLLM's WhisperAttention raises: embed_dim must be divisible by num_heads)",
            code="config-invalid",
        )
    return layers, heads, width // heads


def whisper_weights(r: ConfigReader) -> WhisperWeights:
    """The weight shape (``estimate/whisper_tensors.py`` lays out its tensors): the encoder's
    two biased convolutions (``num_mel_bins`` → ``d_model`` → ``d_model``, kernel 3), its
    ``max_source_positions`` position table, ``encoder_layers`` layers and a final LayerNorm; the
    decoder's token embedding (the head, ``proj_out``, tied to it), its ``max_target_positions``
    positions, ``decoder_layers`` layers with a self- and a cross-attention, a final LayerNorm."""
    return WhisperWeights(
        d_model=r.int("d_model"),
        num_mel_bins=r.int("num_mel_bins"),
        vocab_size=r.int("vocab_size"),
        encoder_layers=r.int("encoder_layers"),
        encoder_heads=r.int("encoder_attention_heads"),
        encoder_ffn=r.int("encoder_ffn_dim"),
        decoder_layers=r.int("decoder_layers"),
        decoder_heads=r.int("decoder_attention_heads"),
        decoder_ffn=r.int("decoder_ffn_dim"),
        source_positions=r.int("max_source_positions"),
        target_positions=r.int("max_target_positions"),
    )


def read_whisper(r: ConfigReader, ctx: LayoutContext) -> list[Layout]:
    layers, heads, head = whisper_decoder(r)
    # vLLM checks TP against num_attention_heads, the encoder's (attribute_map), and whisper.py
    # asserts it divides the decoder's too
    ctx.query_heads.add(heads)
    encoder_tokens = r.int("max_source_positions")
    prov = ctx.provenance
    prov["num_layers"] = (
        f"{r.path('decoder_layers')} = {layers} decoder layers, each a self-attention and a "
        f"cross-attention cache ({r.path('encoder_layers')} encoder layers cache nothing)"
    )
    prov["num_kv_heads"] = f"{r.path('decoder_attention_heads')} = {heads} (whisper.py: MHA)"
    prov["head_dim"] = f"d_model / decoder_attention_heads = {head}"
    prov["cross-attention"] = (
        f"{r.path('max_source_positions')} = {encoder_tokens} encoder tokens per request "
        "(whisper.py get_num_audio_tokens)"
    )
    own = FullAttention(dtype=ctx.dtype, kv_heads=heads, k_dim=head, v_dim=head)
    cross = CrossAttention(dtype=ctx.dtype, kv_heads=heads, head_dim=head,
                           encoder_tokens=encoder_tokens)  # fmt: skip
    return [own] * layers + [cross] * layers


FAMILIES = (
    Family(
        name="whisper",
        model_types={"whisper"},
        architectures={"WhisperForConditionalGeneration"},
        keys={
            "decoder_layers",
            "decoder_attention_heads",
            "decoder_ffn_dim",
            "max_target_positions",
            "is_encoder_decoder",
            "scale_embedding",
        },
        layouts=read_whisper,
        own_layer_count=True,
        # transformers' WhisperConfig.attribute_map (vLLM's ModelConfig reads these names)
        attribute_map=(
            ("num_hidden_layers", "encoder_layers"),
            ("num_attention_heads", "encoder_attention_heads"),
            ("hidden_size", "d_model"),
        ),
        note="Whisper: per decoder layer a self-attention and a cross-attention cache "
        "(vLLM 0.33 whisper.py)",
    ),
)
