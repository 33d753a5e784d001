"""vLLM 0.33's multimodal encoder budget and the encoder outputs its profile run holds.

Read in vLLM 0.33.0:

- ``multimodal/encoder_budget.py`` ``MultiModalBudget`` (built by both GPU model runners for
  ``profile_run``): the modalities with a limit above 0 (``--limit-mm-per-prompt``, 999 where not
  given) among those the model supports; the largest item of each
  (``get_mm_max_toks_per_item``: the processing info's ``get_mm_max_tokens_per_item``, or the
  embeddings of the dummy inputs through the HF processor);
- ``v1/core/encoder_cache_manager.py`` ``compute_mm_encoder_budget``: compute budget =
  max(``max_num_encoder_input_tokens``, the largest item), cache size = max(``encoder_cache_size``,
  the largest item), both scheduler fields equal to ``max_num_batched_tokens``
  (``config/scheduler.py``); the budget is the smaller of the two;
- ``_get_max_items``: per prompt max(1, min(limit, ``max_model_len`` // item)), per batch max(1,
  min(budget // item, ``max_num_seqs`` × per prompt)) (chunked prefill on, as V1 runs);
- ``profile_run`` (``v1/worker/gpu_model_runner.py``; ``v1/worker/gpu/mm/encoder_runner.py``
  ``profile_encoder_cache`` in model runner V2): the modality with the most tokens per item
  (ties: the later name), that many items through ``embed_multimodal``, the outputs kept in the
  encoder cache (``tmp_i``) while the text dummy run over ``max_num_batched_tokens`` follows;
  cleared after it. The outputs are views of the batch's one projector output: items × tokens ×
  width × the model dtype, live at the text run's peak.
  (Model runner V2, 0.33's default, moves the dummy pixels to the GPU inside
  ``execute_mm_encoder`` only; the V1 runner keeps its batched pixels to the end: not counted.)

The largest item per family (the processor's sizes: :class:`ProcessorSizes`):

- Qwen3-VL and Qwen3.5/3.6 (``Qwen3VLProcessingInfo``): the image is the factor pair of
  ``longest_edge // (patch · merge)²`` merged patches (fewer while the sides' ratio is over 200,
  ``get_image_size_with_most_features``) through ``smart_resize``; the video one 2-frame clip of
  ``video longest_edge // temporal_patch_size`` pixels through the video ``smart_resize``. The
  outputs are ``out_hidden_size × (1 + DeepStack levels)`` wide (the DeepStack features ride in
  the same tensor until the text model splits them).
- Llama 4 (``Mllama4ProcessingInfo``, the dummy image's embeddings): a 16:1 image of
  ``max_patches`` tiles plus the global tile, ``(image_size / patch)² / (1 / pixel_shuffle_ratio²)``
  each; outputs ``text hidden_size`` wide (``multi_modal_projector``, gathered).
- Gemma 4 (``Gemma4ProcessingInfo.get_mm_max_tokens_per_item``): the image
  ``vision_config.default_output_length``, the video 32 frames × (70 + 2 + 6), audio (a model with
  ``audio_config``) the processor's ``audio_seq_length``. Those are placeholder counts: the
  embeddings the tower returns for the dummy items are fewer and not derived, so the held outputs
  stay in the vision band.

Not derived (the band as before): Qwen2.5-VL (its video item depends on the frames the prompt has
room for), SigLIP (Gemma 3), Pixtral, and towers kvcalc does not count. The tower's own
activation during ``embed_multimodal`` is never derived: it stays in the vision band.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kvcalc.frozen import frozen

if TYPE_CHECKING:
    from kvcalc.hfconfig.weight_shape_extra import VisionWeights

#: Gemma 4 (``model_executor/models/gemma4_mm.py``): frames per dummy video and soft tokens per frame
GEMMA4_VIDEO_FRAMES = 32
GEMMA4_VIDEO_FRAME_TOKENS = 70 + 2 + 6
#: ``get_image_size_with_most_features``: the widest aspect ratio the factor pair may have
MAX_ASPECT = 200


@frozen
class ProcessorSizes:
    """The ``preprocessor_config.json`` values the item sizes come from. The defaults are what
    the Qwen3-VL and Qwen3.5 checkpoints ship (``size``: image 65,536 to 16,777,216 pixels, video
    4,096 to 25,165,824), Llama 4's ``Llama4ImageProcessor.max_patches`` (16) and Gemma 4's
    ``Gemma4Processor.audio_seq_length`` (750); a checkpoint shipping others is not read."""

    image_min_pixels: int = 65_536
    image_max_pixels: int = 16_777_216
    video_min_pixels: int = 4_096
    video_max_pixels: int = 25_165_824
    video_temporal_patch_size: int = 2
    llama4_max_patches: int = 16
    gemma4_audio_seq_length: int = 750


#: the Qwen processors' class defaults (``Qwen2VLImageProcessor.size``, ``Qwen3VLVideoProcessor.size``):
#: what vLLM reads from a ``preprocessor_config.json`` naming the classes only
QWEN_CLASS_DEFAULTS = ProcessorSizes(image_min_pixels=56 * 56, image_max_pixels=28 * 28 * 1280,
                                     video_min_pixels=128 * 32 * 32, video_max_pixels=32 * 32 * 768)  # fmt: skip


@frozen
class EncoderBudget:
    """``MultiModalBudget`` for one deployment."""

    #: tokens of the largest item, by modality (the tower's modalities with a limit above 0)
    max_tokens_per_item: tuple[tuple[str, int], ...]
    compute_budget_tokens: int
    cache_size_tokens: int
    items_per_prompt: tuple[tuple[str, int], ...]
    items_per_batch: tuple[tuple[str, int], ...]
    #: the modality the profile runs (None: no item to profile)
    profiled: str | None
    #: bytes of the encoder outputs held during the text dummy run; None: not derived
    held_bytes: int | None
    #: the outputs' width per token (values), 0 where not derived
    output_width: int = 0

    @property
    def budget_tokens(self) -> int:
        return min(self.compute_budget_tokens, self.cache_size_tokens)

    @property
    def profiled_items(self) -> int:
        return dict(self.items_per_batch).get(self.profiled or "", 0)

    @property
    def profiled_item_tokens(self) -> int:
        return dict(self.max_tokens_per_item).get(self.profiled or "", 0)


def _factor_pair(n: int) -> tuple[int, int]:
    for d in range(math.isqrt(n), 0, -1):
        if n % d == 0:
            return d, n // d
    return 1, n


def most_features(max_pixels: int, unit: int) -> tuple[int, int]:
    """(height, width) of ``get_image_size_with_most_features``."""
    height, width = 1, max_pixels // (unit * unit)
    for seq in range(max_pixels // (unit * unit), 0, -1):
        height, width = _factor_pair(seq)
        if width / height <= MAX_ASPECT:
            break
    return unit * height, unit * width


def smart_resize(height: int, width: int, *, factor: int, min_pixels: int, max_pixels: int,
                 frames: int = 0, temporal: int = 2) -> tuple[int, int]:  # fmt: skip
    """transformers' Qwen2-VL image ``smart_resize`` (``frames`` 0) or Qwen3-VL video one."""
    if frames and (height < factor or width < factor):
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(frames / temporal) * temporal if frames else 1
    t = frames or 1
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt(t * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (t * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def supported_modalities(vision: VisionWeights) -> tuple[str, ...]:
    """The modalities the model's processing info supports, for the families derived here."""
    if vision.family == "llama4":
        return ("image",)
    if vision.family == "gemma4":
        return ("image", "video", "audio") if vision.audio else ("image", "video")
    return ("image", "video")


def max_tokens_per_item(vision: VisionWeights, sizes: ProcessorSizes) -> dict[str, int] | None:
    """The largest item's tokens by supported modality; None where the family is not derived."""
    if vision.family == "qwen3_vl":
        patch, merge = vision.patch_size, vision.spatial_merge_size
        unit = patch * merge
        h, w = most_features(sizes.image_max_pixels, unit)
        h, w = smart_resize(h, w, factor=unit, min_pixels=sizes.image_min_pixels,
                            max_pixels=sizes.image_max_pixels)  # fmt: skip
        image = (h // patch) * (w // patch) // merge**2
        h, w = most_features(sizes.video_max_pixels // sizes.video_temporal_patch_size, unit)
        h, w = smart_resize(h, w, factor=unit, min_pixels=sizes.video_min_pixels,
                            max_pixels=sizes.video_max_pixels, frames=2,
                            temporal=vision.temporal_patch_size)  # fmt: skip
        grid_t = max(-(-2 // vision.temporal_patch_size), 1)  # 2 frames padded to the patch
        video = grid_t * (h // patch) * (w // patch) // merge**2
        return {"image": image, "video": video}
    if vision.family == "llama4":
        ds = int(round(1.0 / vision.pixel_shuffle_ratio**2))
        per_tile = (vision.image_size // vision.patch_size) ** 2 // ds
        tiles = sizes.llama4_max_patches + 1 if sizes.llama4_max_patches > 1 else 1
        return {"image": tiles * per_tile}
    if vision.family == "gemma4" and vision.default_output_length:
        tokens = {"image": vision.default_output_length,
                  "video": GEMMA4_VIDEO_FRAMES * GEMMA4_VIDEO_FRAME_TOKENS}  # fmt: skip
        if vision.audio:
            tokens["audio"] = sizes.gemma4_audio_seq_length
        return tokens
    return None


def output_width(vision: VisionWeights) -> int:
    """Values per token of ``embed_multimodal``'s outputs; 0 where not derived."""
    if vision.family == "qwen3_vl":
        return vision.projector_output_dim * (1 + vision.deepstack_layers)
    if vision.family == "llama4":
        return vision.text_hidden_size
    return 0


def encoder_budget(
    vision: VisionWeights,
    *,
    limits: dict[str, int],
    max_num_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    dtype_bytes: int = 2,
    sizes: ProcessorSizes | None = None,
) -> EncoderBudget | None:
    """``MultiModalBudget`` for ``vision`` (``limits``: items per prompt by modality, a modality
    missing meaning 999); None where the family's item size is not derived."""
    tokens = max_tokens_per_item(vision, sizes or ProcessorSizes())
    if tokens is None:
        return None
    limit = {m: limits.get(m, 999) for m in supported_modalities(vision)}
    tower = {m: t for m, t in tokens.items() if limit.get(m, 0) > 0}
    if not tower:
        return EncoderBudget(max_tokens_per_item=(), compute_budget_tokens=0, cache_size_tokens=0,
                             items_per_prompt=(), items_per_batch=(), profiled=None, held_bytes=0)  # fmt: skip
    largest = max(tower.values())
    compute = max(max_num_batched_tokens, largest)
    cache = max(max_num_batched_tokens, largest)
    budget = min(compute, cache)
    per_prompt: dict[str, int] = {}
    per_batch: dict[str, int] = {}
    for modality, item in tower.items():
        if item == 0:
            per_prompt[modality], per_batch[modality] = 0, 0
            continue
        per_prompt[modality] = max(1, min(limit[modality], max_model_len // item))
        per_batch[modality] = max(1, min(budget // item, max_num_seqs * per_prompt[modality]))
    profiled, _ = max(tower.items(), key=lambda kv: (kv[1], kv[0]))
    width = output_width(vision)
    held = per_batch[profiled] * tower[profiled] * width * dtype_bytes if width else None
    return EncoderBudget(
        max_tokens_per_item=tuple(sorted(tower.items())),
        compute_budget_tokens=compute,
        cache_size_tokens=cache,
        items_per_prompt=tuple(sorted(per_prompt.items())),
        items_per_batch=tuple(sorted(per_batch.items())),
        profiled=profiled,
        held_bytes=held,
        output_width=width,
    )
