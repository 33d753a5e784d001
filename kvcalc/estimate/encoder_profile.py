"""The vision encoder in vLLM V0's profile run, for Qwen2.5-VL (``qwen2_5_vl``), per TP rank.

Read in vLLM 0.8.3 (``VLLM_USE_V1=0``): ``worker/model_runner.py`` ``_dummy_run`` builds
``n = max(1, min(max_num_seqs, max_num_batched_tokens // max_mm_tokens))`` dummy sequences of
``max_num_batched_tokens // n`` tokens each (``MultiModalProfiler.get_decoder_dummy_data``); each
holds ``--limit-mm-per-prompt`` items (default one image and one video) of the largest size:
``Qwen2VLProcessingInfo.get_image_size_with_most_features`` resizes a 9,999,999-pixel square to
``max_pixels`` (12,845,056 in the published ``preprocessor_config.json``: 3,584 × 3,584, 256 × 256
patches, 16,384 tokens after the 2 × 2 merge); the video gets the frames the sequence has room for
(at least one, at most 16, padded to the temporal patch). V0 does not cut the prompt: when the
items hold more tokens than the sequence, the text forward runs over all of them.

``Qwen2_5_VLForConditionalGeneration.forward`` (V0 path) embeds the prompt, runs the tower on the
pixels (``_process_image_input``: ``pixel_values.type(bf16)``), scatters the image embeddings into
the prompt and runs the text model. Held for the whole forward: the batched fp32 pixels (the
kwargs ``nn.Module._call_impl`` keeps) and their ``torch.concat`` copy
(``_validate_and_reshape_mm_tensor``). The peak is the largest of these moments (``S`` patches,
``T`` prompt tokens, ``a = S·hv·2 B``, widths per rank):

- tower, qkv all-gather (TP > 1): block input, its norm, the qkv output and twice the gathered qkv
  (``all_gather`` allocates ``world × input`` and reshapes it through ``movedim``: a copy);
- tower, rotary (``apply_rotary_pos_emb_vision``: fp32 copies; the PyTorch path, as in a pip
  install without ``flash-attn``, whose attention backend is xFormers — no ``S × S`` buffer);
- tower, MLP: block input, attention sum, its norm, gate (after SiLU), up, their product, down and
  (TP > 1) pynccl's out-of-place all-reduce; the merger (RMSNorm, linear + GELU, linear);
- text MLP (decoder layers after the first): residual, the layer's input (the previous layer's
  output, held by the module call), the MLP input, ``gate_up`` (``Qwen2MLP`` keeps it during
  ``down_proj``), ``silu_and_mul``'s output, ``down_proj``'s and (TP > 1) the all-reduce's:
  ``T · 2 B · (4H + 3I/tp)`` plus ``T·H·2`` with TP.

Checked: vllm-16570 (Qwen2.5-VL-72B, TP 4, ``--max-model-len 4096 --limit-mm-per-prompt
image=1,video=0``): 2.501 GiB (the text MLP moment), vLLM printed "PyTorch activation peak memory
takes 2.51GiB"; ``bench/vl_profile_replay.py`` replays 0.8.3's forward op by op on the meta device
and gives the same bytes (``tests/fixtures/vl_profile_replay.json``). Not read: the 0.7 releases,
0.8.4 on, V1 (its encoder budget is another rule), other towers.
"""

from __future__ import annotations

import math

from kvcalc.frozen import frozen
from kvcalc.hfconfig.weight_shape import WeightShape
from kvcalc.hfconfig.weight_shape_extra import VisionWeights

#: ``max_pixels`` of the published Qwen2.5-VL ``preprocessor_config.json`` (16,384 × 28 × 28)
QWEN2_5_VL_MAX_PIXELS = 12_845_056
#: ``_MAX_FRAMES_PER_VIDEO`` (``model_executor/models/qwen2_vl.py``, 0.8.3)
MAX_FRAMES_PER_VIDEO = 16
_BF16, _FP32, _INT64 = 2, 4, 8


@frozen
class DummyItem:
    """One image or video of the profile run, as patches on the tower's grid."""

    modality: str
    grid_t: int
    grid_side: int
    merge: int
    patch: int = 14

    @property
    def patches(self) -> int:
        return self.grid_t * self.grid_side**2

    @property
    def tokens(self) -> int:
        return self.patches // self.merge**2


@frozen
class EncoderProfile:
    """The profile run's multimodal terms on one TP rank."""

    sequences: int
    #: the items of one sequence
    items: tuple[DummyItem, ...]
    #: the text forward's tokens (every sequence, the items' placeholders included)
    prompt_tokens: int
    #: the fp32 pixels held through the forward (the batch and its concatenated copy)
    held_input_bytes: int
    tower_peak_bytes: int
    text_peak_bytes: int

    @property
    def peak_bytes(self) -> int:
        return max(self.tower_peak_bytes, self.text_peak_bytes)

    def note(self) -> str:
        gib = 1 << 30
        what = ", ".join(f"{i.modality} {i.grid_side * i.patch}² ({i.patches:,} patches, "
                         f"{i.tokens:,} tokens)" for i in self.items)  # fmt: skip
        where = "the text forward" if self.text_peak_bytes >= self.tower_peak_bytes else "the tower"
        return (
            f"vision encoder (V0 profile run, read in vLLM 0.8.3): {self.sequences} dummy "
            f"sequence(s) with {what or 'no items'}; the text forward runs over "
            f"{self.prompt_tokens:,} tokens; peak {self.peak_bytes / gib:.2f} GiB in {where} "
            f"(tower {self.tower_peak_bytes / gib:.2f}, text {self.text_peak_bytes / gib:.2f}, "
            f"fp32 pixels held {self.held_input_bytes / gib:.2f})"
        )


