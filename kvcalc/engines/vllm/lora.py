"""vLLM 0.33's LoRA adapter slots: the bytes ``--enable-lora`` allocates per GPU before the KV budget.

``v1/worker/gpu/model_runner.py`` ``load_model`` calls ``load_lora_model``
(``v1/worker/lora_model_runner_mixin.py``) inside the weights' ``DeviceMemoryProfiler``: the slots
are part of "Model loading took X GiB", before the profile run and the KV budget.
``lora/model_manager.py`` ``LoRAModelManager._create_lora_modules`` wraps every module whose name
ends like a ``LinearBase``/``MoERunner`` module or a key of the model class's
``embedding_modules`` (``lora/utils.py`` ``get_supported_lora_modules``), and each wrapper's
``create_lora_weights`` allocates ``max_loras`` slots of rank r = ``max_lora_rank`` in
``lora_dtype`` (the model dtype by default). Per slot, per GPU:

- column-parallel (``lora/layers/column_parallel_linear.py``; qkv: 3 slices, gate_up: 2), per
  slice: A = r × full input, B = output per partition × r;
- row-parallel (``row_parallel_linear.py``, with ``base_linear.py``
  ``BaseLinearLayerWithLoRA.create_lora_weights``): A = r × input per partition, B = full output × r;
- replicated (``replicated_linear.py``: MoE routers): A = r × input, B = output × r;
- ``embed_tokens`` (``vocab_parallel_embedding.py``): A = vocab × r, B = hidden × r, unsplit;
- ``lm_head`` through ``LogitsProcessorWithLoRA`` (``logits_processor.py``): A = r × hidden,
  B = vocab × r, unsplit; it refuses a vocabulary above 258,048;
- fused MoE (``fused_moe.py`` ``FusedMoEWithLoRA._create_lora_a_weights``/``_b_weights``), per
  local expert: w13 = slices (2 if gated) × (r × hidden + intermediate per partition × r), w2 =
  r × intermediate per partition + hidden × r;
- ``fully_sharded_loras`` (the ``*WithShardedLoRA`` classes): A's rank split over TP in column
  layers (and MoE w13), B's output split over TP in row layers (and MoE w2).

Checked against vLLM's own code on the meta device (``deploy_probe.py``, the
``tests/fixtures/vllm_lora_slots.yaml`` records: Llama-3.1-8B TP 1, 4 slots of rank 64 →
1,477,705,728 B). MoE LoRA cannot be built on the emulated platform ("Old-style modular kernel not
supported"): its formula is the source's, unconfirmed by a run.

Which modules a model class wraps depends on its ``embedding_modules``: the architectures below are
the ones whose vLLM class was read; any other is refused (``lora-not-modelled``) rather than guessed.
"""

from __future__ import annotations

from kvcalc.engines.lora_options import VLLM_LORA_RANKS, LoraOptions
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape

#: vLLM's vocabulary limit for LoRA (``LogitsProcessorWithLoRA.create_lora_weights``)
MAX_LORA_VOCAB = 258_048

#: architecture → (``embed_tokens`` wrapped, ``lm_head`` wrapped), from the class's
#: ``embedding_modules`` in vLLM 0.33 (``model_executor/models/*.py``); MoE marks what is unconfirmed
_ARCHITECTURES: dict[str, tuple[bool, bool]] = {
    "LlamaForCausalLM": (True, True),  # llama.py LlamaForCausalLM.embedding_modules
    "Qwen3ForCausalLM": (True, True),  # qwen3.py Qwen3ForCausalLM.embedding_modules
    "GraniteForCausalLM": (True, True),  # granite.py
    "MistralForCausalLM": (False, False),  # mistral.py: embedding_modules = {}
    "Qwen2ForCausalLM": (False, False),  # qwen2.py: SupportsLoRA's default {}
    "Gemma2ForCausalLM": (False, False),  # gemma2.py: SupportsLoRA's default {}
    "Qwen3MoeForCausalLM": (True, True),  # qwen3_moe.py (MoE: unconfirmed by a run)
    "MixtralForCausalLM": (True, True),  # mixtral.py (MoE: unconfirmed by a run)
}
_QKV = ("q_proj", "k_proj", "v_proj")
_GATE_UP = ("gate_proj", "up_proj")


