"""vLLM 0.33's multimodal settings: ``--limit-mm-per-prompt``, ``--mm-encoder-tp-mode`` and
``--mm-ipc-gpu-memory-gb``, as they change memory.

- ``config/multimodal.py`` ``MultiModalConfig.get_limit_per_prompt``: a modality not given is
  allowed **999** items per prompt (V0's default was 1). ``model_executor/models/interfaces.py``
  ``_mark_tower_model``: a tower whose modalities (image and video for a vision tower) are all
  limited to 0 is never built (``StageMissingLayer``): no tower weights, and ``profile_run``
  (``v1/worker/gpu/model_runner.py``) has no item to profile the encoder with.
- ``mm_encoder_tp_mode="data"``: a model class with ``supports_encoder_tp_data`` builds its tower
  with ``disable_tp`` (``is_vit_use_data_parallel``): the tower's weights whole on every TP rank
  (the batch is split instead). Other classes fall back to ``weights``.
- ``multimodal/gpu_ipc_memory.py`` ``reserve_mm_ipc_gpu_memory`` (called by ``gpu_worker.py``
  ``determine_available_memory`` on both the profiled and the ``kv_cache_memory_bytes`` path, for
  multimodal models): the KV memory loses ``mm_ipc_gpu_memory_gb · 2^30`` (the GPU video decoder's
  surfaces too, with ``video_backend`` pynvvideocodec: not modelled).
- The encoder budget (``multimodal/encoder_budget.py`` ``MultiModalBudget``,
  ``v1/core/encoder_cache_manager.py`` ``compute_mm_encoder_budget``) and the encoder outputs the
  profile run holds during the text dummy run: :mod:`~kvcalc.engines.vllm.mm_budget`, for the
  families whose largest item is derived (Qwen3-VL, Qwen3.5/3.6, Llama 4, Gemma 4); the tower's
  own activation stays inside the vision band of the estimate (said in the plan).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from kvcalc.errors import InputError
from kvcalc.frozen import frozen

if TYPE_CHECKING:
    from kvcalc.engines.vllm.mm_budget import EncoderBudget

#: vLLM's ``get_limit_per_prompt`` default for a modality not given
DEFAULT_LIMIT = 999
#: model classes with ``supports_encoder_tp_data = True`` (``model_executor/models/*.py``,
#: inherited by their subclasses) among the vision towers kvcalc counts
ENCODER_TP_DATA = frozenset((
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Llama4ForConditionalGeneration", "KimiK25ForConditionalGeneration",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration",
    "Exaone4_5_ForConditionalGeneration", "GlmOcrForConditionalGeneration",
    "QianfanOCRForConditionalGeneration", "InternVLChatModel", "NVLM_D", "H2OVLChatModel", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "Step3VLForConditionalGeneration",
    "KimiVLForConditionalGeneration", "Alpamayo2Super", "Cosmos3ForConditionalGeneration",
    "Cosmos3EdgeForConditionalGeneration",
))  # fmt: skip
#: the modalities a model class's ``_mark_tower_model`` marks its vision tower with (vLLM 0.33's
#: model files), where not image and video both: the tower is not built when every one of them is
#: limited to 0 (LLaVA-1.5's image tower with ``{"image": 0}``, LLaVA-NeXT-Video's video tower with
#: ``{"video": 0}``, Kimi-K2.5's ``vision_chunk`` one)
TOWER_MODALITIES = {
    "LlavaForConditionalGeneration": ("image",), "LlavaNextForConditionalGeneration": ("image",),
    "LlavaNextVideoForConditionalGeneration": ("video",),
    "Mistral3ForConditionalGeneration": ("image",), "Gemma3ForConditionalGeneration": ("image",),
    "Llama4ForConditionalGeneration": ("image",), "KimiK25ForConditionalGeneration": ("vision_chunk",),
    "Cohere2VisionForConditionalGeneration": ("image",),
    "Idefics3ForConditionalGeneration": ("image",), "SmolVLMForConditionalGeneration": ("image",),
    "PaddleOCRVLForConditionalGeneration": ("image",),
    "MiniCPMV4_6ForConditionalGeneration": ("image",), "MiniCPMV4_7ForConditionalGeneration": ("image",),
    "Step3VLForConditionalGeneration": ("image",), "Blip2ForConditionalGeneration": ("image",),
    "KimiVLForConditionalGeneration": ("image",),
    "GLM4VForCausalLM": (),  # glm4v.py builds its EVA2CLIP tower unmarked: never left out
    "Qwen2AudioForConditionalGeneration": ("audio",),
    "AudioFlamingo3ForConditionalGeneration": ("audio",), "GlmAsrForConditionalGeneration": ("audio",),
    "MossTranscribeDiarizeForConditionalGeneration": ("audio",),
    "Qwen3ASRForConditionalGeneration": ("audio",), "Qwen3ASRRealtimeGeneration": ("audio",),
    "GraniteSpeechForConditionalGeneration": ("audio",),
    "GraniteSpeechPlusForConditionalGeneration": ("audio",),
    "LightOnOCRForConditionalGeneration": ("image",), "Lfm2VlForConditionalGeneration": ("image",),
    "PaliGemmaForConditionalGeneration": ("image",),
    "Phi3VForCausalLM": ("image",),  # phi3v.py: its own embed_tokens inside the tower's mark too
    "BagelForConditionalGeneration": ("image",), "AriaForConditionalGeneration": ("image",),
}  # fmt: skip
#: classes with two towers marked apart (qwen2_5_omni_thinker.py, qwen3_omni_moe_thinker.py): the
#: modalities of the second tower (``VisionWeights.companion``: the audio encoder), then of the
#: vision one; both are left out only when all of them are limited to 0
TWO_TOWERS = dict.fromkeys(
    ("Qwen2_5OmniForConditionalGeneration", "Qwen2_5OmniModel",
     "Qwen3OmniMoeForConditionalGeneration"),
    (("audio",), ("image", "video")),
)  # fmt: skip
TOWER_MODALITIES.update({a: (*t[0], *t[1]) for a, t in TWO_TOWERS.items()})
VISION = ("image", "video")
_PAIR = re.compile(r"^\s*([a-z_]+)\s*=\s*(\d+)\s*$")
MODALITIES = ("image", "video", "audio")


@frozen
class MmLimits:
    """Items per prompt by modality, as vLLM reads them (a modality not given: 999)."""

    given: tuple[tuple[str, int], ...] = ()

    def limit(self, modality: str) -> int:
        return dict(self.given).get(modality, DEFAULT_LIMIT)

    @property
    def vision_off(self) -> bool:
        """Image and video both 0: the vision tower is not built."""
        return self.limit("image") == 0 and self.limit("video") == 0

    def tower_off(self, architectures: tuple[str, ...]) -> bool:
        """Every modality the model class marks its vision tower with is limited to 0: vLLM 0.33
        builds no tower (``_mark_tower_model``); a class that marks none builds it whatever the
        limits (GLM-4V's ``glm4v.py``)."""
        marked = tower_modalities(architectures)
        return bool(marked) and all(self.limit(m) == 0 for m in marked)


def tower_modalities(architectures: tuple[str, ...]) -> tuple[str, ...]:
    """The modalities the vision tower of a model class is marked with (image and video unless
    :data:`TOWER_MODALITIES` lists the class)."""
    return next((TOWER_MODALITIES[a] for a in architectures if a in TOWER_MODALITIES), VISION)


def parse_limits(text: str, *, what: str = "--limit-mm-per-prompt") -> MmLimits:
    """``{"image": 2, "video": 0}`` (vLLM's JSON, counts or ``{"count": N, ...}`` objects) or
    ``image=2,video=0``."""
    raw = str(text).strip()
    items: dict[str, int] = {}
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"{what}: not JSON ({exc.msg})", hint='e.g. \'{"image": 2, "video": 0}\'',
                             code="invalid-input") from None  # fmt: skip
        for key, value in data.items():
            count = value.get("count", DEFAULT_LIMIT) if isinstance(value, dict) else value
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise InputError(f"{what}: {key} must be a count >= 0, got {count!r}",
                                 hint='e.g. \'{"image": 2}\'', code="invalid-input")  # fmt: skip
            items[str(key)] = count
    else:
        for part in filter(None, raw.split(",")):
            match = _PAIR.match(part)
            if match is None:
                raise InputError(f"{what}: expected JSON or MODALITY=N pairs, got {part.strip()[:40]!r}",
                                 hint='e.g. \'{"image": 2, "video": 0}\' or image=2,video=0',
                                 code="invalid-input")  # fmt: skip
            items[match.group(1)] = int(match.group(2))
    return MmLimits(given=tuple(sorted(items.items())))


