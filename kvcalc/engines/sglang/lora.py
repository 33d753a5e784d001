"""SGLang 0.5.23's LoRA memory pool: the bytes ``--enable-lora`` allocates per GPU before the KV pool.

``model_executor/model_runner.py`` ``initialize`` runs ``load_model`` ("Load weight end ... mem
usage", the weights alone), then ``maybe_init_lora_manager`` → ``init_lora_manager`` builds
``lora/lora_manager.py`` ``LoRAManager``, whose ``init_memory_pool`` allocates
``lora/mem_pool.py`` ``LoRAMemoryPool`` (``init_buffers``: ``torch.zeros`` on the GPU). The KV
pool is sized later (``alloc_memory_pool`` → ``KVCacheConfigurator.configure`` →
``_profile_available_bytes`` reads the free memory then), so the pool comes out of the KV budget
byte for byte; ``mem_fraction_static``, chunked prefill and the CUDA-graph settings are resolved
as without LoRA (``arg_groups/lora_hook.py`` changes none of them).

Per target module, per layer (every ``num_hidden_layers``), in the model's dtype, with
n = ``--max-loras-per-batch`` (default 8) and r = ``--max-lora-rank`` (``get_lora_A_shape``,
``get_lora_B_shape``, ``get_embedding_lora_*_shape``):

- ``qkv_proj`` (``q/k/v_proj``): A = n × 3r × hidden; B = n × (q + 2·kv)/TP × r (TP above the
  KV heads: q/TP + 2 · head_dim, ``_column_parallel_lora_b_per_rank_dim``);
- ``o_proj``: A = n × r × heads · head_dim / TP; B = n × hidden × r;
- ``gate_up_proj`` (``gate/up_proj``): A = n × 2r × hidden; B = n × 2 · intermediate / TP × r;
- ``down_proj``: A = n × r × intermediate / TP; B = n × hidden × r;
- ``embed_tokens``: A = n × r × vocab, B = n × hidden × r, unsharded;
- ``lm_head``: A = n × r × hidden; B = n × vocab per rank × r (the ``ParallelLMHead`` shard:
  the vocabulary padded to 64, split over TP; rank 0's, the largest, which the cross-rank
  minimum of free memory follows);
- with both ``embed_tokens`` and ``lm_head`` targeted each is allocated twice:
  ``init_embedding_buffer`` fills ``embedding_A/B_buffer`` and ``lm_head_A/B_buffer`` each with
  every targeted one of the two (``target_modules & EMBEDDING_NAMES``).

``--lora-target-modules all`` is what ``auto_detect_lora_target_modules`` finds in the model
(qkv/o/gate_up/down) plus ``embed_tokens`` and ``lm_head``. Without ``--lora-paths`` SGLang needs
both ``--max-lora-rank`` and ``--lora-target-modules`` (``check_lora_server_args``), and ``all``
must stand alone; it refuses ``--max-loras-per-batch`` < 1 and ``--max-loaded-loras`` below it.

Checked against SGLang's own code (``tests/fixtures/sglang_0_5_23/lora_pool.json``: the model
built on the meta device and ``LoRAManager`` constructed as the runner does; Llama-3.1-8B, TP 1,
8 slots of rank 64, ``all`` → 3,226,468,352 B). Not modelled, refused by name
(``lora-not-modelled``): other architectures, MoE, quantized checkpoints, float32 serving,
tied embeddings with ``lm_head`` targeted, pipeline parallelism, DP attention, speculative
decoding, and ``--lora-paths`` (the adapters' own configs set the rank, the targets and added
tokens).
"""

from __future__ import annotations

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.lora_options import LoraOptions
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape

#: ``--max-loras-per-batch``'s default (``arg_groups/fields/lora.py``)
DEFAULT_MAX_LORAS_PER_BATCH = 8
#: the architectures whose LoRA pool SGLang's own code was asked for (``lora_pool.json``)
ARCHITECTURES = ("LlamaForCausalLM", "Qwen3ForCausalLM")
#: ``--lora-target-modules`` choices (``utils/common.py`` ``SUPPORTED_LORA_TARGET_MODULES`` + all)
TARGET_CHOICES = (
    "q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "kv_a_proj_with_mqa", "q_b_proj",
    "kv_b_proj", "wq_b", "wk", "weights_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj",
    "gate_up_proj", "embed_tokens", "lm_head", "qkvr", "wo_ud", "all",
)  # fmt: skip
#: ``lora/utils.py`` ``get_normalized_target_modules``: the flag's name → the pool's module
_NORMALIZED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
               "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}  # fmt: skip
