"""Vision-tower tensors (all on the first pipeline stage), for :mod:`kvcalc.estimate.tensors`.

Names follow transformers' modules; counts equal transformers' meta-device builds (tests/test_weights.py).
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.estimate import aud2_tensors, mmremote_tensors
from kvcalc.estimate.tensor_base import Tensor, _linear, _mlp
from kvcalc.hfconfig.weight_shape import MlpWeights
from kvcalc.hfconfig.weight_shape_extra import VisionWeights


def vision_tensors(v: VisionWeights) -> list[Tensor]:
    """The vision encoder and projector (all on the first pipeline stage)."""
    if v.family == "siglip":
        return [replace(t, vision=True) for t in _siglip(v)]
    if v.family == "pixtral":
        return [replace(t, vision=True) for t in _pixtral(v)]
    if v.family == "qwen3_vl":
        return [replace(t, vision=True) for t in _qwen3_vl(v)]
    if v.family == "qwen2_5_vl":
        return [replace(t, vision=True) for t in _qwen2_5_vl(v)]
    if v.family in ("qwen2_5_omni", "qwen3_omni"):  # the Omni thinkers: and the audio encoder
        tower = _qwen2_5_vl(v) if v.family == "qwen2_5_omni" else _qwen3_vl(v)
        audio = aud2_tensors.companion_tensors(v.companion) if v.companion else []
        return [replace(t, vision=True) for t in tower + audio]
    if v.family == "hcx_vision_v2":  # hyperclovax_vision_v2.py: then mm_projector, whole
        out = _qwen2_5_vl(v) + _linear("mm_projector", v.text_hidden_size, v.projector_output_dim,
                                       None, "replicated", bias=True)  # fmt: skip
        return [replace(t, vision=True) for t in out]
    if v.family == "qwen2_vl":
        return [replace(t, vision=True) for t in _qwen2_vl(v)]
    if v.family == "exaone4_5":
        return [replace(t, vision=True) for t in _qwen_vl_tower(v, layer_norm=False)]
    if v.family == "glm4v":
        return [replace(t, vision=True) for t in _glm4v(v)]
    if v.family == "glm_ocr":
        return [replace(t, vision=True) for t in _glm_ocr(v)]
    if v.family == "llava":
        return [replace(t, vision=True) for t in _llava(v)]
    if v.family == "cohere2_vision":
        return [replace(t, vision=True) for t in _cohere2_vision(v)]
    if v.family == "aria":
        return [replace(t, vision=True) for t in _aria(v)]
    if v.family == "cosmos3_edge":  # cosmos3_edge.py: SigLIP2, then the patch merger
        out = _siglip_whole(v, "visual.encoder")
        m, inner = "visual.projector", v.projector_output_dim
        out.append(Tensor(name=f"{m}.norm", rows=v.hidden_size, copies=2, role="norm"))
        out += _linear(f"{m}.linear_fc1", inner, v.projector_input_dim, None, "column", bias=True)
        out += _linear(f"{m}.linear_fc2", v.text_hidden_size, inner, None, "row", bias=True)
        return [replace(t, vision=True) for t in out]
    if v.family == "idefics3":
        return [replace(t, vision=True) for t in _idefics3(v)]
    if v.family == "lfm2_vl":
        return [replace(t, vision=True) for t in _lfm2_vl(v)]
    if v.family == "internvl":
        return [replace(t, vision=True) for t in _internvl(v)]
    if v.family == "intern_vit":
        return [replace(t, vision=True) for t in _intern_vit(v)]
    if v.family == "qwen2_audio":
        return [replace(t, vision=True) for t in _qwen2_audio(v)]
    if v.family == "eva2clip":
        return [replace(t, vision=True) for t in _eva2clip(v)]
    if v.family == "kimi_vl":
        return [replace(t, vision=True) for t in _kimi_vl(v)]
    if v.family == "blip2":
        return [replace(t, vision=True) for t in _blip2(v)]
    if v.family == "step3_vl":
        return [replace(t, vision=True) for t in _step3_vl(v)]
    if v.family == "minicpmv":
        return [replace(t, vision=True) for t in _minicpmv(v)]
    if v.family == "paddleocr_vl":  # paddleocr_vl.py: SigLIP whole, then mlp_AR (whole)
        out = _siglip_whole(v, "visual.vision_model")
        m, merged = "mlp_AR", v.projector_input_dim
        out.append(Tensor(name=f"{m}.pre_norm", rows=v.hidden_size, copies=2, role="norm"))
        out += _linear(f"{m}.linear_1", merged, merged, None, "replicated", bias=True)
        out += _linear(f"{m}.linear_2", v.text_hidden_size, merged, None, "replicated", bias=True)
        return [replace(t, vision=True) for t in out]
    if v.family == "paligemma":
        out = _siglip_whole(v, "vision_tower.vision_model")  # paligemma.py: SiglipVisionModel whole
        out += _linear("multi_modal_projector.linear", v.projector_output_dim, v.hidden_size, None,
                       "replicated", bias=True)  # fmt: skip
        return [replace(t, vision=True) for t in out]
    if v.family == "gemma4":
        return [replace(t, vision=True) for t in _gemma4(v)]
    if v.family in aud2_tensors.TOWER_TENSORS:  # audio towers (aud2_tensors.py)
        return [
            replace(t, vision=True)
            for t in aud2_tensors.TOWER_TENSORS[v.family](v, _qwen2_audio(v))
        ]
    if v.family in mmremote_tensors.TOWER_TENSORS:  # remote-code towers (mmremote_tensors.py)
        tensors = mmremote_tensors.TOWER_TENSORS[v.family](v, _llava(v))
        return [replace(t, vision=True) for t in tensors]
    if v.family == "muse_glimmer":
        from kvcalc.estimate.mmmla_tensors import muse_glimmer_tensors

        return [replace(t, vision=True) for t in muse_glimmer_tensors(v)]
    if v.family == "bagel":
        from kvcalc.estimate.mmmla_tensors import bagel_tensors

        tower = _siglip_whole(v, "vit_model.vision_model")
        return [replace(t, vision=True) for t in bagel_tensors(v, tower)]
    hv, p = v.hidden_size, "vision_model"
    patches = (v.image_size // v.patch_size) ** 2
    out = [
        Tensor(name=f"{p}.class_embedding", rows=hv, role="vector"),
        Tensor(name=f"{p}.positional_embedding", rows=patches + 1, cols=hv, role="position"),
        Tensor(name=f"{p}.patch_embedding", rows=hv, cols=v.num_channels * v.patch_size**2,
               role="linear", split="column"),
        Tensor(name=f"{p}.layernorm_pre_post", rows=hv, copies=4, role="norm"),
    ]  # fmt: skip
    out += _encoder(v, f"{p}.layers", "self_attn", "o_proj", "mlp", "layernorms", bias=True)
    shuffled = int(hv / v.pixel_shuffle_ratio**2)
    out += _linear(f"{p}.adapter.fc1", v.projector_input_dim, shuffled, None, "column")
    out += _linear(f"{p}.adapter.fc2", v.projector_output_dim, v.projector_input_dim, None, "row")
    out += _linear(
        "multi_modal_projector",
        v.text_hidden_size,
        v.vision_output_dim,
        None,
        "column",
        bias=v.projector_bias,
    )
    return [replace(t, vision=True) for t in out]


def _siglip(v: VisionWeights) -> list[Tensor]:
    """SigLIP (Gemma 3): biased attention and fc1/fc2 MLP, LayerNorms, a learned position table, and
    Gemma 3's projector (one vision × text matrix and an RMSNorm)."""
    hv, p = v.hidden_size, "vision_tower.vision_model"
    out = [
        Tensor(name=f"{p}.embeddings.patch_embedding", rows=hv, cols=v.num_channels * v.patch_size**2,
               role="linear", split="column"),
        Tensor(name=f"{p}.embeddings.patch_embedding.bias", rows=hv, role="bias"),
        Tensor(name=f"{p}.embeddings.position_embedding", rows=(v.image_size // v.patch_size) ** 2, cols=hv,
               role="position"),
        Tensor(name=f"{p}.post_layernorm", rows=hv, copies=2, role="norm"),
    ]  # fmt: skip
    out += _encoder(
        v, f"{p}.encoder.layers", "self_attn", "out_proj", "mlp", "layer_norms", bias=True
    )
    out.append(Tensor(name="multi_modal_projector.mm_input_projection_weight", rows=v.text_hidden_size,
                      cols=hv, role="linear"))  # fmt: skip
    out.append(Tensor(name="multi_modal_projector.mm_soft_emb_norm", rows=hv, role="norm"))
    return out


def _pixtral(v: VisionWeights) -> list[Tensor]:
    """Pixtral (Mistral 3): unbiased attention, gated MLP, RMSNorms, no position table (2D RoPE);
    Mistral 3's projector: RMSNorm, patch merger (``n² · h → h``), two linear layers."""
    hv, p, h = v.hidden_size, "vision_tower", v.text_hidden_size
    # vLLM 0.33 pixtral.py: the patch convolution (Conv2dLayer) is whole on every rank
    out = [
        Tensor(name=f"{p}.patch_conv", rows=hv, cols=v.num_channels * v.patch_size**2, role="linear"),
        Tensor(name=f"{p}.ln_pre", rows=hv, role="norm"),
    ]  # fmt: skip
    out += _encoder(v, f"{p}.transformer.layers", "attention", "o_proj", "feed_forward", "norms",
                    norm_copies=2, gated=True)  # fmt: skip
    m = "multi_modal_projector"
    out.append(Tensor(name=f"{m}.norm", rows=hv, role="norm"))
    out += _linear(
        f"{m}.patch_merger.merging_layer", hv, hv * v.spatial_merge_size**2, None, "replicated"
    )
    out += _linear(f"{m}.linear_1", h, hv, None, "column", bias=v.projector_bias)
    out += _linear(f"{m}.linear_2", h, h, None, "row", bias=v.projector_bias)
    return out


def _qwen3_vl(v: VisionWeights) -> list[Tensor]:
    """Qwen3-VL's tower (Qwen3.5/3.6 too): a 3D patch embedding (``C × T × P × P``, biased), a learned
    position table, LayerNorm blocks with a fused biased qkv and fc1/fc2 MLP, the patch merger
    (LayerNorm, ``hv·m² → hv·m² → text``), and one merger per DeepStack layer (its LayerNorm on
    ``hv·m²``)."""
    hv, p = v.hidden_size, "model.visual"
    merged = hv * v.spatial_merge_size**2
    patch = v.num_channels * v.temporal_patch_size * v.patch_size**2
    out = _linear(f"{p}.patch_embed.proj", hv, patch, None, "replicated", bias=True)  # Conv3dLayer
    out.append(Tensor(name=f"{p}.pos_embed", rows=v.num_positions, cols=hv, role="position"))
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=False, bias=True)
    for i in range(v.num_layers):
        q = f"{p}.blocks.{i}"
        out.append(Tensor(name=f"{q}.norms", rows=hv, copies=4, role="norm"))  # 2 LayerNorms
        out += _linear(f"{q}.attn.qkv", 3 * hv, hv, None, "column", bias=True)
        out += _linear(f"{q}.attn.proj", hv, hv, None, "row", bias=True)
        out += _mlp(block, hv, f"{q}.mlp", None)
    mergers = [("merger", hv)] + [(f"deepstack_merger_list.{i}", merged)
                                  for i in range(v.deepstack_layers)]  # fmt: skip
    for name, norm_width in mergers:
        out.append(Tensor(name=f"{p}.{name}.norm", rows=norm_width, copies=2, role="norm"))
        out += _linear(f"{p}.{name}.linear_fc1", merged, merged, None, "column", bias=True)
        out += _linear(f"{p}.{name}.linear_fc2", v.projector_output_dim, merged, None, "row",
                       bias=True)  # fmt: skip
    return out