@frozen
class LoraSlots:
    """The adapter slots one GPU holds."""

    #: all slots, per GPU
    bytes_per_gpu: int
    #: per vLLM LoRA layer class (``MergedQKVParallelLinear``, ``FusedMoE``, ...), per GPU
    by_class: tuple[tuple[str, int], ...]
    #: the slots include fused-MoE experts, whose formula no run has confirmed
    moe_unconfirmed: bool
    notes: tuple[str, ...] = ()
    #: vLLM's "Model loading took" includes the slots (a given ``--weights-memory`` holds them)
    measured_with_weights: bool = True


def _refuse(message: str, hint: str) -> InputError:
    return InputError(message, hint=hint, code="lora-refused")


def _unmodelled(message: str, hint: str) -> InputError:
    return InputError(message, hint=hint, code="lora-not-modelled")


def check_lora_options(options: LoraOptions, tensor_parallel_size: int) -> None:
    """The settings vLLM refuses before it builds anything (``config/lora.py`` ``LoRAConfig``)."""
    if options.target_modules is not None:
        raise _unmodelled("--lora-target-modules is modelled for SGLang only; vLLM's "
                          "--lora-target-modules is not modelled",
                          "plan vLLM without it (every supported module wrapped)")  # fmt: skip
    if options.max_lora_rank not in VLLM_LORA_RANKS:
        raise _refuse(f"vLLM takes no --max-lora-rank {options.max_lora_rank}",
                      "choose one of " + ", ".join(map(str, VLLM_LORA_RANKS)) + " (MaxLoRARanks)")  # fmt: skip
    if options.max_cpu_loras is not None and options.max_cpu_loras < options.max_loras:
        raise _refuse(f"max_cpu_loras ({options.max_cpu_loras}) must be >= max_loras "
                      f"({options.max_loras}), as vLLM's LoRAConfig says",
                      "raise --max-cpu-loras or leave it out (default: --max-loras)")  # fmt: skip
    if options.fully_sharded_loras and options.max_lora_rank % tensor_parallel_size:
        raise _refuse(f"--fully-sharded-loras splits the rank {options.max_lora_rank} over "
                      f"{tensor_parallel_size} ranks: not divisible (vLLM's divide() fails)",
                      "choose a rank divisible by --tensor-parallel-size")  # fmt: skip


def _dtype_bytes(options: LoraOptions, weight_dtype: str | None) -> int:
    """``lora_dtype``: float16/bfloat16 = 2 bytes; auto = the model's dtype (``verify_with_model_config``),
    4 bytes only when the model is served in float32."""
    if options.lora_dtype != "auto":
        return 2
    return 4 if weight_dtype == "float32" else 2