def encoder_tp_data(architectures: tuple[str, ...]) -> bool:
    """Whether ``--mm-encoder-tp-mode data`` takes effect (else vLLM falls back to ``weights``)."""
    return any(a in ENCODER_TP_DATA for a in architectures)


@frozen
class MmTerms:
    """What the multimodal settings change in one plan (vLLM 0.33)."""

    #: the vision tower is not built (image and video limited to 0)
    vision_off: bool = False
    #: of a model with two towers, the one not built (``companion`` or ``vision``; "": neither)
    tower_left_out: str = ""
    #: the tower's weights are whole on every TP rank (``mm_encoder_tp_mode=data``, supported)
    tower_replicated: bool = False
    #: bytes ``reserve_mm_ipc_gpu_memory`` takes off the KV memory
    ipc_bytes: int = 0
    #: ``MultiModalBudget`` (None: no tower built, an older profile, or the item size not derived)
    budget: EncoderBudget | None = None
    notes: tuple[str, ...] = ()

    @property
    def held_bytes(self) -> int:
        """The encoder outputs the profile run holds during the text dummy run (0: not derived)."""
        return (self.budget.held_bytes or 0) if self.budget is not None else 0


def vllm_mm_terms(
    *,
    architectures: tuple[str, ...],
    has_vision: bool,
    limits: str | None,
    tp_mode: str | None,
    ipc_bytes: int | None,
    tensor_parallel_size: int,
    v033: bool,
    budget: EncoderBudget | None = None,
    budget_why: str = "",
) -> MmTerms:
    """The terms of :class:`MmTerms` for a model (``has_vision``: it has a vision tower)."""
    given = limits is not None or tp_mode is not None or bool(ipc_bytes)
    if not has_vision:
        said = ("multimodal settings: a text-only model, no effect (vLLM builds no multimodal "
                "config for it)",)  # fmt: skip
        return MmTerms(notes=said if given else ())
    if not v033:
        if limits is not None and parse_limits(limits).vision_off or tp_mode == "data" or ipc_bytes:
            raise InputError("--limit-mm-per-prompt 0, --mm-encoder-tp-mode data and "
                             "--mm-ipc-gpu-memory-gb are modelled for vLLM 0.33 only",
                             hint="plan with --engine-version 0.33", code="unmodelled-option")  # fmt: skip
        return MmTerms()
    notes: list[str] = []
    mm = parse_limits(limits) if limits is not None else MmLimits()
    off = mm.tower_off(architectures)
    towers = next((TWO_TOWERS[a] for a in architectures if a in TWO_TOWERS), ())
    # of two towers, the one whose modalities are all limited to 0 (not both: ``off``)
    gone = next((i for i, t in enumerate(towers) if all(mm.limit(m) == 0 for m in t)), None)
    left_out = "" if off or gone is None else ("companion" if gone == 0 else "vision")
    if left_out:
        zero = ", ".join(f"{m} 0" for m in towers[gone or 0])
        what = "audio encoder" if left_out == "companion" else "vision tower"
        notes.append(f"--limit-mm-per-prompt {zero}: vLLM builds no {what} (_mark_tower_model), "
                     "the other tower as usual")  # fmt: skip
    if off:
        zero = ", ".join(f"{m} 0" for m in tower_modalities(architectures))
        notes.append(f"--limit-mm-per-prompt {zero}: vLLM builds no vision tower "
                     "(_mark_tower_model): no tower weights, no encoder profile")  # fmt: skip
    elif given:
        shown = ", ".join(f"{m} {mm.limit(m)}" for m in ("image", "video"))
        notes.append(
            f"multimodal limits per prompt: {shown} (vLLM 0.33's default 999 where not given)"
        )
    if not off:
        notes.append(budget_note(budget, budget_why))
    replicated = False
    if tp_mode == "data" and not off:
        if encoder_tp_data(architectures):
            replicated = tensor_parallel_size > 1
            notes.append("--mm-encoder-tp-mode data: the vision tower's weights whole on every "
                         "TP rank (disable_tp), the image batch split instead")  # fmt: skip
        else:
            notes.append("--mm-encoder-tp-mode data: this model class has no "
                         "supports_encoder_tp_data, vLLM falls back to weights (split)")  # fmt: skip
    ipc = ipc_bytes or 0
    if ipc:
        notes.append(f"--mm-ipc-gpu-memory-gb: {ipc:,} B held for frontend multimodal decoding, out "
                     "of the KV memory (reserve_mm_ipc_gpu_memory)")  # fmt: skip
    return MmTerms(vision_off=off, tower_left_out=left_out, tower_replicated=replicated,
                   ipc_bytes=ipc, budget=None if off else budget, notes=tuple(notes))  # fmt: skip