def _qwen2_5_vl(v: VisionWeights) -> list[Tensor]:
    """Qwen2.5-VL's tower: an unbiased 3D patch embedding (``C × T × P × P``), RMSNorm blocks (two
    per layer) with a fused biased qkv and a biased gated MLP, no position table (2D RoPE), and the
    patch merger (RMSNorm on ``hv``, ``hv·m² → hv·m² → text``). vLLM shards the linear layers like
    the text model's (qkv, gate/up and the merger's first layer by columns, proj, down and the
    merger's second by rows); the convolution and the norms are whole on every rank."""
    return _qwen_vl_tower(v, layer_norm=False)


def _qwen2_vl(v: VisionWeights) -> list[Tensor]:
    """Qwen2-VL's tower as vLLM 0.33 builds it (``qwen2_vl.py`` ``Qwen2VisionTransformer``): an
    unbiased 3D patch embedding, LayerNorm blocks (two per layer, weight and bias) with a fused
    biased qkv and a biased fc1/fc2 MLP ``embed_dim × mlp_ratio`` wide, no position table, and the
    patch merger (LayerNorm on ``embed_dim``, ``hv·m² → hv·m² → hidden_size``). qkv, fc1 and the
    merger's first layer split by columns, proj, fc2 and its second by rows."""
    return _qwen_vl_tower(v, layer_norm=True)