def vllm_lora_slots(
    model: ModelShape,
    options: LoraOptions,
    *,
    tensor_parallel_size: int,
    pipeline_parallel_size: int = 1,
    weight_dtype: str | None = None,
) -> LoraSlots:
    """The slots of ``options`` on one GPU of ``model`` at ``tensor_parallel_size``.

    ``weight_dtype`` is ``--dtype`` (None: the model's)."""
    from kvcalc.estimate.tensors import inventory

    check_lora_options(options, tensor_parallel_size)
    arch = model.architectures[0] if model.architectures else model.model_type
    if arch not in _ARCHITECTURES:
        raise _unmodelled(
            f"LoRA slots are not modelled for {arch}",
            "kvcalc sizes vLLM's LoRA slots for " + ", ".join(sorted(_ARCHITECTURES))
            + "; plan without --enable-lora and add the slots to --weights-memory",
        )  # fmt: skip
    if pipeline_parallel_size > 1:
        raise _unmodelled("LoRA slots with pipeline parallelism are not modelled",
                          "plan with -pp 1, or without --enable-lora")  # fmt: skip
    w = model.weights
    if w is None or getattr(w, "problem", None):
        raise _unmodelled(f"LoRA slots need the model's weight dimensions: "
                          f"{getattr(w, 'problem', 'none')}", "plan without --enable-lora")  # fmt: skip
    embed, head = _ARCHITECTURES[arch]
    if head and w.vocab_size > MAX_LORA_VOCAB:
        raise _refuse(f"vLLM refuses LoRA on {model.name}: vocab size {w.vocab_size:,} > "
                      f"{MAX_LORA_VOCAB:,} (\"When using LoRA, vocab size must be <= 258048\")",
                      "serve it without --enable-lora")  # fmt: skip
    tp, r, fs = tensor_parallel_size, options.max_lora_rank, options.fully_sharded_loras
    values: dict[str, int] = {}

    def add(cls: str, n: int) -> None:
        values[cls] = values.get(cls, 0) + n

    moe = False
    for t in inventory(w):
        if t.vision:
            continue
        if t.expert and t.role == "linear":
            moe = True
            add("FusedMoE", _expert_values(t, w, r, tp, fs))
        elif t.role in ("linear", "router"):
            add(_class_of(t), _linear_values(t, r, tp, fs))
    if embed:
        add("VocabParallelEmbedding", w.vocab_size * r + w.hidden_size * r)
    if head:
        add("LogitsProcessor", r * w.hidden_size + w.vocab_size * r)
    size = _dtype_bytes(options, weight_dtype)
    by_class = tuple((k, v * size * options.max_loras) for k, v in values.items())
    total = sum(b for _, b in by_class)
    notes = [
        f"LoRA: {options.max_loras} slot(s) of rank {r}, {total:,} B per GPU in the weights "
        "(vLLM allocates them inside 'Model loading', before the KV budget"
        + ("; fused-MoE expert slots from the source formula, unconfirmed by a run" if moe else "")
        + ")",
        f"LoRA: up to {options.cpu_loras} adapter(s) in host memory (max_cpu_loras), at their "
        "checkpoint size: not known to kvcalc",
    ]
    return LoraSlots(bytes_per_gpu=total, by_class=by_class, moe_unconfirmed=moe,
                     notes=tuple(notes))  # fmt: skip


def _class_of(t) -> str:
    leaf = t.name.rpartition(".")[2]
    if t.split in ("column", "kv") and leaf in _QKV:
        return "MergedQKVParallelLinear"
    if t.split == "column" and leaf in _GATE_UP:
        return "MergedColumnParallelLinear"
    if t.split == "column":
        return "ColumnParallelLinear"
    if t.split == "row":
        return "RowParallelLinear"
    return "ReplicatedLinear"


def _linear_values(t, r: int, tp: int, fs: bool) -> int:
    """One slot of one slice: A (rank × input) + B (output × rank) on one rank."""
    rows, cols = t.shape_per_rank(tp)
    if t.split in ("column", "kv"):
        return (r // tp if fs else r) * cols + rows * r
    if t.split == "row":
        return r * cols + (rows // tp if fs else rows) * r
    return r * cols + rows * r


def _expert_values(t, w, r: int, tp: int, fs: bool) -> int:
    """``FusedMoEWithLoRA``: every (local) expert's w13 or w2 slot, tensor-parallel only."""
    m = w.moe
    hidden = m.latent_size or w.hidden_size
    inter = m.expert_intermediate_size // tp
    if t.split == "column":  # w13: gate and up slices
        slices = 2 if m.gated else 1
        per_expert = slices * ((r // tp if fs else r) * hidden + inter * r)
    else:  # w2
        per_expert = r * inter + (hidden // tp if fs else hidden) * r
    return per_expert * m.num_experts