#: what ``all`` resolves to on a dense Llama/Qwen3 (``auto_detect_lora_target_modules`` +
#: ``EMBEDDING_NAMES``)
_ALL = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "embed_tokens", "lm_head")
#: ``VocabParallelEmbedding``'s padding of the vocabulary (``DEFAULT_VOCAB_PADDING_SIZE``)
_VOCAB_PADDING = 64


@frozen
class SglangLoraPool:
    """The LoRA memory pool one GPU holds."""

    bytes_per_gpu: int
    #: per pool module (``qkv_proj``, ``lm_head``, ...), per GPU, A and B together
    by_module: tuple[tuple[str, int], ...]
    #: n = ``--max-loras-per-batch``, r = ``--max-lora-rank``
    max_loras_per_batch: int
    max_lora_rank: int
    #: the pool's modules, normalized as SGLang does
    target_modules: tuple[str, ...]
    #: SGLang's "Load weight end ... mem usage" is printed before the pool is built: a given
    #: ``--weights-memory`` does not include it (vLLM's "Model loading took" does)
    measured_with_weights: bool = False
    notes: tuple[str, ...] = ()


def _refuse(message: str, hint: str) -> InputError:
    return InputError(message, hint=hint, code="lora-refused")


def _unmodelled(message: str, hint: str) -> InputError:
    return InputError(message, hint=hint, code="lora-not-modelled")


def check_lora_deployment(request: EngineRequest) -> None:
    """What SGLang refuses with LoRA, and the deployments around it kvcalc has not recorded."""
    options = request.lora
    assert options is not None
    n = options.asked_max_loras or DEFAULT_MAX_LORAS_PER_BATCH
    if options.max_cpu_loras is not None and options.max_cpu_loras < n:
        raise _refuse(f"SGLang refuses --max-loaded-loras {options.max_cpu_loras} below "
                      f"--max-loras-per-batch {n} (\"max_loaded_loras should be greater than or "
                      "equal to max_loras_per_batch\")", "raise --max-loaded-loras or leave it out")  # fmt: skip
    if options.fully_sharded_loras or options.lora_dtype != "auto":
        raise _refuse("--fully-sharded-loras and --lora-dtype are vLLM's: SGLang has neither (its "
                      "pool is in the model's dtype, sharded as the base layers)",
                      "leave them out with --engine sglang")  # fmt: skip
    if request.pipeline_parallel_size > 1:
        raise _unmodelled("SGLang's LoRA pool with pipeline parallelism is not modelled (every "
                          "rank buffers all num_hidden_layers)", "plan with --pp-size 1")  # fmt: skip
    if request.attention_data_parallel_size > 1:
        raise _unmodelled("SGLang's LoRA pool with DP attention is not modelled",
                          "plan without --enable-dp-attention, or without --enable-lora")  # fmt: skip
    if request.speculative is not None:
        raise _unmodelled("SGLang's LoRA pool with speculative decoding is not modelled",
                          "plan without speculative decoding, or without --enable-lora")  # fmt: skip


def target_modules(options: LoraOptions) -> tuple[str, ...]:
    """The pool's modules, as ``check_lora_server_args`` and ``init_lora_shapes`` resolve them;
    SGLang's refusals refused the same way."""
    given = options.target_modules
    if options.asked_max_lora_rank is None or not given:
        raise _refuse(
            "SGLang refuses --enable-lora without --lora-paths unless both --max-lora-rank and "
            '--lora-target-modules are given ("When no initial --lora-paths is provided, you '
            "need to specify both --max-lora-rank and --lora-target-modules for LoRA "
            'initialization.")',
            "give --max-lora-rank R and --lora-target-modules (e.g. all, or q_proj k_proj v_proj "
            "o_proj)",
        )
    for name in given:
        if name not in TARGET_CHOICES:
            raise _refuse(f"--lora-target-modules: invalid choice {name!r} (SGLang's parser refuses it)",
                          "choose from: " + ", ".join(TARGET_CHOICES))  # fmt: skip
    if "all" in given:
        if len(set(given)) > 1:
            raise _refuse("SGLang refuses --lora-target-modules naming 'all' beside other modules "
                          "(\"If 'all' is specified in --lora-target-modules, it should be the "
                          "only module specified.\")", "give all alone, or list the modules")  # fmt: skip
        return _ALL
    modules = {_NORMALIZED.get(n, n) for n in given}
    unknown = sorted(modules - set(_ALL))
    if unknown:
        raise _unmodelled(f"SGLang LoRA on {', '.join(unknown)} is not modelled (those modules are "
                          "not in a dense Llama/Qwen3 decoder)",
                          "target q/k/v/o_proj, gate/up/down_proj, embed_tokens or lm_head")  # fmt: skip
    return tuple(m for m in _ALL if m in modules)