def _qwen_vl_tower(v: VisionWeights, *, layer_norm: bool) -> list[Tensor]:
    """The Qwen2-VL / Qwen2.5-VL tower: with LayerNorms (weight and bias) and an fc1/fc2 MLP
    (Qwen2-VL), or with RMSNorms and a gated MLP (Qwen2.5-VL, EXAONE 4.5); the rest is the same.
    EXAONE 4.5's attention is grouped-query (``exaone4_5.py`` ``QKVParallelLinear`` with
    ``num_kv_heads``): q by columns, k and v by their heads (whole on every rank past them)."""
    hv, p = v.hidden_size, "visual"
    merged = hv * v.spatial_merge_size**2
    patch = v.num_channels * v.temporal_patch_size * v.patch_size**2
    norm_copies = 2 if layer_norm else 1  # a LayerNorm has a bias beside its weight
    out = _linear(f"{p}.patch_embed.proj", hv, patch, None, "replicated")
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=not layer_norm, bias=True)
    for i in range(v.num_layers):
        q = f"{p}.blocks.{i}"
        out.append(Tensor(name=f"{q}.norms", rows=hv, copies=2 * norm_copies, role="norm"))
        if v.num_kv_heads and v.num_kv_heads != v.num_heads:
            kv = v.num_kv_heads * v.head_dim
            out += _linear(f"{q}.attn.qkv.q", hv, hv, None, "column", bias=True)
            out += _linear(f"{q}.attn.qkv.kv", 2 * kv, hv, None, "kv", bias=True,
                           heads=v.num_kv_heads)  # fmt: skip
        else:
            out += _linear(f"{q}.attn.qkv", 3 * hv, hv, None, "column", bias=True)
        out += _linear(f"{q}.attn.proj", hv, hv, None, "row", bias=True)
        out += _mlp(block, hv, f"{q}.mlp", None)
    out.append(Tensor(name=f"{p}.merger.ln_q", rows=hv, copies=norm_copies, role="norm"))
    out += _linear(f"{p}.merger.mlp.0", merged, merged, None, "column", bias=True)
    out += _linear(f"{p}.merger.mlp.2", v.projector_output_dim, merged, None, "row", bias=True)
    return out


def _glm4v(v: VisionWeights) -> list[Tensor]:
    """GLM-4.1V's and GLM-4.5V's tower as vLLM 0.33 builds it (``glm4_1v.py``
    ``Glm4vVisionTransformer``): a biased 3D patch embedding, a learned position table
    (``(image_size / patch_size)²`` rows), RMSNorm blocks (two per layer) with an unbiased fused
    qkv and an unbiased gated MLP ``out_hidden_size`` wide, the post-conv and post-block RMSNorms,
    the ``m × m`` downsampling convolution (biased, ``hv → out``) and the patch merger (``out → out``
    projection, a LayerNorm, a gated MLP ``intermediate_size`` wide). qkv, gate/up and the
    merger's projection split by columns, proj and down by rows; the convolutions, the position
    table and the norms are whole on every rank."""
    hv, p, out_w = v.hidden_size, "visual", v.projector_output_dim
    patch = v.num_channels * v.temporal_patch_size * v.patch_size**2
    out = _linear(f"{p}.patch_embed.proj", hv, patch, None, "replicated", bias=True)
    out.append(Tensor(name=f"{p}.embeddings.position_embedding", rows=v.num_positions, cols=hv,
                      role="position"))  # fmt: skip
    out.append(Tensor(name=f"{p}.post_conv_post_layernorm", rows=hv, copies=2, role="norm"))
    block = MlpWeights(intermediate_size=out_w, gated=True, bias=False)
    for i in range(v.num_layers):
        q = f"{p}.blocks.{i}"
        out.append(Tensor(name=f"{q}.norms", rows=hv, copies=2, role="norm"))  # 2 RMSNorms
        out += _linear(f"{q}.attn.qkv", 3 * hv, hv, None, "column")
        out += _linear(f"{q}.attn.proj", hv, hv, None, "row")
        out += _mlp(block, hv, f"{q}.mlp", None)
    m = v.spatial_merge_size
    out += _linear(f"{p}.downsample", out_w, hv * m * m, None, "replicated", bias=True)
    out += _linear(f"{p}.merger.proj", out_w, out_w, None, "column")
    out.append(Tensor(name=f"{p}.merger.post_projection_norm", rows=out_w, copies=2, role="norm"))
    merger = MlpWeights(intermediate_size=v.intermediate_size, gated=True, bias=False)
    return out + _mlp(merger, out_w, f"{p}.merger", None)


