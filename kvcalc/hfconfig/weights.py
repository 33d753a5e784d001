"""Weight-related dimensions from ``config.json``, for the parameter counter in :mod:`kvcalc.estimate.weights`.

Everything a parameter count needs is read here, through :class:`ConfigReader` (which records
provenance); :mod:`kvcalc.estimate.weights` only does arithmetic on the frozen :class:`WeightShape`.

Per-layer structure is two tuples: ``mixers`` (what mixes tokens: ``attention``, ``mla``, ``mamba2``,
``gated_deltanet`` or ``none``) and ``ffns`` (``dense``, ``moe`` or ``none``). MoE placement follows each
family's transformers config class:

- DeepSeek-V2/V3, Kimi-K2: layer i is MoE when ``i >= first_k_dense_replace`` and
  ``i % moe_layer_freq == 0``;
- Qwen2-MoE/Qwen3-MoE/Qwen3-Next: MoE unless ``i in mlp_only_layers``, and ``(i+1) %
  decoder_sparse_step == 0``;
- Llama 4: ``moe_layers`` if given, else every ``interleave_moe_layer_step``-th layer (dense layers
  use ``intermediate_size_mlp``);
- Nemotron-H: ``E`` in ``hybrid_override_pattern``; Mixtral, gpt-oss and others: every layer.

Multi-token-prediction layers (``num_nextn_predict_layers``, DeepSeek-V3's 14B MTP module) are **not**
built by transformers nor loaded by vLLM without speculative decoding; they are recorded in
``mtp_layers`` and left out of the count.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeGuard

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.moe_router import MoeRouter, read_router
from kvcalc.hfconfig.quant import read_quant_spec
from kvcalc.hfconfig.reader import MAX_DIM, ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights, MlpWeights, MoeWeights, WeightShape

if TYPE_CHECKING:  # the records only some families have, imported where a config has them
    from kvcalc.hfconfig.weight_shape_extra import (
        GdnWeights,
        Mamba1Weights,
        Mamba2Weights,
        MlaWeights,
        ShortConvWeights,
        VisionWeights,
        Zamba2Weights,
    )

#: model types whose MLP is a plain fc -> act -> fc (no gate projection)
_NON_GATED = {"gpt2", "gpt_bigcode", "nemotron_h", "nemotron", "gpt_neox", "gptj", "opt", "bloom",
              "falcon", "phi", "starcoder2", "mpt", "cosmos3_edge_text", "apertus"}  # fmt: skip
#: model types with LayerNorm (weight + bias) instead of RMSNorm
_LAYER_NORM = {"gpt2", "gpt_bigcode", "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi",
               "starcoder2", "mpt", "phimoe", "stablelm", "nemotron"}  # fmt: skip
#: model types with weighted per-head q/k RMSNorm (Llama 4's qk-norm is an unweighted L2 norm)
_QK_NORM = {"qwen3", "qwen3_moe", "qwen3_next", "gemma3", "gemma3_text", "exaone4",
            "qwen3_vl_text", "qwen3_vl_moe_text", "qwen3_5_text", "qwen3_5_moe_text",
            "gemma4_text", "lfm2", "exaone_moe", "afmoe", "lfm2_moe",
            "qwen3_asr_text", "qwen3_omni_moe_text", "apertus"}  # fmt: skip
#: Mamba2 mixers keyed as transformers' Granite-4.0-H / Falcon-H1 configs key them (``mamba_n_heads``...)
_HYBRID_MAMBA2 = {"granitemoehybrid", "falcon_h1", "bamba"}
#: model types whose shared MLP is ``shared_intermediate_size`` wide (0: none)
_GRANITE_SHARED = {"granitemoehybrid", "granitemoeshared", "granitemoe_swa"}
#: Granite with sliding windows and attention sinks (``families/granite_swa.py``)
_GRANITE_SWA = {"granite_swa", "granitemoe_swa"}
#: model types whose q_proj also emits a sigmoid output gate (Qwen3-Next, Qwen3.5/3.6)
_OUTPUT_GATE = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "afmoe", "muse_glimmer_text"}
#: model types with four norms per decoder layer (pre/post attention, pre/post feed-forward)
_FOUR_NORMS = {"gemma2", "gemma3", "gemma3_text", "gemma4_text", "glm4", "glm4v_text", "afmoe",
               "glm_ocr_text", "muse_glimmer_text"}  # fmt: skip
#: model types with one norm per decoder layer (Cohere's parallel attention and MLP block, GPT-J's)
_ONE_NORM = {"nemotron_h", "cohere", "cohere2", "gptj", "cohere2_moe", "mamba", "falcon_mamba",
             "mamba2", "zamba2"}  # fmt: skip
#: pure Mamba model types (``families/mamba.py``): a norm and a mixer per layer, no feed-forward
_PURE_MAMBA = {"mamba", "falcon_mamba", "mamba2"}
#: transformers' default ``tie_word_embeddings`` per config class when the key is absent
_TIE_DEFAULT = {
    "gemma": True, "gemma2": True, "gemma3": True, "gemma3_text": True, "gpt2": True,
    "gpt_bigcode": True, "llama": False, "llama4": False, "llama4_text": False, "mistral": False,
    "mixtral": False, "qwen2": False, "qwen2_moe": False, "qwen3": False, "qwen3_moe": False,
    "qwen3_next": False, "deepseek_v2": False, "deepseek_v3": False, "kimi_k2": False,
    "gpt_oss": False, "nemotron_h": False, "phi3": False, "lfm2": True, "glm": False,
    "glm4": False, "glm4_moe": False, "cohere": True, "cohere2": True, "granite": False,
    "granitemoe": False, "granitemoeshared": False, "chatglm": False, "hyperclovax": False, "step3_text": False, "afmoe": False, "olmo2": False, "olmoe": False, "exaone4": False, "ernie4_5": True, "ernie4_5_moe": True, "seed_oss": False,
    "stablelm": False, "dbrx": False, "falcon": True, "gptj": False, "opt": True,
    "nemotron": False, "ministral3": False, "glm4_moe_lite": False,
    "exaone_moe": False, "cohere2_moe": True,
    "phimoe": False, "qwen2_vl": False, "qwen2_vl_text": False, "glm4v_text": False,
    "glm4v_moe_text": False, "glm_ocr_text": False,
    "granite_swa": True, "granitemoe_swa": False, "mamba": True, "falcon_mamba": True, "mamba2": False,
    "bloom": True, "apertus": False,
}  # fmt: skip
#: model types whose q/k/v projections carry a bias while o_proj does not
#: model types whose router keys (``scoring_func``, ``n_group``, ...) are read
_DEEPSEEK_ROUTER = {"deepseek_v2", "deepseek_v3", "kimi_k2"}
#: model types whose MoE layers keep an fp32 ``e_score_correction_bias`` in vLLM 0.33, and the
#: config key that switches it (None: always): ``deepseek_v2.py`` (``topk_method`` ``noaux_tc``,
#: also GLM-5 and DeepSeek-V3.2), ``glm4_moe.py`` (and ``glm4_moe_lite.py``), ``mimo_v2.py``,
#: ``nemotron_h.py``, ``minimax_m2.py`` (``use_routing_bias``), ``lfm2_moe.py`` (``use_expert_bias``)
_SCORE_BIAS: dict[str, str | None] = {
    "deepseek_v2": "topk_method", "deepseek_v3": "topk_method", "kimi_k2": "topk_method",
    "deepseek_v32": "topk_method", "glm_moe_dsa": "topk_method", "glm4_moe": None,
    "glm4_moe_lite": None, "glm4v_moe_text": None,
    "mimo_v2": None, "mimo_v2_flash": None, "nemotron_h": None,
    "minimax_m2": "use_routing_bias", "lfm2_moe": "use_expert_bias",
}  # fmt: skip
#: model types whose MoE router vLLM 0.33 builds in fp32 (``GateLinear(...,
#: params_dtype=torch.float32)``), and the config key that can say otherwise (None: always):
#: ``glm4_moe.py`` (also ``glm4_moe_lite.py``'s ``Glm4MoeLite``), ``minimax_m2.py``, ``mimo_v2.py``
#: (``moe_router_dtype``, default ``float32``;
#: ``bfloat16``/``float16`` keep the model dtype); ERNIE 4.5 MoE's is set in its family module.
#: DeepSeek's ``moe_router_dtype`` (``_get_moe_router_dtype``) sets the output dtype only.
_FP32_ROUTER: dict[str, str | None] = {
    "glm4_moe": None, "glm4_moe_lite": None, "glm4v_moe_text": None, "minimax_m2": None,
    "mimo_v2": "moe_router_dtype",
    "mimo_v2_flash": "moe_router_dtype",
}  # fmt: skip
#: Gemma-3n's per-layer MLPs, AltUp, LAuReL and per-layer embeddings (``families/gemma3n.py``)
_GEMMA3N = ("gemma3n", "gemma3n_text")
#: MiMo-V2's per-type attention, MoE layers and RoPE caches (``families/mimo_v2.py``)
_MIMO_V2 = ("mimo_v2", "mimo_v2_flash")
_QKV_BIAS_ONLY = {
    "qwen2",
    "qwen2_moe",
    "qwen2_vl",
    "qwen2_vl_text",
    "qwen2_5_vl",
    "qwen2_5_omni_text",
}
#: model types whose q/k/v bias is ``attention_bias`` (this default when absent) and o_proj has none
#: (GLM-4.1V's text stack, ``glm4v_text``: vLLM's ``glm4.py`` reads ``getattr(config,
#: "attention_bias", False)`` and Glm4vTextConfig sets none; GLM-4.5V's Glm4vMoeTextConfig: true)
_QKV_BIAS_KEYED = {"glm": True, "glm4": True, "glm4_moe": False, "glm4v_text": False,
                   "glm4v_moe_text": True, "glm_ocr_text": False}  # fmt: skip
#: model types whose ``use_bias`` puts a bias on q/k/v/o and the MLP (ERNIE 4.5)
_USE_BIAS = {"ernie4_5", "ernie4_5_moe"}
#: model types whose per-head q/k RMSNorm is switched by ``use_qk_norm`` (GLM-4.5's)
_QK_NORM_KEYED = {"glm4_moe", "glm4v_moe_text"}
#: model types whose q/k RMSNorm spans all heads: a heads × head_dim weight (OLMo-2, OLMoE)
_QK_NORM_FULL = {"olmo2", "olmoe", "olmo_hybrid"}
#: ... whose norms vLLM 0.33 keeps whole on every rank (``olmo_hybrid.py``, ``olmoe.py``)
_QK_NORM_WHOLE = {"olmoe", "olmo_hybrid"}
#: model types whose ``use_qk_norm`` norms span all heads: a (heads, head_dim) weight (Command-R+)
_QK_NORM_FULL_KEYED = {"minimax_m2", "cohere"}
#: transformers' (and vLLM's rope_parameters.setdefault) partial_rotary_factor when a config has none
_PARTIAL_ROTARY_DEFAULT = {"glm": 0.5, "glm4": 0.5, "glm4_moe": 0.5, "chatglm": 0.5,
                           "glm4v_text": 0.5, "glm4v_moe_text": 0.5, "glm_ocr_text": 0.5}  # fmt: skip
_ALWAYS_BIASED = {"gpt2", "gpt_bigcode", "bloom"}
#: model types with a LayerNorm right after the word embedding (BLOOM's ``word_embeddings_layernorm``)
_EMBEDDING_NORM = {"bloom"}
#: learned scalars of each layer's MLP activation (Apertus's xIELU: ``alpha_p`` and ``alpha_n``)
_ACTIVATION_PARAMS = {"apertus": 2}
#: model types whose attention has no rotary embedding (learned positions, or Mamba-carried order;
#: Falcon's ``alibi`` neither)
_NO_ROPE = {"gpt2", "gpt_bigcode", "nemotron_h", "opt"}
#: vLLM's ``get_rope(mrope_positions_factor=4)`` default, the rows an MRoPE cache has per position
MROPE_POSITIONS_FACTOR = 4
#: model types whose vLLM model file passes ``mrope_positions_factor`` 1 (``qwen3_vl.py``'s
#: ``mrope_positions_factor``: 4 only with video pruning, which kvcalc refuses as not modelled)
_MROPE_POSITIONS_ONE = ("qwen3_vl", "qwen3_5")
#: model types whose attention and MLP carry biases as one key says
_BIAS_KEY = {"falcon": "bias", "opt": "enable_bias", "chatglm": "add_bias_linear"}
#: model types whose RoPE length is another key (vLLM passes it as max_position)
_ROPE_LENGTH_KEY = {"gptj": "n_positions", "dbrx": "max_seq_len", "chatglm": "seq_length",
                    "step3_text": "max_position_embedding"}  # fmt: skip


def read_weight_shape(r: ConfigReader, *, num_layers: int, kinds: tuple[str, ...]) -> WeightShape:
    """The weight dimensions; never raises, so a config that sizes the KV cache still parses.

    A config lacking what a parameter count needs yields a shape whose ``problem`` says why;
    :func:`kvcalc.estimate.weights.weight_bytes` then refuses with that message.
    """
    try:
        return _read(r, num_layers, kinds)
    except ConfigError as exc:
        return WeightShape(num_layers=num_layers, hidden_size=0, vocab_size=0, problem=exc.message)


def _read(r: ConfigReader, num_layers: int, kinds: tuple[str, ...]) -> WeightShape:
    model_type = str(r.str("model_type", "") or "")
    if model_type == "whisper":  # an encoder-decoder: its own inventory (families/whisper.py)
        from kvcalc.hfconfig.families.whisper import whisper_weights

        whisper = whisper_weights(r)
        return WeightShape(
            model_type=model_type, num_layers=whisper.decoder_layers, hidden_size=whisper.d_model,
            vocab_size=whisper.vocab_size, tie_word_embeddings=True, norm="layer",
            whisper=whisper, vision_encoder=True,
        )  # fmt: skip
    hidden = r.int("hidden_size", "n_embd", "d_model", default=0, minimum=0)
    notes: list[str] = []
    mixers = tuple(_mixer(r, kind) for kind in kinds)
    both = L.PARALLEL in mixers  # Falcon-H1: attention and Mamba2 side by side in every layer
    attention = _attention(r, model_type, hidden) if "attention" in mixers or both else None
    global_attention, dsv4, extra_rope = None, None, 0
    if model_type == "deepseek_v4":
        from kvcalc.hfconfig.families.deepseek_v4 import dsv4_weights

        dsv4 = dsv4_weights(r, num_layers)
        mixers = ("dsv4",) * num_layers
        attention = None
    if model_type == "gemma4_text":
        from kvcalc.hfconfig.families.gemma4 import gemma4_global

        global_attention = gemma4_global(r, _attention(r, model_type, hidden))
        from kvcalc.hfconfig.families.gemma4 import gemma4_global_rope_values

        extra_rope = gemma4_global_rope_values(r, global_attention.head_dim)
        mixers = tuple(
            "attention_global" if k == L.FULL else m for k, m in zip(kinds, mixers, strict=True)
        )
    if model_type in _MIMO_V2:
        from kvcalc.hfconfig.families.mimo_v2 import mimo_v2_attention

        attention, global_attention = mimo_v2_attention(r)
        mixers = tuple(
            "attention_global" if k == L.FULL else m for k, m in zip(kinds, mixers, strict=True)
        )
    if model_type == "hy_v3" and attention:
        from kvcalc.hfconfig.families.hy_v3 import hy_v3_qk_norm

        attention = replace(attention, qk_norm=hy_v3_qk_norm(r))
    laguna = None
    if model_type == "laguna":
        from kvcalc.hfconfig.families.laguna import laguna_weights

        laguna = laguna_weights(r, num_layers, hidden)
        mixers = laguna[1]
    step3p5 = None
    if model_type == "step3p5":
        from kvcalc.hfconfig.families.step3p5 import step3p5_weights

        step3p5 = step3p5_weights(r, num_layers)
        attention, global_attention, mixers = step3p5[:3]
    gemma3n = None
    if model_type in _GEMMA3N:  # the MLP, AltUp, LAuReL and q-only shared layers in the mixer
        from kvcalc.hfconfig.families.gemma3n import gemma3n_weights

        gemma3n = gemma3n_weights(r, num_layers)
        mixers = ("gemma3n",) * num_layers
    mla = _mla(r) if "mla" in mixers else None
    moe, moe_flags = _moe(r, model_type, num_layers)
    kda = None
    if model_type == "kimi_linear":
        from kvcalc.hfconfig.families.kimi_linear import kda_weights, kimi_moe

        kda, moe = kda_weights(r), kimi_moe(r, moe)
    ffns = ("none",) * num_layers if gemma3n else _ffns(r, model_type, num_layers, moe_flags)
    ngram = None
    if model_type == "gemma4_text" and moe:  # the MoE block beside every layer's dense MLP
        ffns = ("dense+moe",) * num_layers
    if model_type == "longcat_flash":  # every layer an MLP, the even ones also the MoE
        from kvcalc.hfconfig.families.longcat_flash import longcat_ngram

        ffns = tuple("dense+moe" if flag else "dense" for flag in moe_flags)
        ngram = longcat_ngram(r, hidden)
    mlp = _mlp(r, model_type) if "dense" in ffns or "dense+moe" in ffns else None
    tie = _tie(r, model_type, notes)
    mtp = r.int("num_nextn_predict_layers", default=0, minimum=0)
    if mtp:
        notes.append(
            f"{mtp} MTP layer(s) in the checkpoint are not counted (transformers and vLLM "
            "without speculative decoding do not load them)"
        )
    # DeepSeek-V4 rotates a qk_rope_head_dim slice of each head (its rope cache is that wide)
    rope_heads = (AttentionWeights(num_heads=1, num_kv_heads=1, head_dim=r.int("qk_rope_head_dim"))
                  if dsv4 else attention)  # fmt: skip
    positions, rotary = _rope_cache(r, model_type, rope_heads, mla)
    if step3p5:
        positions = step3p5[5]
    if laguna:
        positions, rotary, extra_rope = laguna[2:5]
    if model_type == "muse_glimmer_text":
        from kvcalc.hfconfig.families.muse_glimmer import muse_glimmer_uses_rope

        positions = positions if muse_glimmer_uses_rope(r) else 0
    if gemma3n:
        from kvcalc.hfconfig.families.gemma3n import gemma3n_rope_rows

        positions = gemma3n_rope_rows(r, num_layers)
    if model_type in _MIMO_V2:
        from kvcalc.hfconfig.families.mimo_v2 import mimo_v2_rope_caches

        positions *= mimo_v2_rope_caches(r)
    norm, final_norm = ("layer" if model_type in _LAYER_NORM else "rms"), True
    if model_type == "chatglm":
        from kvcalc.hfconfig.families.chatglm import chatglm_norms

        norm, final_norm = chatglm_norms(r)
    return WeightShape(
        model_type=model_type,
        num_layers=num_layers,
        hidden_size=hidden,
        vocab_size=_vocab(r, model_type),
        intermediate_size=0
        if gemma3n
        else r.int("intermediate_size", "n_inner", "ffn_hidden_size", default=0, minimum=0),
        tie_word_embeddings=tie,
        lm_head_bias=(model_type == "phimoe" and r.bool("lm_head_bias")) or model_type == "gptj",
        learned_positions=_learned_positions(r, model_type),
        norm=norm,
        norms_per_layer=_norms_per_layer(r, model_type),
        final_norm=final_norm,
        embedding_norm=model_type in _EMBEDDING_NORM,
        activation_params=_ACTIVATION_PARAMS.get(model_type, 0),
        mixers=mixers,
        ffns=ffns,
        attention=attention,
        global_attention=global_attention,
        layer_attention=laguna[0] if laguna else (),
        mla=mla,
        dsv4=dsv4,
        mlp=mlp,
        moe=moe,
        gemma3n=gemma3n,
        mamba2=_mamba2(r, model_type, hidden)
        if L.MAMBA2 in mixers or both or L.ZAMBA2_HYBRID in mixers
        else None,
        zamba2=_zamba2(r, mixers, hidden) if L.ZAMBA2_HYBRID in mixers else None,
        gdn=_gdn(r) if L.GDN in mixers else None,
        kda=kda,
        ngram=ngram,
        mamba1=_mamba1(r, model_type, hidden) if L.MAMBA1 in mixers else None,
        short_conv=_short_conv(r) if L.SHORT_CONV in mixers else None,
        vision=(
            _vision(r, model_type, hidden, notes)
            if r.has("vision_config")
            or r.has("audio_config")
            or r.has("thinker_config")  # Qwen3-ASR's audio_config beside its text_config
            or r.has("encoder_config")  # Granite Speech's audio encoder
            or _tower_elsewhere(r)
            or r.has("vit_config")
            else None
        ),
        # a multimodal encoder: a vision tower, or Qwen2-Audio's audio tower (audio_config)
        vision_encoder=(
            r.has("vision_config")
            or r.raw.get("model_type") == "qwen2_audio"
            or (bool(_AUDIO_KEYS & set(r.raw)) and _audio_tower(r))
            or _tower_elsewhere(r)
            or (r.raw.get("model_type") == "bagel" and r.has("vit_config"))
        ),
        quantization=read_quant_spec(r),
        mtp_layers=mtp,
        rope_cache_positions=positions,
        rotary_dim=rotary,
        extra_rope_values=extra_rope,
        notes=tuple(notes),
    )


def _vocab(r: ConfigReader, model_type: str) -> int:
    if model_type == "chatglm":
        from kvcalc.hfconfig.families.chatglm import chatglm_vocab

        return chatglm_vocab(r)
    return r.int("vocab_size", default=0, minimum=0)


def _learned_positions(r: ConfigReader, model_type: str) -> int:
    if model_type in _ALWAYS_BIASED:
        return r.int("n_positions", default=0, minimum=0)
    if model_type == "opt":  # OPTLearnedPositionalEmbedding: 2 rows of offset
        if r.int("word_embed_proj_dim", default=0, minimum=0) not in (0, r.int("hidden_size")):
            raise ConfigError(
                f"{r.source}: OPT with word_embed_proj_dim != hidden_size (project_in/out): its "
                "weights are not counted from config.json",
                hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
            )
        return r.int("max_position_embeddings", default=2048) + 2
    return 0


def _norms_per_layer(r: ConfigReader, model_type: str) -> int:
    if model_type == "falcon":
        from kvcalc.hfconfig.families.falcon import falcon_norms

        return falcon_norms(r)
    if model_type == "hyperclovax":
        from kvcalc.hfconfig.families.hyperclovax import hyperclovax_norms

        return hyperclovax_norms(r)
    if model_type in _GEMMA3N:  # Gemma's four and post_per_layer_input_norm
        return 5
    if model_type == "axk1":  # AXK1.py builds post_mlp_layernorm in every layer
        return 3
    return 4 if model_type in _FOUR_NORMS else 1 if model_type in _ONE_NORM else 2


def _mixer(r: ConfigReader, kind: str) -> str:
    if kind == L.UNCOUNTED:
        raise ConfigError(
            f"{r.source}: the weights of model_type {r.str('model_type', '')!r} are not counted "
            "from config.json (its layers' mixers, MoE or gates are not modelled for weights)",
            hint="pass --kv-cache-memory, or plan from a Hub id or folder with safetensors files",
        )
    if kind in (L.FULL, L.SLIDING, L.CHUNKED):
        return "mla" if r.has("kv_lora_rank") else "attention"
    if kind in (L.MAMBA1, L.MAMBA2, L.GDN, L.SHORT_CONV, L.PARALLEL, L.KDA, L.ZAMBA2_HYBRID):
        return kind
    return "none"


def _class_attention_defaults(r: ConfigReader, model_type: str, heads: int) -> tuple[int, int]:
    """(num_key_value_heads, head_dim) where config.json omits them: the config class's fixed
    defaults (:func:`kvcalc.hfconfig.class_defaults.class_default`, the ones the layouts read),
    else the query heads and 0 (``hidden_size / heads``); only read where the key is absent."""
    from kvcalc.hfconfig.class_defaults import class_default

    kv = (
        None
        if r.has("n_head_kv") or r.has("num_key_value_heads")
        else class_default(r, "num_key_value_heads")
    )
    width = None if r.has("head_dim") else class_default(r, "head_dim")
    return kv or heads, width or 0


def _attention(r: ConfigReader, model_type: str, hidden: int) -> AttentionWeights:
    heads = r.int("num_attention_heads", "n_head", "num_heads", "n_heads")
    if model_type == "dbrx":
        from kvcalc.hfconfig.families.dbrx import dbrx_attention

        return dbrx_attention(r, heads, hidden)
    if model_type == "chatglm":
        from kvcalc.hfconfig.families.chatglm import chatglm_attention

        return chatglm_attention(r, heads, hidden)
    if model_type == "step3_text":
        from kvcalc.hfconfig.families.step3_text import step3_attention

        return step3_attention(r, heads)
    if model_type in _BIAS_KEY:
        bias = r.bool(_BIAS_KEY[model_type], model_type == "opt")  # OPTConfig: enable_bias true
        if model_type == "falcon":
            from kvcalc.hfconfig.families.falcon import falcon_kv_heads

            kv = falcon_kv_heads(r, heads)
        else:
            kv = heads
        return AttentionWeights(
            num_heads=heads, num_kv_heads=kv, head_dim=hidden // heads, qkv_bias=bias, o_bias=bias
        )
    if model_type == "gptj":
        kv = heads
    elif r.bool("multi_query"):
        kv = 1
    else:
        kv = r.int("n_head_kv", "num_key_value_heads",
                   default=_class_attention_defaults(r, model_type, heads)[0])  # fmt: skip
    head_width = _class_attention_defaults(r, model_type, heads)[1]
    head_dim = r.int("head_dim", default=head_width, minimum=0) or hidden // heads
    if model_type in _ALWAYS_BIASED:
        qkv_bias = o_bias = True
    elif model_type in _QKV_BIAS_ONLY:
        qkv_bias, o_bias = True, False
    elif model_type in _USE_BIAS:
        qkv_bias = o_bias = r.bool("use_bias")
    elif model_type == "seed_oss":  # q/k/v and o_proj keyed apart (modeling_seed_oss.py)
        qkv_bias, o_bias = r.bool("attention_bias"), r.bool("attention_out_bias")
    elif model_type == "stablelm":  # use_qkv_bias; o_proj unbiased (modeling_stablelm.py)
        qkv_bias, o_bias = r.bool("use_qkv_bias"), False
    elif model_type in _QKV_BIAS_KEYED:
        qkv_bias, o_bias = r.bool("attention_bias", _QKV_BIAS_KEYED[model_type]), False
    else:
        qkv_bias = o_bias = r.bool("attention_bias")
    sinks = model_type == "gpt_oss"
    if model_type in _GRANITE_SWA:
        from kvcalc.hfconfig.families.granite_swa import granite_swa_sinks

        sinks = granite_swa_sinks(r)
    return AttentionWeights(
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        qkv_bias=qkv_bias,
        o_bias=o_bias,
        qk_norm=model_type in _QK_NORM or (model_type in _QK_NORM_KEYED and r.bool("use_qk_norm")),
        output_gate=model_type in _OUTPUT_GATE,
        sinks=sinks,
        qk_norm_full=model_type in _QK_NORM_FULL
        or (model_type in _QK_NORM_FULL_KEYED and r.bool("use_qk_norm")),
        qk_norm_whole=model_type in _QK_NORM_WHOLE,
    )


def _mla(r: ConfigReader) -> MlaWeights:
    from kvcalc.hfconfig.weight_shape_extra import MlaWeights

    return MlaWeights(
        num_heads=r.int("num_attention_heads"),
        q_lora_rank=r.int("q_lora_rank", default=0, minimum=0),
        kv_lora_rank=r.int("kv_lora_rank"),
        qk_nope_head_dim=r.int("qk_nope_head_dim"),
        qk_rope_head_dim=r.int("qk_rope_head_dim"),
        v_head_dim=r.int("v_head_dim"),
        index_n_heads=r.int("index_n_heads", default=0, minimum=0),
        index_head_dim=r.int("index_head_dim", default=0, minimum=0),
    )


def _mamba2(r: ConfigReader, model_type: str, hidden: int) -> Mamba2Weights:
    if model_type == "mamba2":
        from kvcalc.hfconfig.families.mamba import mamba2_weights as pure_mamba2

        return pure_mamba2(r, hidden)
    if model_type == "zamba2":
        from kvcalc.hfconfig.families.zamba2 import zamba2_mamba2

        return zamba2_mamba2(r, hidden)
    from kvcalc.hfconfig.weights_mixers import granite_mamba2, mamba2_weights

    return granite_mamba2(r, hidden) if model_type in _HYBRID_MAMBA2 else mamba2_weights(r)


def _zamba2(r: ConfigReader, mixers: tuple[str, ...], hidden: int) -> Zamba2Weights:
    from kvcalc.hfconfig.families.zamba2 import zamba2_weights

    return zamba2_weights(r, mixers, hidden)


def _gdn(r: ConfigReader) -> GdnWeights:
    from kvcalc.hfconfig.weights_mixers import gdn_weights

    return gdn_weights(r)


#: the keys an audio tower of :mod:`~kvcalc.hfconfig.weights_aud2` is read from
_AUDIO_KEYS = {"audio_config", "thinker_config", "encoder_config"}


def _audio_tower(r: ConfigReader) -> bool:
    """An audio tower :mod:`~kvcalc.hfconfig.weights_aud2` reads (Audio Flamingo 3's, GLM-ASR's,
    MOSS Transcribe-Diarize's, Qwen3-ASR's, Granite Speech's), or an Omni thinker's beside its
    vision tower."""
    from kvcalc.hfconfig.weights_aud2 import TOWERS

    return r.raw.get("model_type") in TOWERS or r.raw.get("model_type") in (
        "qwen2_5_omni", "qwen3_omni_moe")  # fmt: skip


def _tower_elsewhere(r: ConfigReader) -> bool:
    """A tower without a ``vision_config`` (Phi-3-Vision's: :mod:`~kvcalc.hfconfig.weights_mmremote`)."""
    from kvcalc.hfconfig.weights_mmremote import TOWERS

    return r.raw.get("model_type") in TOWERS


def _vision(
    r: ConfigReader, model_type: str, hidden: int, notes: list[str]
) -> VisionWeights | None:
    from kvcalc.hfconfig.weights_vision import read_vision

    return read_vision(r, model_type, hidden, notes)


def _mamba1(r: ConfigReader, model_type: str, hidden: int) -> Mamba1Weights:
    if model_type in _PURE_MAMBA:
        from kvcalc.hfconfig.families.mamba import mamba1_weights

        return mamba1_weights(r, hidden)
    from kvcalc.hfconfig.families.jamba import jamba_mamba1  # the family owns its weight shapes

    return jamba_mamba1(r, hidden)


def _short_conv(r: ConfigReader) -> ShortConvWeights:
    from kvcalc.hfconfig.families.lfm2 import lfm2_short_conv  # the family owns its weight shapes

    return lfm2_short_conv(r)


def _moe(r: ConfigReader, model_type: str, n: int) -> tuple[MoeWeights | None, tuple[bool, ...]]:
    if model_type == "aria_text":
        from kvcalc.hfconfig.families.aria import aria_moe

        return aria_moe(r, n)
    if model_type == "ernie4_5_moe":
        from kvcalc.hfconfig.families.ernie4_5_moe import ernie_moe

        return ernie_moe(r, n)
    if model_type == "dbrx":
        from kvcalc.hfconfig.families.dbrx import dbrx_moe

        return dbrx_moe(r, n)
    if model_type == "step3_text":
        from kvcalc.hfconfig.families.step3_text import step3_moe

        return step3_moe(r, n)
    if model_type == "afmoe":
        from kvcalc.hfconfig.families.afmoe import afmoe_moe

        return afmoe_moe(r, n)
    if model_type == "longcat_flash":
        from kvcalc.hfconfig.families.longcat_flash import longcat_moe

        return longcat_moe(r, n)
    if model_type == "step3p5":
        from kvcalc.hfconfig.families.step3p5 import step3p5_weights

        return step3p5_weights(r, n)[3:5]
    if model_type == "hy_v3":
        from kvcalc.hfconfig.families.hy_v3 import hy_v3_moe

        return hy_v3_moe(r, n)
    if model_type == "gemma4_text":
        from kvcalc.hfconfig.families.gemma4 import gemma4_moe

        return gemma4_moe(r, n)
    if model_type == "laguna":
        from kvcalc.hfconfig.families.laguna import laguna_moe

        return laguna_moe(r, n)
    experts = r.int("n_routed_experts", "num_experts", "num_local_experts", default=0, minimum=0)
    if not experts:
        if model_type == "granitemoehybrid":  # only the shared MLP then: not counted
            raise ConfigError(
                f"{r.source}: Granite-4.0-H without routed experts: its weights are not counted "
                "from config.json",
                hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
            )
        return None, (False,) * n
    if model_type == "nemotron_h":
        pattern = r.str("hybrid_override_pattern") or ""
        flags = tuple(c == "E" for c in pattern[:n])
    elif model_type == "jamba":
        from kvcalc.hfconfig.families.jamba import jamba_moe_layers

        flags = jamba_moe_layers(r, n, experts)
    elif model_type == "axk1":
        from kvcalc.hfconfig.families.axk1 import axk1_moe_layers

        flags = axk1_moe_layers(r, n)
    elif model_type == "lfm2_moe":
        from kvcalc.hfconfig.families.lfm2 import lfm2_moe_layers

        flags = lfm2_moe_layers(r, n)
    elif model_type in _MIMO_V2:
        from kvcalc.hfconfig.families.mimo_v2 import mimo_v2_moe_layers

        flags = mimo_v2_moe_layers(r, n)
    elif r.list("mlp_layer_types") is not None:  # Cohere2-MoE, K-EXAONE, GLM-4.7-Flash
        kinds = r.list("mlp_layer_types") or []
        flags = tuple(i < len(kinds) and kinds[i] == "sparse" for i in range(n))
    elif r.has("first_k_dense_replace") or r.has("moe_layer_freq"):
        first = r.int("first_k_dense_replace", default=0, minimum=0)
        freq = r.int("moe_layer_freq", default=1)
        flags = tuple(i >= first and i % freq == 0 for i in range(n))
    elif r.has("decoder_sparse_step") or r.has("mlp_only_layers"):
        step = r.int("decoder_sparse_step", default=1)
        dense = set(r.index_list("mlp_only_layers") or ())
        flags = tuple(i not in dense and (i + 1) % step == 0 for i in range(n))
    elif r.has("moe_layers") or r.has("interleave_moe_layer_step"):
        listed = r.index_list("moe_layers")
        step = r.int("interleave_moe_layer_step", default=1)
        chosen = set(listed) if listed is not None else set(range(step - 1, n, step))
        flags = tuple(i in chosen for i in range(n))
    else:
        flags = (True,) * n
    expert_size = r.int("moe_intermediate_size", default=0, minimum=0) or r.int("intermediate_size")
    shared, gate = 0, False
    if r.has("shared_expert_intermediate_size"):
        shared, gate = r.int("shared_expert_intermediate_size", minimum=0), True
    elif r.has("moe_shared_expert_intermediate_size"):
        shared = r.int("moe_shared_expert_intermediate_size") * r.int("n_shared_experts", default=1)
    elif model_type in _GRANITE_SHARED and r.has("shared_intermediate_size"):
        shared = r.int("shared_intermediate_size", minimum=0)  # shared_mlp: input 2×, output 1×
    elif r.has("n_shared_experts"):
        shared = r.int("n_shared_experts", minimum=0) * expert_size
    elif r.has("num_shared_experts"):  # Cohere2-MoE, K-EXAONE
        shared = r.int("num_shared_experts", minimum=0) * expert_size
    elif model_type.startswith("llama4"):
        shared = expert_size  # one shared expert as wide as a routed one
    moe = MoeWeights(
        num_experts=experts,
        experts_per_token=r.int("num_experts_per_tok", "experts_per_token", "moe_topk", default=1),
        expert_intermediate_size=expert_size,
        gated=model_type not in _NON_GATED,
        expert_bias=model_type == "gpt_oss",
        router_bias=model_type == "gpt_oss",
        shared_intermediate_size=shared,
        shared_expert_gate=gate,
        latent_size=r.int("moe_latent_size", default=0, minimum=0),
        router=read_router(r) if model_type in _DEEPSEEK_ROUTER else MoeRouter(),
        score_bias=_score_bias(r, model_type),
        router_fp32=_router_fp32(r, model_type),
    )
    return moe, flags


def _router_fp32(r: ConfigReader, model_type: str) -> bool:
    if model_type not in _FP32_ROUTER:
        return False
    key = _FP32_ROUTER[model_type]
    # vLLM's str_dtype_to_torch_dtype: "float"/"float32" -> fp32, "half"/"float16"/"bfloat16" ->
    # that dtype, anything else -> None (the model dtype)
    return key is None or r.str(key, "float32") in ("float32", "float")


def _score_bias(r: ConfigReader, model_type: str) -> bool:
    if model_type == "axk1":  # AXK1.py: getattr(config, "topk_method", "noaux_tc")
        return r.str("topk_method", "noaux_tc") == "noaux_tc"
    if model_type not in _SCORE_BIAS:
        return False
    key = _SCORE_BIAS[model_type]
    if key is None:
        return True
    if key == "topk_method":
        return r.str(key, "") == "noaux_tc"
    return r.bool(key)


def _ffns(r: ConfigReader, model_type: str, n: int, moe_flags: tuple[bool, ...]) -> tuple[str, ...]:
    if model_type in _PURE_MAMBA or model_type == "zamba2":  # no feed-forward of the layer's own
        return ("none",) * n
    if model_type == "nemotron_h":  # one block per layer: '-' is an MLP, 'E' an MoE, M/* neither
        pattern = r.str("hybrid_override_pattern") or ""
        return tuple({"E": "moe", "-": "dense"}.get(c, "none") for c in pattern[:n])
    return tuple("moe" if flag else "dense" for flag in moe_flags)


def _mlp(r: ConfigReader, model_type: str) -> MlpWeights:
    if model_type.startswith("llama4"):
        size = r.int("intermediate_size_mlp", "intermediate_size")
    elif model_type == "lfm2":
        from kvcalc.hfconfig.families.lfm2 import lfm2_ffn

        size = lfm2_ffn(r)
    else:
        size = r.int("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim", default=0,
                     minimum=0)  # fmt: skip
        if not size:  # gpt2 and GPT-J leave n_inner null: 4 x hidden
            size = 4 * r.int("hidden_size", "n_embd", "d_model")
    if model_type in _BIAS_KEY:
        bias = r.bool(_BIAS_KEY[model_type], model_type == "opt")
    else:
        bias = (
            model_type in _ALWAYS_BIASED
            or model_type == "gptj"
            or r.bool("use_bias" if model_type in _USE_BIAS else "mlp_bias")
        )
    return MlpWeights(intermediate_size=size, gated=model_type not in _NON_GATED, bias=bias)


def _tie(r: ConfigReader, model_type: str, notes: list[str]) -> bool:
    if r.prefix == "text_config." and isinstance(r.raw.get("tie_word_embeddings"), bool):
        # vLLM 0.33 VllmConfig.with_hf_config: for a multimodal model the language model's config
        # takes the top-level tie_word_embeddings (transformers 5 keeps it on the class that sees
        # both layers); a text_config saying otherwise is overridden
        tie = bool(r.raw["tie_word_embeddings"])
        r.used["tie_word_embeddings"] = tie
        text = r.text.get("tie_word_embeddings")
        if isinstance(text, bool) and text != tie:
            notes.append(f"tie_word_embeddings {str(tie).lower()} (the top level; vLLM's "
                         f"with_hf_config overrides text_config's {str(text).lower()})")  # fmt: skip
        return tie
    if r.has("tie_word_embeddings"):
        return r.bool("tie_word_embeddings")
    if model_type == "lfm2" and r.has("tie_embedding"):  # Lfm2Config's own spelling
        return r.bool("tie_embedding")
    default = _TIE_DEFAULT.get(model_type, True)
    notes.append(
        f"no tie_word_embeddings in config: {str(default).lower()}, transformers' default "
        f"for model_type {model_type or '(none)'}"
    )
    return default


def _rope_cache(r: ConfigReader, model_type: str, attention: AttentionWeights | None,
                mla: MlaWeights | None) -> tuple[int, int]:  # fmt: skip
    """Rows and width of vLLM's RoPE cos/sin cache (``max_position × rotary_dim``).

    Worked example: Qwen3-0.6B caches 40,960 × 128 values in bf16 = 10 MiB, which is why vLLM logs
    "Model loading took 1.1201 GiB" for 1.1102 GiB of parameters (vllm-24577).
    """
    if model_type in _NO_ROPE or (attention is None and mla is None):
        return 0, 0
    if model_type == "falcon" and r.bool("alibi"):
        return 0, 0
    positions = r.int(_ROPE_LENGTH_KEY.get(model_type, "max_position_embeddings"), default=0,
                      minimum=0)  # fmt: skip
    if model_type == "gptj":  # rotary on rotary_dim of each head (gpt_j.py)
        return positions, r.int("rotary_dim", default=attention.head_dim if attention else 0)
    rope = r.mapping("rope_scaling") or r.mapping("rope_parameters") or {}
    factor = rope.get("factor")
    kind = rope.get("rope_type", rope.get("type"))
    if kind == "yarn" and _is_factor(factor):
        base = rope.get("original_max_position_embeddings")
        positions = int((base if _is_length(base) else positions) * factor)
    elif kind in ("longrope", "su"):
        # vLLM's Phi3LongRoPEScaledRotaryEmbedding keeps a short cache (original_max_position_embeddings
        # rows) and a long one (max_position_embeddings rows) side by side
        base = rope.get("original_max_position_embeddings",
                        r.value("original_max_position_embeddings"))  # fmt: skip
        positions += base if _is_length(base) else 0
    elif kind == "linear" and _is_factor(factor):
        # vLLM's LinearScalingRotaryEmbedding caches max_position × factor rows; its
        # DynamicNTKScalingRotaryEmbedding only max_position (vLLM 0.33's
        # dynamic_ntk_scaling_rope.py: torch.arange(self.max_position_embeddings), whatever its
        # stale comment says), recorded: InternVL3-1B's Qwen2 (dynamic, factor 2) in
        # multimodal_weights_internvl.json
        positions = int(positions * factor)
    if (
        isinstance(rope.get("mrope_section"), list)
        and kind in (None, "default", "mrope", "yarn")
        and not model_type.startswith(_MROPE_POSITIONS_ONE)
    ):
        # MRotaryEmbedding (vLLM 0.33 mrope.py) caches max_position × positions_factor rows: 4
        # (get_rope's default; Qwen2.5-VL's video positions outrun the tokens) unless the model
        # file passes its own (qwen3_vl.py, qwen3_5.py: 1 without video pruning).
        # Qwen2.5-VL-7B: 128,000 × 4 × 128 × 2 B = 131,072,000 B, recorded
        positions *= MROPE_POSITIONS_FACTOR
    if r.has("rope_local_base_freq"):
        # Gemma 3: sliding layers get their own unscaled RoPE (vLLM gemma3.py, one cache per layer
        # type). Gemma 3 27B: 131,072 × 8 + 131,072 rows × 128 × 2 B = 288 MiB with the weights
        positions += r.int("max_position_embeddings", default=0, minimum=0)
    if mla is not None:
        return positions, mla.qk_rope_head_dim
    assert attention is not None  # without MLA weights there are attention weights (see above)
    # vLLM's get_rope reads the factor from rope_parameters, where transformers'
    # standardize_rope_params moves a top-level one (setdefault: a nested factor wins)
    default = _PARTIAL_ROTARY_DEFAULT.get(model_type, 1.0)
    if model_type == "minimax_m2" and r.has("rotary_dim"):
        # minimax_m2.py: partial_rotary_factor = rotary_dim / head_dim unless rope_parameters has one
        default = r.int("rotary_dim", minimum=1) / attention.head_dim
    partial = rope.get("partial_rotary_factor", r.value("partial_rotary_factor", default))
    partial = partial if isinstance(partial, (int, float)) and 0 < partial <= 1 else 1.0
    return positions, int(attention.head_dim * partial)


def _is_factor(value: Any) -> TypeGuard[float]:
    """A RoPE scaling factor kvcalc multiplies by: a finite number in (0, 10^6)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e6


def _is_length(value: Any) -> TypeGuard[int]:
    """A position count: an int from 1 to the reader's bound (``MAX_DIM * 1024``)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_DIM * 1024