def _check_model(model: ModelShape, weight_dtype: str | None, modules: tuple[str, ...]) -> None:
    arch = model.architectures[0] if model.architectures else model.model_type
    w = model.weights
    if arch not in ARCHITECTURES or w is None or getattr(w, "problem", None):
        raise _unmodelled(
            f"SGLang's LoRA pool is not modelled for {arch}",
            "kvcalc sizes SGLang 0.5.23's LoRA pool for " + ", ".join(ARCHITECTURES)
            + "; plan without --enable-lora and add the pool to --weights-memory",
        )  # fmt: skip
    if w.moe is not None or w.quantization is not None or model.quantization:
        raise _unmodelled(f"SGLang's LoRA pool on {model.name} (MoE or quantized weights) is not "
                          "modelled", "plan without --enable-lora")  # fmt: skip
    served = (weight_dtype or "auto").lower()
    if served in ("float32", "float", "fp32") or (
        served == "auto" and (model.config_dtype or "").lower() in ("float32", "float")
    ):
        raise _unmodelled("SGLang's LoRA pool in float32 is not modelled",
                          "plan with --dtype bfloat16, or without --enable-lora")  # fmt: skip
    if w.tie_word_embeddings and "lm_head" in modules:
        raise _unmodelled(f"SGLang's LoRA pool on lm_head with tied embeddings ({model.name}) is "
                          "not modelled", "target the modules without lm_head")  # fmt: skip


def sglang_lora_pool(
    model: ModelShape,
    options: LoraOptions,
    *,
    tensor_parallel_size: int,
    weight_dtype: str | None = None,
) -> SglangLoraPool:
    """The pool of ``options`` on one GPU of ``model`` at ``tensor_parallel_size``
    (``weight_dtype``: ``--dtype``, None for the model's)."""
    modules = target_modules(options)
    _check_model(model, weight_dtype, modules)
    w, a = model.weights, model.weights.attention
    tp = tensor_parallel_size
    n = options.asked_max_loras or DEFAULT_MAX_LORAS_PER_BATCH
    r = options.asked_max_lora_rank
    assert r is not None  # target_modules() refused it
    if n < 1:
        raise _refuse("SGLang refuses --max-loras-per-batch below 1", "give 1 or more")
    hidden, inter, vocab = w.hidden_size, w.intermediate_size, w.vocab_size
    q, kv = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    for what, size in (("heads × head_dim", q), ("intermediate size", inter)):
        if size % tp:
            raise _refuse(f"SGLang cannot split {what} {size} over TP {tp}", "choose another --tp")
    qkv_b = q // tp + (2 * a.head_dim if a.num_kv_heads < tp else 2 * kv // tp)
    padded = -(-vocab // _VOCAB_PADDING) * _VOCAB_PADDING
    vocab_rank0 = min(padded // tp, vocab)
    L = w.num_layers
    values = {  # elements of A + B for one slot, all layers
        "qkv_proj": L * (3 * r * hidden + qkv_b * r),
        "o_proj": L * (r * q // tp + hidden * r),
        "gate_up_proj": L * (2 * r * hidden + 2 * inter // tp * r),
        "down_proj": L * (r * inter // tp + hidden * r),
        "embed_tokens": r * vocab + hidden * r,
        "lm_head": r * hidden + vocab_rank0 * r,
    }
    # init_buffers fills embedding_A/B_buffer (when embed_tokens is targeted) and
    # lm_head_A/B_buffer (when lm_head is) each with every targeted one of the two
    # (init_embedding_buffer: target_modules & EMBEDDING_NAMES): with both targeted, each is
    # allocated twice
    copies = sum(m in modules for m in ("embed_tokens", "lm_head"))
    for m in ("embed_tokens", "lm_head"):
        values[m] *= copies
    size = 2  # the model's dtype: bfloat16 or float16 (float32 refused above)
    by_module = tuple((m, values[m] * n * size) for m in modules)
    total = sum(b for _, b in by_module)
    note = (
        f"LoRA: SGLang's pool of {n} slot(s) (--max-loras-per-batch) of rank {r} on "
        f"{', '.join(modules)}: {total:,} B per GPU, allocated after the weights and before the KV "
        "pool (maybe_init_lora_manager before configure)"
    )
    return SglangLoraPool(bytes_per_gpu=total, by_module=by_module, max_loras_per_batch=n,
                          max_lora_rank=r, target_modules=modules, notes=(note,))  # fmt: skip