def _glm_ocr(v: VisionWeights) -> list[Tensor]:
    """GLM-OCR's tower as vLLM 0.33 builds it (``glm_ocr.py`` ``GlmOcrVisionTransformer``): the
    biased 3D patch embedding, no position table nor post-conv norm (deleted), RMSNorm blocks
    (two per layer) with per-head q/k RMSNorms, a biased fused qkv and proj and a biased gated MLP
    ``intermediate_size`` wide, the post-block RMSNorm, the biased ``m × m`` downsampling
    convolution (``hv → out``) and GLM-4.1V's merger without biases, its MLP the text model's
    ``intermediate_size`` wide (``projector_input_dim``). qkv, gate/up and the merger's projection
    split by columns, proj and down by rows."""
    hv, p, out_w = v.hidden_size, "visual", v.projector_output_dim
    patch = v.num_channels * v.temporal_patch_size * v.patch_size**2
    out = _linear(f"{p}.patch_embed.proj", hv, patch, None, "replicated", bias=True)
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=True, bias=True)
    for i in range(v.num_layers):
        q = f"{p}.blocks.{i}"
        out.append(Tensor(name=f"{q}.norms", rows=hv, copies=2, role="norm"))  # 2 RMSNorms
        out.append(Tensor(name=f"{q}.attn.qk_norm", rows=v.head_dim, copies=2, role="norm"))
        out += _linear(f"{q}.attn.qkv", 3 * hv, hv, None, "column", bias=True)
        out += _linear(f"{q}.attn.proj", hv, hv, None, "row", bias=True)
        out += _mlp(block, hv, f"{q}.mlp", None)
    out.append(Tensor(name=f"{p}.post_layernorm", rows=hv, role="norm"))
    m = v.spatial_merge_size
    out += _linear(f"{p}.downsample", out_w, hv * m * m, None, "replicated", bias=True)
    out += _linear(f"{p}.merger.proj", out_w, out_w, None, "column")
    out.append(Tensor(name=f"{p}.merger.post_projection_norm", rows=out_w, copies=2, role="norm"))
    merger = MlpWeights(intermediate_size=v.projector_input_dim, gated=True, bias=False)
    return out + _mlp(merger, out_w, f"{p}.merger", None)


