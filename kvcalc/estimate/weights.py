"""Parameter counts and weight bytes per GPU, from a :class:`~kvcalc.model.shape.ModelShape` (pure; no torch).

:func:`count_parameters` sums the tensor inventory of :mod:`kvcalc.estimate.tensors` and matches what
transformers builds (``sum(p.numel() for p in model.parameters())``; tied embeddings counted once,
MTP layers excluded). Worked example, Llama-3.1-8B::

    embed 128,256 × 4,096 = 525,336,576 (and the same again for the untied lm_head)
    per layer: q 4,096² + k,v 2 × 1,024 × 4,096 + o 4,096² = 41,943,040
               gate/up/down 3 × 14,336 × 4,096 = 176,160,768;  norms 2 × 4,096 = 8,192
    32 layers × 218,112,000 + 2 × 525,336,576 + final norm 4,096 = 8,030,261,248

:func:`weight_bytes` prices each tensor in its storage format (see :mod:`kvcalc.hfconfig.quant`):
quantizable tensors (linear projections, experts) follow the quantization method; embeddings,
lm_head, norms, routers, biases, convolutions and per-head vectors stay in the model dtype, as do
modules a checkpoint lists in ``modules_to_not_convert``/``ignore`` and, for checkpoint methods, the
vision tower. Per-GPU bytes split each tensor as vLLM does (:class:`kvcalc.estimate.tensors.Tensor`) and
layers across pipeline stages as vLLM's ``get_pp_indices``; the result is the largest stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from kvcalc.errors import InputError
from kvcalc.estimate.pricing import (
    MXFP4_HIDDEN_ALIGN,
    MXFP4_INTERMEDIATE_ALIGN,
    VOCAB_PADDING,
    Pricer,
)
from kvcalc.estimate.tensors import Tensor, inventory
from kvcalc.frozen import frozen
from kvcalc.hfconfig.quant import DEFAULT_SPECS, QuantSpec
from kvcalc.hfconfig.weights import WeightShape
from kvcalc.model.layouts import RecurrentVariant
from kvcalc.model.shape import ModelShape

_WEIGHT_DTYPES = {"bf16": ("bf16", 2), "bfloat16": ("bf16", 2), "fp16": ("fp16", 2),
                  "float16": ("fp16", 2), "half": ("fp16", 2), "fp32": ("fp32", 4),
                  "float32": ("fp32", 4), "float": ("fp32", 4)}  # fmt: skip
_QUANT_ALIASES = {"bnb": "bitsandbytes", "bitsandbytes": "bitsandbytes", "fp8": "fp8", "awq": "awq",
                  "gptq": "gptq", "mxfp4": "mxfp4", "none": "none"}  # fmt: skip


@frozen
class ParameterCount:
    total: int
    #: input token embeddings plus learned position tables
    embedding: int
    #: 0 when tied to the input embedding
    lm_head: int
    routed_experts: int
    vision: int
    #: parameters one text token touches: all but the vision tower and the unrouted experts
    active_per_token: int

    @property
    def non_expert(self) -> int:
        return self.total - self.routed_experts


@frozen
class WeightBytes:
    num_parameters: int
    #: the whole model stored once (one copy of every tensor)
    weights_bytes: int
    #: the largest share one GPU holds (one TP rank of the heaviest PP stage)
    weights_bytes_per_gpu: int
    stage_bytes_per_gpu: tuple[int, ...]
    #: buffers vLLM allocates with the weights ("Model loading took" includes them) on the GPU of
    #: ``weights_bytes_per_gpu``: the RoPE cos/sin cache and the layers' fp32 buffers
    #: (:func:`layer_buffer_bytes`)
    buffers_bytes_per_gpu: int
    #: of ``weights_bytes_per_gpu``: padding of the loaded layout beyond the checkpoint's share
    #: (vocabulary rows to a multiple of 64, mxfp4 expert dimensions to the MoE kernels' tiles)
    layout_padding_bytes_per_gpu: int = 0
    #: the whole model's bytes per storage dtype (``bf16``, ``fp8``, ``fp32`` scales, ``e8m0``...)
    by_dtype: Mapping[str, int]
    #: routed experts of the whole model, in their storage format
    experts_bytes: int
    dtype: str
    quantization: str | None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    #: of ``stage_bytes_per_gpu``: the routed experts' share on each stage (their weights and
    #: scales, as a checkpoint stores them) and the int32 ``expert_map`` buffers expert parallelism
    #: adds (in no checkpoint)
    stage_expert_bytes_per_gpu: tuple[int, ...] = ()
    stage_expert_map_bytes_per_gpu: tuple[int, ...] = ()
    #: ranks the routed experts are split over (vLLM: TP × DP × PCP) and how
    moe_ranks: int = 1
    expert_parallel: bool = False
    source: str = "config estimate"
    notes: tuple[str, ...] = field(default=())
    #: of ``weights_bytes_per_gpu`` (PP 1): the decoder layers' share, what vLLM's weight
    #: offloader (``--cpu-offload-gb``) may move; the embedding, final norm and lm_head stay
    decoder_layer_bytes_per_gpu: int = 0
    #: of ``weights_bytes_per_gpu``: the vision tower's share, and the tower whole (unsplit), for
    #: vLLM's ``--limit-mm-per-prompt`` 0 and ``--mm-encoder-tp-mode data``
    vision_bytes_per_gpu: int = 0
    vision_bytes_unsplit: int = 0
    #: of ``vision_bytes_per_gpu``: a second tower's share (Qwen2.5-Omni's audio encoder, whole on
    #: every rank, with its buffer), which vLLM leaves out alone when its modality is limited to 0
    companion_bytes_per_gpu: int = 0
    #: ``buffers_bytes_per_gpu`` of each pipeline stage (the RoPE cache on every stage, each
    #: layer's fp32 buffers on its own); empty: ``buffers_bytes_per_gpu`` on every stage
    stage_buffer_bytes_per_gpu: tuple[int, ...] = ()

    @property
    def stage_buffers(self) -> tuple[int, ...]:
        """``stage_buffer_bytes_per_gpu``, or ``buffers_bytes_per_gpu`` on each stage."""
        return self.stage_buffer_bytes_per_gpu or (self.buffers_bytes_per_gpu,) * len(
            self.stage_bytes_per_gpu
        )


def count_parameters(shape: WeightShape) -> ParameterCount:
    if shape.problem or shape.hidden_size <= 0 or shape.vocab_size <= 0:
        raise InputError(f"cannot count the weights: {shape.problem or 'no hidden_size or vocab_size'}",
                         code="weights-unknown")  # fmt: skip
    tensors = tuple(t for t in inventory(shape) if not t.engine_only)
    total = sum(t.numel for t in tensors)
    by_role = _sum_by(tensors, lambda t: t.role if not t.vision else "vision")
    routed = sum(t.numel for t in tensors if t.expert)
    k = shape.moe.experts_per_token if shape.moe else 0
    active_routed = sum(t.rows * t.cols * min(k, t.copies) for t in tensors if t.expert)
    vision = by_role.get("vision", 0)
    return ParameterCount(
        total=total,
        embedding=by_role.get("embedding", 0) + by_role.get("position", 0),
        lm_head=by_role.get("lm_head", 0),
        routed_experts=routed,
        vision=vision,
        active_per_token=total - vision - routed + active_routed,
    )


def weight_bytes(
    model: ModelShape,
    *,
    dtype: str | None = None,
    quantization: str | None = None,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    moe_ranks: int | None = None,
    expert_parallel: bool = False,
    redundant_experts: int = 0,
    shared_experts_whole: bool = False,
    dense_mlps_whole: bool = False,
) -> WeightBytes:
    """Bytes of the weights: the whole model, and per GPU under TP × PP.

    Routed experts are split over ``moe_ranks`` (default: TP): vLLM's
    ``FusedMoEParallelConfig.make`` flattens TP × DP × PCP into one MoE group. Without
    ``expert_parallel`` each expert's width is split over that group; with it each rank holds whole
    experts, ``cdiv(experts + redundant_experts, moe_ranks)`` on the first ranks
    (``expert_map_manager.determine_expert_map``: the remainder goes to the lowest ranks).
    ``shared_experts_whole``: the MoE blocks' shared experts are held whole on every rank, not
    split over TP (vLLM's sequence-parallel MoE, :func:`whole_shared_experts`);
    ``dense_mlps_whole``: the dense layers' MLPs too (:func:`whole_dense_mlps`)."""
    shape = _weight_shape(model)
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    split = _ExpertSplit(moe_ranks or tp, expert_parallel and (moe_ranks or tp) > 1,
                         redundant_experts)  # fmt: skip
    if not (isinstance(tp, int) and isinstance(pp, int)) or tp < 1 or pp < 1:
        raise InputError(f"parallel sizes must be positive integers, got TP {tp} and PP {pp}",
                         code="invalid-parallelism")  # fmt: skip
    if pp > shape.num_layers:
        raise InputError(f"pipeline_parallel_size {pp} exceeds the {shape.num_layers} layers",
                         code="invalid-parallelism")  # fmt: skip
    notes = list(shape.notes)
    dtype_name, dtype_bytes = _resolve_dtype(model, dtype, notes)
    spec = _resolve_quant(shape.quantization, quantization, notes)
    tensors = inventory(shape)
    if shared_experts_whole:
        tensors = whole_shared_experts(tensors)
    if dense_mlps_whole:
        tensors = whole_dense_mlps(tensors, shape.ffns)
    price = Pricer(spec, dtype_name, dtype_bytes)
    by_dtype: dict[str, int] = {}
    for t in tensors:
        for key, value in price(t, 1).items():
            by_dtype[key] = by_dtype.get(key, 0) + value
    experts = sum(sum(price(t, 1).values()) for t in tensors if t.expert)
    stages = _stage_bytes(shape, tensors, price, tp, pp, notes, split=split)
    unpadded = _stage_bytes(shape, tensors, price, tp, pp, [], loaded=False, split=split)
    expert_stages = _stage_bytes(shape, tensors, price, tp, pp, [], split=split, experts_only=True)
    maps = _expert_map_stages(shape, tensors, split, pp)
    rope_bytes = (
        shape.rope_cache_positions * shape.rotary_dim + shape.extra_rope_values
    ) * dtype_bytes
    if shape.model_type in _GEMMA_NORMALIZER:
        # gemma.py / gemma2.py GemmaModel: register_buffer("normalizer", torch.tensor(
        # hidden_size ** 0.5)), one value in the model dtype (PaliGemma's 2 B, recorded)
        rope_bytes += dtype_bytes
    if shape.model_type == "gemma4_text":
        # gemma4.py: each layer's layer_scalar and the model's normalizer, scalar buffers in the
        # model dtype
        rope_bytes += (shape.num_layers + 1) * dtype_bytes
    if shape.moe and shape.moe.gemma4_router:  # each Gemma4Router's root_size scalar buffer
        rope_bytes += dtype_bytes * sum(f == "dense+moe" for f in shape.ffns)
    if shape.ngram:  # longcat_flash_ngram.py's int32 hashing buffers, on every rank
        rope_bytes += 4 * shape.ngram.int32_values
    if shape.gemma3n:
        # gemma3n.py: each layer's AltUp router_input_scale and the model's embed_scale,
        # embed_scale_per_layer, per_layer_input_scale and per_layer_projection_scale, scalar
        # buffers in the model dtype (30 + 4 for E2B, recorded)
        rope_bytes += (shape.num_layers + 4) * dtype_bytes
    layers = sum(
        sum(price(t, tp).values()) for t in tensors if t.layer is not None and not t.vision
    )
    # the vision tower's RoPE cache (and GLM-4.1V's position ids), buffers vLLM keeps beside its
    # weights (on every rank)
    vision_rope = _vision_rope_bytes(shape, dtype_bytes)
    rope_bytes += vision_rope
    vision = sum(sum(price(t, tp).values()) for t in tensors if t.vision) + vision_rope
    vision_whole = sum(sum(price(t, 1).values()) for t in tensors if t.vision) + vision_rope
    companion = 0
    if shape.vision is not None and shape.vision.companion is not None:
        from kvcalc.estimate.aud2_tensors import COMPANION_PREFIX, tower_buffer_bytes

        companion = tower_buffer_bytes(shape.vision.companion) + sum(
            sum(price(t, tp).values()) for t in tensors if t.name.startswith(COMPANION_PREFIX)
        )
    notes += _layout_notes(shape, spec, tp, rope_bytes, max(stages) - max(unpadded))
    counts = pp_layer_counts(shape.num_layers, pp)
    stage_buffers = tuple(
        rope_bytes
        + sum(layer_buffer_bytes(shape, i) for i in range(sum(counts[:s]), sum(counts[: s + 1])))
        for s in range(pp)
    )
    heaviest = stages.index(max(stages))
    return WeightBytes(
        num_parameters=sum(t.numel for t in tensors if not t.engine_only),
        weights_bytes=sum(by_dtype.values()),
        weights_bytes_per_gpu=max(stages),
        stage_bytes_per_gpu=tuple(stages),
        buffers_bytes_per_gpu=stage_buffers[heaviest],
        stage_buffer_bytes_per_gpu=stage_buffers,
        layout_padding_bytes_per_gpu=max(stages) - max(unpadded),
        by_dtype=dict(sorted(by_dtype.items())),
        experts_bytes=experts,
        dtype=dtype_name,
        quantization=spec.method if spec else None,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        stage_expert_bytes_per_gpu=tuple(e - m for e, m in zip(expert_stages, maps, strict=True)),
        stage_expert_map_bytes_per_gpu=maps,
        moe_ranks=split.ranks,
        expert_parallel=split.whole,
        notes=tuple(notes),
        decoder_layer_bytes_per_gpu=layers,
        vision_bytes_per_gpu=vision,
        vision_bytes_unsplit=vision_whole,
        companion_bytes_per_gpu=companion,
    )


def _expert_map_stages(
    shape: WeightShape, tensors, split: _ExpertSplit, pp: int
) -> tuple[int, ...]:
    """Each stage's int32 ``expert_map`` bytes (expert parallelism only)."""
    out = [0] * pp
    if not split.whole:
        return tuple(out)
    counts = pp_layer_counts(shape.num_layers, pp)
    starts = [sum(counts[:i]) for i in range(pp)]
    for t in tensors:
        if t.expert and t.layer is not None and t.name.endswith(".experts.gate_up_proj"):
            stage = max(i for i in range(pp) if starts[i] <= t.layer)
            out[stage] += _EXPERT_MAP_BYTES * (t.copies + split.redundant)
    return tuple(out)


def whole_shared_experts(tensors: Iterable[Tensor]) -> tuple[Tensor, ...]:
    """``tensors`` with the MoE blocks' shared experts replicated (each rank holds them whole)."""
    return tuple(
        replace(t, split="replicated") if ".shared_experts." in t.name else t for t in tensors
    )


def whole_dense_mlps(tensors: Iterable[Tensor], ffns: tuple[str, ...]) -> tuple[Tensor, ...]:
    """``tensors`` with the dense layers' MLPs replicated (each rank holds them whole)."""
    dense = {i for i, ffn in enumerate(ffns) if ffn == "dense"}
    return tuple(
        replace(t, split="replicated")
        if t.layer in dense and t.name.startswith(f"model.layers.{t.layer}.mlp.")
        else t
        for t in tensors
    )


def expert_split(moe_ranks: int, expert_parallel: bool, redundant_experts: int = 0) -> _ExpertSplit:
    """How routed experts lie on ``moe_ranks`` ranks (whole experts with ``expert_parallel``, and
    EPLB's ``redundant_experts`` among them), as :func:`weight_bytes` splits them; its
    ``price(tensor, pricer, loaded=...)`` prices one."""
    return _ExpertSplit(moe_ranks, expert_parallel and moe_ranks > 1, redundant_experts)


#: bytes of one ``expert_map`` entry (int32)
_EXPERT_MAP_BYTES = 4


@dataclass(frozen=True)
class _ExpertSplit:
    """How the routed experts lie on the MoE ranks (see :func:`weight_bytes`)."""

    ranks: int
    #: whole experts per rank (expert parallel)
    whole: bool
    redundant: int = 0

    def price(self, t: Tensor, price: Pricer, *, loaded: bool) -> dict[str, int]:
        if not self.whole:
            return price(t, self.ranks, loaded=loaded)
        local = -(-(t.copies + self.redundant) // self.ranks)
        out = price(replace(t, copies=local), 1, loaded=loaded)
        if t.name.endswith(".experts.gate_up_proj"):
            # each MoE layer's int32 ``expert_map`` over all physical experts (a buffer of the
            # layer: DeepSeek-V3 EP 8, 58 layers × 256 × 4 = 59,392 B per rank, recorded)
            extra = _EXPERT_MAP_BYTES * (t.copies + self.redundant)
            out = {**out, "int32": out.get("int32", 0) + extra}
        return out


#: Qwen3-VL's vision RoPE (``qwen3_vl.py`` ``Qwen3_VisionTransformer``: ``get_rope(head_size,
#: max_position=8192, partial_rotary_factor=0.5)``): a cos/sin cache of 8,192 × head_dim / 2
QWEN3_VL_VISION_ROPE_POSITIONS = 8192
#: the towers vLLM 0.33 builds that RoPE for: Qwen3-VL's, Qwen2-VL's (``qwen2_vl.py``
#: ``Qwen2VisionTransformer``), Qwen2.5-VL's (``qwen2_5_vl.py``: 8,192 × 40 × 2 B = 655,360 B for
#: its 80-wide heads, recorded) and GLM-4.1V's (``glm4_1v.py`` ``Glm4vVisionTransformer``), the
#: same ``get_rope`` call
_VISION_ROPE = (
    "qwen3_vl",
    "qwen2_vl",
    "qwen2_5_vl",
    "glm4v",
    "exaone4_5",
    "glm_ocr",
    "hcx_vision_v2",
    "qwen2_5_omni",
    "qwen3_omni",
)
#: GLM-4.1V's ``Glm4vVisionEmbeddings`` also registers ``position_ids``, an int64 buffer of one
#: index per position row (``register_buffer(..., persistent=False)``: not in the checkpoint, on
#: every rank)
_INT64_BYTES = 8


#: vLLM 0.33's ``Attention`` and ``MLAAttention`` (``attention.py`` ``_init_kv_cache_quant``)
#: register four fp32 scalar buffers each, ``_k_scale``, ``_v_scale``, ``_q_scale`` and
#: ``_prob_scale``, in every layer they build (KV-sharing layers too)
ATTENTION_SCALE_BYTES = 4 * 4
#: mixers whose vLLM layer is an ``Attention`` or ``MLAAttention`` (DeepSeek-V3.2's and GLM-5's
#: sparse MLA too; DeepSeek-V4's attention, the indexers' key caches and the recurrent mixers are
#: neither and register none)
_SCALED_MIXERS = ("attention", "attention_global", "mla", RecurrentVariant.PARALLEL, "gemma3n",
                  "zamba2_hybrid")  # fmt: skip


def layer_buffer_bytes(shape: WeightShape, layer: int) -> int:
    """fp32 bytes vLLM 0.33 keeps in decoder layer ``layer`` beside the inventory's parameters, on
    every rank: the attention's four scales, and the MoE's ``e_score_correction_bias`` of one fp32
    value per routed expert (``nn.Parameter(torch.empty(n_routed_experts))``, split over neither TP
    nor EP), which transformers keeps as a buffer."""
    if shape.whisper:  # a decoder layer's self- and cross-attention (the encoder's: none)
        return 2 * ATTENTION_SCALE_BYTES
    mixer = shape.mixers[layer] if layer < len(shape.mixers) else "none"
    total = ATTENTION_SCALE_BYTES if mixer in _SCALED_MIXERS else 0
    if mixer == "mla" and shape.kda is not None:
        # Kimi-Linear's MLA (vLLM 0.33 models/kimi_k3/nvidia/mla.py) registers a fifth fp32
        # buffer, ``_one_scale``
        total += _FP32_BYTES
    ffn = shape.ffns[layer] if layer < len(shape.ffns) else "none"
    if ffn in ("moe", "dense+moe") and shape.moe is not None and shape.moe.score_bias:
        total += 4 * (shape.moe.num_experts + shape.moe.zero_experts)
    return total


#: model types whose vLLM 0.33 model keeps Gemma's embedding ``normalizer`` scalar buffer
_GEMMA_NORMALIZER = ("gemma", "gemma2")
#: bytes of one complex64 value (Llama 4's vision RoPE cache)
_COMPLEX64_BYTES = 8
_FP32_BYTES = 4


def _vision_rope_bytes(shape: WeightShape, dtype_bytes: int) -> int:
    v = shape.vision
    if v is not None and v.family == "llama4" and v.head_dim and v.patch_size:
        # mllama4.py Llama4VisionAttention: get_rope(head_dim, max_position=(image_size //
        # patch_size) ** 2, partial_rotary_factor 0.5, dtype=torch.complex64), one cache for the
        # tower (llama4_vision_rope.py: a row per patch and one for the CLS token, head_dim / 2
        # complex values each): Llama 4 Scout's 577 × 44 × 8 = 203,104 B, recorded
        patches = (v.image_size // v.patch_size) ** 2
        return (patches + 1) * (v.head_dim // 2) * _COMPLEX64_BYTES
    if v is not None and v.family == "pixtral" and v.head_dim:
        # pixtral.py PixtralHFVisionModel: transformers' PixtralVisionRotaryEmbedding (axial, 5.17
        # on) keeps inv_freq and original_inv_freq, fp32 buffers of head_dim / 2 each (LightOnOCR's
        # 64-wide heads: 256 B, recorded)
        return 2 * (v.head_dim // 2) * _FP32_BYTES
    if v is not None and v.family in ("llava", "cohere2_vision", "paligemma", "phi3_v"):
        # CLIP's and SigLIP's position_ids (int64, one per position row), no RoPE
        return ((v.image_size // v.patch_size) ** 2 + (v.tower == "clip")) * _INT64_BYTES
    if v is not None and v.family in (
        "glmasr",
        "audioflamingo3",
        "moss_transcribe_diarize",
        "qwen3_asr",
        "granite_speech",
    ):
        from kvcalc.estimate.aud2_tensors import tower_buffer_bytes as audio_buffer_bytes

        return audio_buffer_bytes(v)
    if v is not None and v.family == "bagel":
        from kvcalc.estimate.mmmla_tensors import tower_buffer_bytes

        return tower_buffer_bytes(v)
    if v is not None and v.family == "step3_vl":
        # step3_vl.py Step3VisionEmbeddings: position_ids, one per position row (class included)
        return ((v.image_size // v.patch_size) ** 2 + 1) * _INT64_BYTES
    if v is not None and v.family == "paddleocr_vl":
        # paddleocr_vl.py: SigLIP's position_ids and SigLIPRotaryEmbedding(head_dim // 2)'s fp32
        # inv_freq (arange(0, dim, 2): head_dim / 4 values)
        ids = (v.image_size // v.patch_size) ** 2 * _INT64_BYTES
        return ids + len(range(0, v.head_dim // 2, 2)) * _FP32_BYTES
    if v is None or v.family not in _VISION_ROPE or not v.head_dim:
        return 0
    ids = v.num_positions * _INT64_BYTES if v.family == "glm4v" else 0
    if v.companion is not None:  # and the audio encoder's sinusoid table (the Omni thinkers)
        from kvcalc.estimate.aud2_tensors import tower_buffer_bytes as audio_buffer_bytes

        ids = audio_buffer_bytes(v.companion)
    return QWEN3_VL_VISION_ROPE_POSITIONS * (v.head_dim // 2) * dtype_bytes + ids


def _layout_notes(
    shape: WeightShape, spec: QuantSpec | None, tp: int, rope_bytes: int, padding: int
) -> list[str]:
    notes = []
    if spec and spec.method == "mxfp4" and shape.moe and padding:
        notes.append(
            f"mxfp4 experts as vLLM loads them: hidden size to a multiple of {MXFP4_HIDDEN_ALIGN}, "
            f"expert width per rank to {MXFP4_INTERMEDIATE_ALIGN} (Marlin and TRT-LLM MoE kernels, "
            f"vllm fused_moe/oracle/mxfp4.py): +{padding / (1 << 30):.2f} GiB per GPU over the "
            "checkpoint (gpt-oss-120b on an H100: 65.97 GiB logged)"
        )
    elif padding:
        notes.append(
            f"vocabulary padded to a multiple of {VOCAB_PADDING} rows as vLLM loads it: "
            f"+{padding:,} B per GPU"
        )
    if rope_bytes > 256 * (1 << 20):
        notes.append(
            f"RoPE cache of {shape.rope_cache_positions:,} positions: {rope_bytes / (1 << 30):.2f} "
            "GiB (vLLM sizes it by max_position_embeddings; unconfirmed that it does not cap it)"
        )
    if tp > 1 and shape.attention and shape.attention.num_kv_heads < tp:
        notes.append(
            f"{shape.attention.num_kv_heads} KV heads < TP {tp}: each rank keeps one "
            "replicated KV head (vLLM QKVParallelLinear)"
        )
    return notes


def pp_layer_counts(num_layers: int, pp: int) -> tuple[int, ...]:
    """vLLM's ``get_pp_indices`` split: ``L // pp`` each, the remainder to partitions -2, -3, …

    >>> pp_layer_counts(61, 4)
    (15, 15, 16, 15)
    """
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def _stage_bytes(
    shape: WeightShape, tensors, price: Pricer, tp: int, pp: int, notes: list[str],
    *, loaded: bool = True, split: _ExpertSplit | None = None, experts_only: bool = False,
) -> list[int]:  # fmt: skip
    counts = pp_layer_counts(shape.num_layers, pp)
    starts = [sum(counts[:i]) for i in range(pp)]
    stage_of_layer = {
        layer: s for s in range(pp) for layer in range(starts[s], starts[s] + counts[s])
    }
    stages = [0] * pp
    for t in tensors:
        if experts_only and not t.expert:
            continue
        if t.layer is not None:
            stage = stage_of_layer[t.layer]
        elif t.name in ("model.norm", "lm_head"):
            stage = pp - 1
        else:  # embeddings, position tables, the vision tower
            stage = 0
        if t.expert and split is not None:
            stages[stage] += sum(split.price(t, price, loaded=loaded).values())
        else:
            stages[stage] += sum(price(t, tp, loaded=loaded).values())
    if pp > 1 and not experts_only:
        notes.append(
            f"pipeline stages hold {list(counts)} layers (vLLM get_pp_indices); "
            "embeddings on the first stage, final norm and lm_head on the last"
        )
        if shape.tie_word_embeddings:
            head = Tensor(name="lm_head", rows=shape.vocab_size, cols=shape.hidden_size,
                          role="lm_head", split="vocab")  # fmt: skip
            stages[-1] += sum(price(head, tp, loaded=loaded).values())
            notes.append("tied embeddings under PP: the last stage keeps its own lm_head copy")
    return stages


def weight_shape(model: ModelShape) -> WeightShape:
    """The model's weight dimensions; ``weights-unknown`` when the config lacks them."""
    return _weight_shape(model)


def pricer(
    model: ModelShape, shape: WeightShape, *, dtype: str | None, quantization: str | None
) -> Pricer:
    """How :func:`weight_bytes` prices each tensor of ``model`` (its dtype and quantization)."""
    notes: list[str] = []
    name, size = _resolve_dtype(model, dtype, notes)
    return Pricer(_resolve_quant(shape.quantization, quantization, notes), name, size)


def _weight_shape(model: ModelShape) -> WeightShape:
    shape = model.weights
    if not isinstance(shape, WeightShape):
        raise InputError(f"{model.name}: no weight dimensions were read", code="weights-unknown")
    if shape.problem or shape.hidden_size <= 0 or shape.vocab_size <= 0:
        raise InputError(f"{model.name}: cannot count the weights: "
                         f"{shape.problem or 'config.json lacks hidden_size or vocab_size'}",
                         hint="the KV cache can still be sized: pass --weights-memory or "
                         "--kv-cache-memory, or plan from safetensors headers",
                         code="weights-unknown")  # fmt: skip
    return shape


def _resolve_dtype(model: ModelShape, dtype: str | None, notes: list[str]) -> tuple[str, int]:
    if dtype is not None and str(dtype).lower() != "auto":
        try:
            return _WEIGHT_DTYPES[str(dtype).lower()]
        except KeyError:
            raise InputError(f"unknown weight dtype {dtype!r}", hint="choose bf16, fp16 or fp32",
                             code="unknown-dtype") from None  # fmt: skip
    name = model.dtype.name
    if name == "fp32":  # also configs without torch_dtype (gpt-oss, gpt2)
        notes.append(
            "no 16-bit torch_dtype in config: priced as bf16, as vLLM's dtype 'auto' serves "
            "float32 checkpoints in 16 bits (older vLLM picked fp16; same bytes); "
            "pass dtype='fp32' to keep 4 bytes"
        )
        return "bf16", 2
    return name, model.dtype.block_bytes


def _resolve_quant(
    checkpoint: QuantSpec | None, override: str | None, notes: list[str]
) -> QuantSpec | None:
    if override is None:
        if checkpoint is not None and not checkpoint.supported:
            raise InputError(f"checkpoint quantization {checkpoint.method!r} cannot be sized",
                             hint="pass quantization='none' to price the weights unquantized, or one "
                             "of fp8, awq, gptq, mxfp4, bitsandbytes",
                             code="unsupported-quantization")  # fmt: skip
        return checkpoint
    key = _QUANT_ALIASES.get(str(override).lower())
    if key is None:
        raise InputError(f"unknown quantization {override!r}",
                         hint="choose one of: none, " + ", ".join(DEFAULT_SPECS),
                         code="unknown-quantization")  # fmt: skip
    if key == "none":
        if checkpoint is not None:
            notes.append(
                f"checkpoint quantization {checkpoint.method} ignored: weights priced unquantized"
            )
        return None
    if checkpoint is not None and checkpoint.method == key:
        return checkpoint
    spec = DEFAULT_SPECS[key]
    notes.append(
        f"hypothetical {key} weights: {_describe(spec)}"
        + (f" (the checkpoint itself is {checkpoint.method})" if checkpoint else "")
    )
    return spec


def _describe(s: QuantSpec) -> str:
    where = "MoE experts only" if s.experts_only else "linear layers"
    per = {"tensor": "one scale per tensor", "channel": "one scale per row",
           "group": f"one scale per {s.group_size} values", "block": "one scale per block"}  # fmt: skip
    return f"{s.weight_bits}-bit {where}, {per[s.scale_granularity]}"


def _sum_by(tensors, key) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in tensors:
        k = key(t)
        out[k] = out.get(k, 0) + t.numel
    return out