def largest_side(max_pixels: int, factor: int) -> int:
    """``smart_resize`` (transformers' Qwen2-VL image processor) of a 9,999,999-pixel square:
    the side vLLM's dummy image gets."""
    side = 9_999_999
    beta = math.sqrt(side * side / max_pixels)
    return max(factor, math.floor(side / beta / factor) * factor)


def v0_qwen2_5_vl_profile(
    w: WeightShape,
    *,
    tensor_parallel_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    images: int = 1,
    videos: int = 1,
    max_pixels: int = QWEN2_5_VL_MAX_PIXELS,
) -> EncoderProfile:
    """The V0 profile run's multimodal peak for a Qwen2.5-VL config (see the module doc).
    ``max_model_len`` is taken as ``max_num_batched_tokens`` (V0 runs a multimodal model's prompt
    whole: at least max_model_len tokens)."""
    v = w.vision
    if v is None or v.family != "qwen2_5_vl" or w.mlp is None:
        raise ValueError("v0_qwen2_5_vl_profile needs a Qwen2.5-VL tower and a dense text stack")
    tp, unit = tensor_parallel_size, v.spatial_merge_size**2
    grid = largest_side(max_pixels, v.patch_size * v.spatial_merge_size) // v.patch_size
    image = DummyItem(modality="image", grid_t=1, grid_side=grid, merge=v.spatial_merge_size,
                      patch=v.patch_size)  # fmt: skip
    tokens, seqs = max_num_batched_tokens, max_num_seqs
    video_max = _video(v, grid, tokens - image.tokens * images, videos)
    most = image.tokens * images + video_max.tokens * videos
    n = max(1, min(seqs, tokens // most)) if most else seqs
    seq_len = tokens // n
    video = _video(v, grid, seq_len - image.tokens * images, videos)
    items = (image,) * images + (video,) * videos
    mm_tokens = sum(i.tokens for i in items)
    prompt = n * max(mm_tokens, seq_len)
    per_patch = v.num_channels * v.temporal_patch_size * v.patch_size**2
    held = 2 * n * sum(i.patches for i in items) * per_patch * _FP32
    ids = 4 * prompt * _INT64  # input ids and the (3, T) M-RoPE positions
    h, inter = w.hidden_size, w.mlp.intermediate_size // tp
    embeds = prompt * h * _BF16
    tower = 0
    for modality in ("image", "video"):
        s = n * sum(i.patches for i in items if i.modality == modality)
        if s:
            base = held + ids + embeds + s * per_patch * _BF16 + _rope_bytes(v, s, grid, unit)
            tower = max(tower, base + _block_peak(v, s, tp))
    freqs = 2 * grid * (v.head_dim // 4) * _FP32  # the tower's frequency cache, kept
    text = held + ids + freqs + prompt * _BF16 * ((5 if tp > 1 else 4) * h + 3 * inter)
    return EncoderProfile(sequences=n, items=items, prompt_tokens=prompt, held_input_bytes=held,
                          tower_peak_bytes=tower, text_peak_bytes=text)  # fmt: skip


def _video(v: VisionWeights, grid: int, room_tokens: int, videos: int) -> DummyItem:
    """``get_num_frames_with_most_features``: the frames ``room_tokens`` hold, shared by the
    videos, at most 16 each, at least one; frames pad to the temporal patch."""
    per_t = grid * grid // v.spatial_merge_size**2
    frames = 0
    while (
        frames + 1 + (frames + 1) % v.temporal_patch_size
    ) // v.temporal_patch_size * per_t <= room_tokens:
        frames += 1  # fmt: skip
    frames = max(min(frames // max(videos, 1), MAX_FRAMES_PER_VIDEO), 1)
    grid_t = max((frames + frames % v.temporal_patch_size) // v.temporal_patch_size, 1)
    return DummyItem(modality="video", grid_t=grid_t, grid_side=grid, merge=v.spatial_merge_size,
                     patch=v.patch_size)  # fmt: skip


def _rope_bytes(v: VisionWeights, s: int, grid: int, unit: int) -> int:
    """The tower's rotary table (``S × head_dim/2`` fp32), the window index and the frequency
    cache (``2·grid × head_dim/4`` fp32, kept by the module)."""
    hd = v.head_dim
    return s * hd // 2 * _FP32 + s // unit * _INT64 + 2 * grid * (hd // 4) * _FP32


def _block_peak(v: VisionWeights, s: int, tp: int) -> int:
    """The largest moment of a tower block and of the merger above the tower's base."""
    hv, hd = v.hidden_size, v.head_dim
    a, q = s * hv * _BF16, s * hv // tp  # one hidden state; one q/k/v width per rank (values)
    qkv = s * 3 * hv // tp * _BF16
    gather = 2 * s * 3 * hv * _BF16 if tp > 1 else 0
    rotary = 3 * q * _BF16 + 5 * q * _FP32 + 2 * s * hd * _FP32
    mlp = (4 + (tp > 1)) * a + 3 * s * (v.intermediate_size // tp) * _BF16
    merged = s // v.spatial_merge_size**2
    fc1 = merged * hv * v.spatial_merge_size**2 // tp * _BF16
    fc2 = merged * v.projector_output_dim * _BF16
    merger = 2 * a + max(2 * fc1, fc1 + (1 + (tp > 1)) * fc2)  # linear + GELU, then fc2 (+ AR)
    return max(2 * a + qkv + gather, 2 * a + qkv + rotary, mlp, merger)