def _llava(v: VisionWeights) -> list[Tensor]:
    """LLaVA's tower and projector as vLLM 0.33 builds them (``clip.py`` / ``siglip.py`` through
    ``init_vision_tower_for_llava``): CLIP's class embedding, unbiased patch convolution, ``np + 1``
    position rows and pre-LayerNorm, or SigLIP's biased patch convolution and ``np`` position
    rows; ``num_layers`` encoder layers (biased fused qkv and out_proj, biased fc1/fc2, two
    LayerNorms); no post-LayerNorm. The projector: ``linear_1`` (tower width × feature layers →
    text) and ``linear_2`` (text → text), split by columns and rows (OneVision's ``nn.Linear``s
    whole on every rank); LLaVA-NeXT's and OneVision's ``image_newline`` row."""
    hv, p, h = v.hidden_size, "vision_tower.vision_model", v.text_hidden_size
    patches = (v.image_size // v.patch_size) ** 2
    conv = v.num_channels * v.patch_size**2
    clip = v.tower == "clip"
    out = _linear(f"{p}.embeddings.patch_embedding", hv, conv, None, "replicated", bias=not clip)
    out.append(Tensor(name=f"{p}.embeddings.position_embedding", rows=patches + clip, cols=hv,
                      role="position"))  # fmt: skip
    if clip:
        out.append(Tensor(name=f"{p}.embeddings.class_embedding", rows=hv, role="vector"))
        out.append(Tensor(name=f"{p}.pre_layrnorm", rows=hv, copies=2, role="norm"))
    out += _encoder(v, f"{p}.encoder.layers", "self_attn", "out_proj", "mlp", "layer_norms",
                    bias=True)  # fmt: skip
    m = "multi_modal_projector"
    first, second = ("replicated", "replicated") if v.projector_replicated else ("column", "row")
    out += _linear(f"{m}.linear_1", h, v.projector_input_dim, None, first, bias=v.projector_bias)
    out += _linear(f"{m}.linear_2", h, h, None, second, bias=v.projector_bias)
    if v.image_newline:
        out.append(Tensor(name="image_newline", rows=h, role="vector"))
    return out


def _cohere2_vision(v: VisionWeights) -> list[Tensor]:
    """Command-A Vision's SigLIP and projector as vLLM 0.33 builds them (``cohere2_vision.py``,
    ``siglip.py``): the biased patch convolution and ``np`` position rows, ``num_layers`` encoder
    layers (biased fused qkv and out_proj, biased fc1/fc2, two LayerNorms), the post-LayerNorm;
    ``linear_1`` (``hv · factor²`` → gate and up, ``projector_output_dim`` each) split by columns,
    ``linear_2`` (→ text) by rows, both biased."""
    out = _siglip_whole(v, "vision_tower.vision_model")
    m, inter = "multi_modal_projector", v.projector_output_dim
    out += _linear(f"{m}.linear_1", 2 * inter, v.projector_input_dim, None, "column", bias=True)
    out += _linear(f"{m}.linear_2", v.text_hidden_size, inter, None, "row", bias=True)
    return out


def _idefics3(v: VisionWeights) -> list[Tensor]:
    """Idefics3's (and SmolVLM's) tower and connector as vLLM 0.33 builds them (``idefics3.py``,
    ``idefics2_vision_model.py``): SigLIP's layers whole, with the post-LayerNorm, and the
    connector's one unbiased ``ReplicatedLinear`` (``hv · scale_factor²`` → text), whole on every
    rank."""
    out = _siglip_whole(v, "model.vision_model")
    proj = "model.connector.modality_projection.proj"
    return out + _linear(proj, v.text_hidden_size, v.projector_input_dim, None, "replicated")


def _aria(v: VisionWeights) -> list[Tensor]:
    """Aria's tower and projector (see :func:`kvcalc.hfconfig.weights_vision._aria`)."""
    out = [t for t in _siglip_whole(v, "vision_tower") if not t.name.endswith("post_layernorm")]
    hv, p = v.hidden_size, "multi_modal_projector"
    out.append(Tensor(name=f"{p}.query", rows=v.projector_input_dim, cols=hv, role="vector"))
    for name in ("q_proj", "k_proj", "v_proj"):
        out += _linear(f"{p}.cross_attn.{name}", hv, hv, None, "replicated")
    out += _linear(f"{p}.cross_attn.multihead_attn.in_proj", 3 * hv, hv, None, "replicated",
                   bias=True)  # fmt: skip
    out += _linear(f"{p}.cross_attn.multihead_attn.out_proj", hv, hv, None, "replicated",
                   bias=True)  # fmt: skip
    out += _linear(f"{p}.cross_attn.linear", hv, hv, None, "replicated", bias=True)
    out.append(Tensor(name=f"{p}.norms", rows=hv, copies=6, role="norm"))  # three LayerNorms
    text = v.text_hidden_size
    out += _linear(f"{p}.feed_forward.linear_in", text, hv, None, "column")
    return out + _linear(f"{p}.feed_forward.linear_out", text, text, None, "row")


def _lfm2_vl(v: VisionWeights) -> list[Tensor]:
    """LFM2-VL's SigLIP2 and projector as vLLM 0.33 builds them (``lfm2_siglip2.py``,
    ``lfm2_vl.py``): the tower whole (its linear patch embedding biased, ``num_positions`` rows)
    and the projector's LayerNorm (``projector_use_layernorm``) and two ``ReplicatedLinear``s,
    whole on every rank."""
    out = _siglip_whole(v, "vision_tower.vision_model")
    m, inner = "multi_modal_projector", v.projector_output_dim
    if v.projector_norm:
        out.append(Tensor(name=f"{m}.layer_norm", rows=v.projector_input_dim, copies=2,
                          role="norm"))  # fmt: skip
    out += _linear(f"{m}.linear_1", inner, v.projector_input_dim, None, "replicated",
                   bias=v.projector_bias)  # fmt: skip
    return out + _linear(f"{m}.linear_2", v.text_hidden_size, inner, None, "replicated",
                         bias=v.projector_bias)  # fmt: skip


def _internvl(v: VisionWeights) -> list[Tensor]:
    """InternVL's tower and projector as vLLM 0.33 builds them (``interns1_vit.py``,
    ``interns1.py``): see :func:`kvcalc.hfconfig.weights_vision._internvl`. q/k/v and the output
    projection are ``nn.Linear``s (whole on every rank), fc1/fc2 split by columns and rows;
    ``tower`` is the norm type (``layer_norm``: weight and bias)."""
    hv, p = v.hidden_size, "vision_tower"
    copies = 2 if v.tower == "layer_norm" else 1
    out = [Tensor(name=f"{p}.embeddings.cls_token", rows=hv, role="vector")]
    if v.mask_token:
        out.append(Tensor(name=f"{p}.embeddings.mask_token", rows=hv, role="vector"))
    out += _linear(f"{p}.embeddings.patch_embeddings.projection", hv,
                   v.num_channels * v.patch_size, None, "replicated", bias=True)  # fmt: skip
    if v.num_positions:
        out.append(Tensor(name=f"{p}.embeddings.position_embeddings", rows=v.num_positions,
                          cols=hv, role="position"))  # fmt: skip
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=False, bias=True)
    for i in range(v.num_layers):
        q = f"{p}.encoder.layer.{i}"
        for proj in ("q_proj", "k_proj", "v_proj"):
            out += _linear(f"{q}.attention.{proj}", hv, hv, None, "replicated",
                           bias=v.attention_bias)  # fmt: skip
        if v.qk_norm:
            out.append(Tensor(name=f"{q}.attention.qk_norm", rows=hv, copies=2, role="norm"))
        out += _linear(f"{q}.attention.projection_layer", hv, hv, None, "replicated", bias=True)
        out += _mlp(block, hv, f"{q}.mlp", None)
        out.append(Tensor(name=f"{q}.layernorms", rows=hv, copies=2 * copies, role="norm"))
        out.append(Tensor(name=f"{q}.lambdas", rows=hv, copies=2, role="vector"))
    if v.projector_norm:
        out.append(Tensor(name=f"{p}.layernorm", rows=hv, copies=2, role="norm"))
    m, h = "multi_modal_projector", v.text_hidden_size
    out.append(Tensor(name=f"{m}.layer_norm", rows=v.projector_input_dim, copies=2, role="norm"))
    out += _linear(f"{m}.linear_1", h, v.projector_input_dim, None, "replicated", bias=True)
    return out + _linear(f"{m}.linear_2", h, h, None, "replicated", bias=True)