def budget_note(budget: EncoderBudget | None, why: str) -> str:
    """What the plan says of vLLM's encoder budget and the profile's multimodal terms."""
    if budget is None:
        return (f"encoder budget: not derived ({why}): max(max_num_batched_tokens, the largest "
                "item's tokens) needs the item size; the encoder outputs held during the text "
                "dummy run and the tower's profile peak stay inside the vision band")  # fmt: skip
    if budget.profiled is None:
        return (
            "encoder budget 0: every modality the tower serves is limited to 0, no encoder profile"
        )
    items = ", ".join(f"{m} {t:,}" for m, t in budget.max_tokens_per_item)
    n, item = budget.profiled_items, budget.profiled_item_tokens
    text = (
        f"encoder budget (MultiModalBudget): largest item {items} tokens; compute budget "
        f"{budget.compute_budget_tokens:,}, encoder cache {budget.cache_size_tokens:,} tokens "
        f"(max of max_num_batched_tokens and the largest item); the profile runs the tower on "
        f"{n} {budget.profiled} item{'s' if n != 1 else ''} of {item:,} tokens"
    )
    if budget.held_bytes is None:
        return (text + "; the outputs it holds during the text dummy run are not derived for this "
                "tower (its embeddings per item differ from the placeholders): they and the "
                "tower's own peak stay inside the vision band")  # fmt: skip
    return (text + f" and holds their outputs ({n} × {item:,} × {budget.output_width:,} values, "
            f"{budget.held_bytes / 2**30:.2f} GiB) through the text dummy run: added to the "
            "activation peak; the tower's own activation stays inside the vision band")  # fmt: skip
