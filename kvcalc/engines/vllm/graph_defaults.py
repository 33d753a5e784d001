"""What a vLLM plan implies for its CUDA graphs: the model runner, the attention backends' graph
support and the model's own config hooks, then :func:`~kvcalc.engines.vllm.cudagraphs.vllm_cudagraph_captures`.

- **Runner** (``VllmConfig.use_v2_model_runner``, read in each wheel): V1 up to 0.21; from 0.22 V2
  for the architectures of ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` (0.22: Qwen3, 0.23: Llama,
  Mistral, Qwen3, dense and unquantized only; 0.24: those and DeepSeek-V2, Qwen2-MoE,
  Granite-MoE); from 0.25 also every dense model that is not hybrid or attention-free (0.27: a
  hybrid on the list too); from 0.29 every model on CUDA. V2's ``profile_cudagraph_memory``
  returns 0 before 0.29 (``v1/worker/gpu/model_runner.py``: "It is TBD whether we keep this API").
- **Graph support** (the least ``AttentionCGSupport`` over the model's backends, recorded with
  vLLM 0.33.0's selector and builders in ``tests/fixtures/vllm_0_33/cudagraph_captures.json``):
  FLASH_ATTN is ALWAYS on SM 9.x (FlashAttention 3) and UNIFORM_BATCH on SM 8.x (FA2); FlashInfer
  on SM 10.x UNIFORM_BATCH; gpt-oss on SM 8.x runs TRITON_ATTN (ALWAYS); MLA: FLASHINFER_MLA on
  SM 10.x ALWAYS, the others UNIFORM_BATCH; Mamba and GDN layers UNIFORM_BATCH; Llama 4's chunked
  local attention NEVER. It decides the mode only where the default cannot run: FULL asked for
  (mixed batches need ALWAYS), or a backend without full graphs.
- **Model hooks** (``model_executor/models/config.py``): gpt-oss raises the maximum capture size
  to 1024 unless sizes or a maximum are given.

Not modelled, said in the result's note or by a refusal: speculative decoding (kvcalc has no
draft model), LoRA (its graphs per adapter count), ``-O0``/``-O1`` optimisation levels,
``performance_mode=interactivity``, pooling and encoder-decoder models' mode overrides.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.extra import version_tuple
from kvcalc.engines.vllm.cudagraphs import (
    GraphMode,
    GraphSupport,
    model_max_size,
    parse_graph_mode,
    vllm_cudagraph_captures,
)
from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.model.layouts import LayerKind
from kvcalc.model.shape import ModelShape

_LLAMA = frozenset({"LlamaForCausalLM", "MistralForCausalLM"})
_MOE_V2 = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
_INKLING = frozenset({"InklingForCausalLM", "InklingForConditionalGeneration",
                      "LongcatFlashNgramForCausalLM"})  # fmt: skip
#: ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` per release (0.22.0-0.28.0 wheels)
V2_ARCHITECTURES: dict[tuple[int, int], frozenset[str]] = {
    (0, 22): frozenset({"Qwen3ForCausalLM"}),
    (0, 23): _LLAMA | {"Qwen3ForCausalLM"},
    (0, 24): _LLAMA | _MOE_V2 | {"Qwen3ForCausalLM"},
    (0, 25): _MOE_V2,
    (0, 26): _MOE_V2 | _INKLING,
    (0, 27): _MOE_V2 | _INKLING | {"KimiK3ForConditionalGeneration"},
    (0, 28): _MOE_V2 | _INKLING | {"KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"},
}


def _is_moe(model: ModelShape) -> bool:
    return getattr(model.weights, "moe", None) is not None


def default_runner_v2(version: tuple[int, ...], model: ModelShape) -> bool:
    """Whether vLLM ``version`` runs this model on model runner V2 by default (on CUDA)."""
    if version < (0, 22):
        return False
    if version >= (0, 29):
        return True
    listed = V2_ARCHITECTURES[(version[0], version[1])]
    on_list = bool(listed & set(model.architectures))
    if version < (0, 24):
        return on_list and not _is_moe(model) and model.quantization is None
    if version < (0, 25):
        return on_list
    hybrid = LayerKind.RECURRENT in model.kinds
    if hybrid and (version < (0, 27) or not on_list):
        return False
    if not any(k in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA)
               for k in model.kinds):  # fmt: skip
        return False  # attention-free
    return on_list or not _is_moe(model)


def graph_support(model: ModelShape, cc: tuple[int, int] | None) -> tuple[GraphSupport, str]:
    """The least CUDA-graph support of the attention backends vLLM 0.33 picks, and why."""
    kinds = set(model.kinds)
    if LayerKind.CHUNKED in kinds:
        return GraphSupport.NEVER, "chunked local attention graphs no full batches"
    major = 9 if cc is None else cc[0]
    where = "SM 9.0 assumed" if cc is None else f"SM {cc[0]}.{cc[1]}"
    if model.is_mla:
        from kvcalc.engines.vllm.sparse import is_sparse_mla

        always = major == 10 and not is_sparse_mla(model)
        support = GraphSupport.ALWAYS if always else GraphSupport.UNIFORM_BATCH
        why = f"{'FLASHINFER_MLA' if always else 'the MLA backend'} on {where}"
    elif major == 9:
        support, why = GraphSupport.ALWAYS, f"FlashAttention 3 on {where}"
    elif major == 8 and model.model_type == "gpt_oss":
        support, why = GraphSupport.ALWAYS, f"TRITON_ATTN (attention sinks) on {where}"
    elif major in (8, 10):
        backend = "FlashAttention 2" if major == 8 else "FlashInfer"
        support, why = GraphSupport.UNIFORM_BATCH, f"{backend} on {where}"
    else:
        support, why = GraphSupport.UNIFORM_BATCH, f"assumed on {where} (backend not recorded)"
    if LayerKind.RECURRENT in kinds and support > GraphSupport.UNIFORM_BATCH:
        support, why = GraphSupport.UNIFORM_BATCH, "the recurrent layers' backend"
    if model.mm_prefix_attention:
        why += "; image-prefix attention's composite backend not recorded"
    return support, why


def plan_captures(
    request: EngineRequest, *, v1_engine: bool, max_num_batched_tokens: int, max_num_seqs: int
) -> CudaGraphCaptures | None:
    """The graphs one worker of this plan captures (none in mode NONE); None with
    ``--enforce-eager`` or on the V0 engine (not modelled: its graph memory is never subtracted)."""
    if not v1_engine or request.enforce_eager:
        return None
    version = version_tuple(request.engine_version or "") or (0, 33)
    model = request.model
    mode = parse_graph_mode(request.cudagraph_mode) if request.cudagraph_mode else None
    if mode is None and "LongcatFlashNgramForCausalLM" in model.architectures:
        mode = GraphMode.FULL  # its config hook (no compilation, FULL graphs)
    sizes, max_size = request.cudagraph_capture_sizes, request.max_cudagraph_capture_size
    hooked = model_max_size(model.architectures, version) if sizes is max_size is None else None
    support, why = graph_support(model, request.gpu_compute_capability)
    cc = request.gpu_compute_capability
    runner_v2 = default_runner_v2(version, model)
    captures = vllm_cudagraph_captures(
        version, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        blackwell=cc is not None and cc[0] == 10, sizes=sizes, max_size=max_size, mode=mode,
        support=support, runner_v2=runner_v2, model_max=hooked,
        num_speculative_tokens=request.speculative.num_speculative_tokens if request.speculative else 0,
    )  # fmt: skip
    if captures is None:
        return None
    note = captures.source
    if hooked:
        note += f", gpt-oss's maximum capture size {hooked}"
    if mode is GraphMode.FULL or support is GraphSupport.NEVER:
        note += f", graph support {support.name} ({why})"
    if request.speculative is not None and request.speculative.method.uses_draft_kv:
        note += "; the drafter's own graphs (speculator.capture) are not in the estimate"
    estimated = not (runner_v2 and version < (0, 29))
    if not estimated:
        note += "; runner V2 estimates no graph memory before 0.29"
    if request.lora is not None:
        # v1/worker/gpu/lora_utils.py get_lora_capture_cases (and cudagraph_dispatcher.py
        # _get_lora_cases): cudagraph_specialize_lora (on by default) captures every size for
        # num_active_loras 0 and max_loras + 1, i.e. twice
        cases = 2
        note += f"; each captured for {cases} LoRA cases (no adapter, max_loras + 1)"
        captures = replace(captures, piecewise_graphs=captures.piecewise_graphs * cases,
                           full_graphs=captures.full_graphs * cases)  # fmt: skip
    return replace(captures, source=note, estimated=estimated)