def _class_token_embeddings(v: VisionWeights, p: str) -> list[Tensor]:
    """A class token, a biased patch convolution and a learned position per patch and for the
    class token, each whole on every rank (InternViT, BLIP, Step3-VL's towers)."""
    hv, patches = v.hidden_size, (v.image_size // v.patch_size) ** 2
    out = [Tensor(name=f"{p}.embeddings.class_embedding", rows=hv, role="vector")]
    out += _linear(f"{p}.embeddings.patch_embedding", hv, v.num_channels * v.patch_size**2, None,
                   "replicated", bias=True)  # fmt: skip
    out.append(Tensor(name=f"{p}.embeddings.position_embedding", rows=patches + 1, cols=hv,
                      role="position"))  # fmt: skip
    return out


def _intern_vit(v: VisionWeights) -> list[Tensor]:
    """InternViT and its ``mlp1`` as vLLM 0.33 builds them (``intern_vit.py``, ``internvl.py``):
    see :func:`kvcalc.hfconfig.weights_vision._intern_vit`. The fused qkv split by columns, the
    output projection by rows (its bias whole) — both whole on every rank where the TP size does
    not divide the heads (``InternParallelAttention``: ``use_data_parallel`` when
    ``num_heads % tp_size``, InternViT-6B's 25 heads at TP 2, 4, 8) —, fc1/fc2 by columns and
    rows; everything else whole on every rank; ``tower`` is the norm type (``layer_norm``: weight
    and bias)."""
    hv, p = v.hidden_size, "vision_model"
    # NVLM-D's padding heads widen every attention tensor (intern_vit.py dummy_dim)
    heads = v.num_heads + v.dummy_heads
    width = heads * (hv // v.num_heads)
    copies = 2 if v.tower == "layer_norm" else 1
    out = _class_token_embeddings(v, p)
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=False, bias=True)
    for i in range(v.num_layers):
        q = f"{p}.encoder.layers.{i}"
        attn = _linear(f"{q}.attn.qkv", 3 * width, hv, None, "column", bias=v.attention_bias)
        attn += _linear(f"{q}.attn.proj", hv, width, None, "row", bias=True)
        out += [replace(t, split_if_divides=heads) for t in attn]
        if v.qk_norm:  # RMSNorm over all heads (var_hidden_size), whole on every rank
            out.append(Tensor(name=f"{q}.attn.qk_norm", rows=width, copies=2, role="norm"))
        out += _mlp(block, hv, f"{q}.mlp", None)
        out.append(Tensor(name=f"{q}.norms", rows=hv, copies=2 * copies, role="norm"))
        out.append(Tensor(name=f"{q}.ls", rows=hv, copies=2, role="vector"))
    m, h = "mlp1", v.text_hidden_size
    out.append(Tensor(name=f"{m}.0", rows=v.projector_input_dim, copies=2, role="norm"))
    if v.projector_output_dim:  # NVLM-D: through the text model's MLP width, unbiased
        mid = v.projector_output_dim
        out += _linear(f"{m}.1", mid, v.projector_input_dim, None, "replicated")
        return out + _linear(f"{m}.3", h, mid, None, "replicated")
    out += _linear(f"{m}.1", h, v.projector_input_dim, None, "replicated", bias=True)
    return out + _linear(f"{m}.3", h, h, None, "replicated", bias=True)


def _qwen2_audio(v: VisionWeights) -> list[Tensor]:
    """Qwen2-Audio's encoder and projector (``Qwen2AudioEncoder``, ``qwen2_audio.py``): see
    :func:`kvcalc.hfconfig.weights_vision._qwen2_audio`; ``num_channels`` is the mel bins."""
    d, p = v.hidden_size, "audio_tower"
    out = _linear(f"{p}.conv1", d, v.num_channels * 3, None, "replicated", bias=True)
    out += _linear(f"{p}.conv2", d, d * 3, None, "replicated", bias=True)
    out.append(Tensor(name=f"{p}.embed_positions", rows=v.num_positions, cols=d, role="position"))
    for i in range(v.num_layers):
        q = f"{p}.layers.{i}"
        out += _linear(f"{q}.self_attn.k_proj", d, d, None, "replicated")
        for proj in ("q_proj", "v_proj", "out_proj"):
            out += _linear(f"{q}.self_attn.{proj}", d, d, None, "replicated", bias=True)
        out += _linear(f"{q}.fc1", v.intermediate_size, d, None, "replicated", bias=True)
        out += _linear(f"{q}.fc2", d, v.intermediate_size, None, "replicated", bias=True)
        out.append(Tensor(name=f"{q}.layer_norms", rows=d, copies=4, role="norm"))
    out.append(Tensor(name=f"{p}.layer_norm", rows=d, copies=2, role="norm"))
    return out + _linear("multi_modal_projector.linear", v.text_hidden_size, d, None,
                         "replicated", bias=True)  # fmt: skip


def _eva2clip(v: VisionWeights) -> list[Tensor]:
    """GLM-4V's EVA2CLIP tower, convolution, GLU projector and ``boi``/``eoi`` (``glm4v.py``):
    see :func:`kvcalc.hfconfig.weights_vision._glm4v_9b`."""
    hv, p, h, ffn = v.hidden_size, "transformer.vision", v.text_hidden_size, v.projector_output_dim
    out = _linear(f"{p}.patch_embedding.proj", hv, v.num_channels * v.patch_size**2, None,
                  "replicated", bias=True)  # fmt: skip
    out.append(Tensor(name=f"{p}.patch_embedding.cls_embedding", rows=hv, role="vector"))
    out.append(Tensor(name=f"{p}.patch_embedding.position_embedding", rows=v.num_positions,
                      cols=hv, role="position"))  # fmt: skip
    out += _fused_qkv_blocks(v, f"{p}.transformer.layers", "attention.query_key_value",
                             "attention.dense", "layernorms")  # fmt: skip
    out += _linear(f"{p}.conv", h, hv * 2 * 2, None, "replicated", bias=True)
    g = f"{p}.linear_proj"
    out += _linear(f"{g}.linear_proj", h, h, None, "replicated")
    out.append(Tensor(name=f"{g}.norm1", rows=h, copies=2, role="norm"))
    out += _linear(f"{g}.merged_proj", 2 * ffn, h, None, "column")
    out += _linear(f"{g}.dense_4h_to_h", h, ffn, None, "row")
    return out + [Tensor(name=f"{p}.boi_eoi", rows=h, copies=2, role="vector")]


def _kimi_vl(v: VisionWeights) -> list[Tensor]:
    """Kimi-VL's MoonViT and projector (``moonvit.py``, ``kimi_vl.py``): see
    :func:`kvcalc.hfconfig.weights_vision._kimi_vl`."""
    hv, p, wide = v.hidden_size, "vision_tower", v.projector_input_dim
    out = _linear(f"{p}.patch_embed.proj", hv, v.num_channels * v.patch_size**2, None,
                  "replicated", bias=True)  # fmt: skip
    out.append(Tensor(name=f"{p}.patch_embed.pos_emb.weight", rows=v.num_positions, cols=hv,
                      role="position"))  # fmt: skip
    out += _fused_qkv_blocks(v, f"{p}.encoder.blocks", "wqkv", "wo", "norms")
    out.append(Tensor(name=f"{p}.encoder.final_layernorm", rows=hv, copies=2, role="norm"))
    m = "multi_modal_projector"
    out.append(Tensor(name=f"{m}.pre_norm", rows=hv, copies=2, role="norm"))
    out += _linear(f"{m}.linear_1", wide, wide, None, "replicated", bias=True)
    return out + _linear(f"{m}.linear_2", v.text_hidden_size, wide, None, "replicated", bias=True)


def _blip2(v: VisionWeights) -> list[Tensor]:
    """BLIP-2's tower, queries, Q-Former and projection (``blip2.py``, ``blip.py``): see
    :func:`kvcalc.hfconfig.weights_vision._blip2`."""
    hv, p = v.hidden_size, "vision_model"
    out = _class_token_embeddings(v, p)
    out += _fused_qkv_blocks(v, f"{p}.encoder.layers", "self_attn.qkv", "self_attn.projection",
                             "layer_norms", qkv_bias=v.attention_bias)  # fmt: skip
    out.append(Tensor(name=f"{p}.post_layernorm", rows=hv, copies=2, role="norm"))
    qh, inter = v.qformer_hidden_size, v.qformer_intermediate_size
    out.append(Tensor(name="query_tokens", rows=v.query_tokens, cols=qh, role="vector"))
    out.append(Tensor(name="qformer.layernorm", rows=qh, copies=2, role="norm"))
    for i in range(v.qformer_layers):
        q = f"qformer.encoder.layer.{i}"
        kinds = ["attention"] + (["crossattention"] if i % v.cross_attention_frequency == 0 else [])
        for kind in kinds:
            kv = hv if kind == "crossattention" else qh  # its key/value read the tower's output
            out += _linear(f"{q}.{kind}.attention.query", qh, qh, None, "replicated", bias=True)
            out += _linear(f"{q}.{kind}.attention.key", qh, kv, None, "replicated", bias=True)
            out += _linear(f"{q}.{kind}.attention.value", qh, kv, None, "replicated", bias=True)
            out += _linear(f"{q}.{kind}.output.dense", qh, qh, None, "replicated", bias=True)
            out.append(Tensor(name=f"{q}.{kind}.output.LayerNorm", rows=qh, copies=2, role="norm"))
        out += _linear(f"{q}.intermediate_query.dense", inter, qh, None, "replicated", bias=True)
        out += _linear(f"{q}.output_query.dense", qh, inter, None, "replicated", bias=True)
        out.append(Tensor(name=f"{q}.output_query.LayerNorm", rows=qh, copies=2, role="norm"))
    return out + _linear("language_projection", v.text_hidden_size, qh, None, "replicated",
                         bias=True)  # fmt: skip


def _step3_vl(v: VisionWeights) -> list[Tensor]:
    """Step3-VL's tower, downsamplers and projector (``step3_vl.py``): see
    :func:`kvcalc.hfconfig.weights_vision._step3_vl`."""
    hv, p, out_dim = v.hidden_size, "vision_model", v.projector_output_dim
    out = _class_token_embeddings(v, p)
    out += _fused_qkv_blocks(v, f"{p}.transformer.layers", "self_attn.qkv_proj",
                             "self_attn.out_proj", "layer_norms")  # fmt: skip
    out += _linear("vit_downsampler", out_dim, hv * 2 * 2, None, "replicated", bias=True)
    out += _linear("vit_downsampler2", 2 * out_dim, out_dim * 3 * 3, None, "replicated", bias=True)
    return out + _linear("vit_large_projector", v.text_hidden_size, 2 * out_dim, None,
                         "replicated", bias=v.projector_bias)  # fmt: skip


def _minicpmv(v: VisionWeights) -> list[Tensor]:
    """MiniCPM-V 4.6's and 4.7's tower, ``vit_merger`` and ``merger`` (``minicpmv4_6.py``): see
    :func:`kvcalc.hfconfig.weights_vision._minicpmv`."""
    hv, wide = v.hidden_size, v.projector_input_dim
    out = _siglip_whole(v, "vpm")
    w = "vit_merger"
    out += _linear(f"{w}.self_attn.qkv_proj", 3 * hv, hv, None, "column", bias=True)
    out += _linear(f"{w}.self_attn.out_proj", hv, hv, None, "row", bias=True)
    out.append(Tensor(name=f"{w}.layer_norm1", rows=hv, copies=2, role="norm"))
    out.append(Tensor(name=f"{w}.pre_norm", rows=wide, copies=2, role="norm"))
    out += _linear(f"{w}.linear_1", 4 * v.intermediate_size, wide, None, "replicated", bias=True)
    out += _linear(f"{w}.linear_2", hv, 4 * v.intermediate_size, None, "replicated", bias=True)
    m = "merger.mlp.0"
    out.append(Tensor(name=f"{m}.pre_norm", rows=wide, copies=2, role="norm"))
    out += _linear(f"{m}.linear_1", wide, wide, None, "replicated", bias=True)
    return out + _linear(f"{m}.linear_2", v.text_hidden_size, wide, None, "replicated", bias=True)


def _siglip_whole(v: VisionWeights, p: str) -> list[Tensor]:
    """A SigLIP tower with every layer, as vLLM 0.33's ``siglip.py`` and
    ``idefics2_vision_model.py`` build it (and ``lfm2_siglip2.py``'s SigLIP2): the biased patch
    convolution or linear embedding (whole on every rank), ``(image_size / patch)²`` position rows
    (SigLIP2: ``num_positions``), ``num_layers`` encoder layers (biased fused qkv and
    out_proj, biased fc1/fc2, two LayerNorms) and the post-LayerNorm."""
    hv = v.hidden_size
    patches = v.num_positions or (v.image_size // v.patch_size) ** 2
    conv = v.num_channels * v.patch_size**2
    out = _linear(f"{p}.embeddings.patch_embedding", hv, conv, None, "replicated", bias=True)
    out.append(Tensor(name=f"{p}.embeddings.position_embedding", rows=patches, cols=hv,
                      role="position"))  # fmt: skip
    out += _encoder(v, f"{p}.encoder.layers", "self_attn", "out_proj", "mlp", "layer_norms",
                    bias=True)  # fmt: skip
    out.append(Tensor(name=f"{p}.post_layernorm", rows=hv, copies=2, role="norm"))
    return out


def _gemma4(v: VisionWeights) -> list[Tensor]:
    """Gemma 4's tower: a 2D learned position table (``2 × positions × hv``), an unbiased patch
    projection, RMSNorm blocks (four per layer) with q/k norms and a gated MLP, and the
    ``embed_vision`` projection into the text width."""
    hv, p = v.hidden_size, "model.vision_tower"
    out = [
        Tensor(name=f"{p}.patch_embedder.position_embedding_table", rows=2 * v.num_positions,
               cols=hv, role="position"),
        Tensor(name=f"{p}.patch_embedder.input_proj", rows=hv,
               cols=v.num_channels * v.patch_size**2, role="linear", split="column"),
    ]  # fmt: skip
    out += _encoder(v, f"{p}.encoder.layers", "self_attn", "o_proj", "mlp", "norms", gated=True,
                    qk_norm_rows=v.head_dim)  # fmt: skip
    out += _linear("model.embed_vision.embedding_projection", v.text_hidden_size, hv, None,
                   "column")  # fmt: skip
    return out


def _fused_qkv_blocks(
    v: VisionWeights, layers: str, qkv: str, out_proj: str, norms: str, *, qkv_bias: bool = True
) -> list[Tensor]:
    """ViT blocks with one fused ``3·hv × hv`` qkv split by columns, a biased output projection
    split by rows, an ungated biased MLP (``mlp``) and four norm vectors (GLM-4V's EVA2-CLIP,
    MoonViT, BLIP, Step3-VL's tower)."""
    hv = v.hidden_size
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=False, bias=True)
    out: list[Tensor] = []
    for i in range(v.num_layers):
        q = f"{layers}.{i}"
        out += _linear(f"{q}.{qkv}", 3 * hv, hv, None, "column", bias=qkv_bias)
        out += _linear(f"{q}.{out_proj}", hv, hv, None, "row", bias=True)
        out += _mlp(block, hv, f"{q}.mlp", None)
        out.append(Tensor(name=f"{q}.{norms}", rows=hv, copies=4, role="norm"))
    return out


def _encoder(
    v: VisionWeights, layers: str, attn: str, out_proj: str, mlp: str, norms: str, *,
    norm_copies: int = 4, gated: bool = False, bias: bool = False, qk_norm_rows: int = 0,
) -> list[Tensor]:  # fmt: skip
    """The towers' encoder layers: separate q/k/v and output projections (``hv × hv``), an MLP, the
    layer's norms (``norm_copies`` vectors of ``hv``) and, where the tower has them, q/k norms."""
    hv = v.hidden_size
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=gated, bias=bias)
    out: list[Tensor] = []
    for i in range(v.num_layers):
        q = f"{layers}.{i}"
        for proj in ("q_proj", "k_proj", "v_proj"):
            out += _linear(f"{q}.{attn}.{proj}", hv, hv, None, "column", bias=bias)
        out += _linear(f"{q}.{attn}.{out_proj}", hv, hv, None, "row", bias=bias)
        if qk_norm_rows:
            out.append(Tensor(name=f"{q}.{attn}.qk_norm", rows=qk_norm_rows, copies=2, role="norm"))
        out += _mlp(block, hv, f"{q}.{mlp}", None)
        out.append(Tensor(name=f"{q}.{norms}", rows=hv, copies=norm_copies, role="norm"))
    return out
