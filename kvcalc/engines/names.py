"""Engine names, resolved once, and what each engine can do (capability flags).

Every name a person may type (``llama.cpp``, ``llama-cpp``, ``LlamaCpp``, ``transformers``,
``TensorRT-LLM``...) becomes one :class:`EngineName` when it enters kvcalc
(:class:`~kvcalc.planning.inputs.PlanInputs`, deployment files, ``verify``). Code outside
:mod:`kvcalc.engines` asks :func:`traits` what an engine does instead of comparing names. A leaf
module: it imports only :mod:`kvcalc.errors`.
"""

from __future__ import annotations

from enum import Enum

from kvcalc.errors import InputError
from kvcalc.frozen import frozen


class EngineName(str, Enum):
    """The canonical engine names (their values are the JSON ``engine`` values)."""

    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"
    HF = "hf"
    TRTLLM = "trtllm"
    LMDEPLOY = "lmdeploy"

    def __str__(self) -> str:  # f"{name}" and str(name) give the value, as a plain string would
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def display(self) -> str:
        """The engine as its users write it."""
        return _DISPLAY[self]


_DISPLAY = {
    EngineName.VLLM: "vLLM",
    EngineName.SGLANG: "SGLang",
    EngineName.LLAMACPP: "llama.cpp",
    EngineName.HF: "transformers",
    EngineName.TRTLLM: "TensorRT-LLM",
    EngineName.LMDEPLOY: "LMDeploy",
}
#: spellings accepted besides the canonical values (compared without case, dots, dashes, spaces)
ALIASES = {
    "transformers": EngineName.HF,
    "tensorrtllm": EngineName.TRTLLM,
    "turbomind": EngineName.LMDEPLOY,
}
#: what deployment files and help texts list: the canonical names, then the common spellings
ALIAS_SPELLINGS = ("llama.cpp", "transformers", "tensorrt-llm", "turbomind")


def _key(text: str) -> str:
    return (
        str(text)
        .strip()
        .lower()
        .replace(".", "")
        .replace("-", "")
        .replace("_", "")
        .replace(" ", "")
    )


#: spellings already read (a plan asks for an engine's traits many times)
_READ: dict[str, EngineName] = {}


def engine_name(text: str | EngineName) -> EngineName:
    """``text`` as an :class:`EngineName`; an ``unknown-engine`` error for anything else."""
    if isinstance(text, EngineName):
        return text
    known = _READ.get(text) if isinstance(text, str) else None
    if known is not None:
        return known
    key = _key(text)
    for name in EngineName:
        if key == name.value:
            return _remember(text, name)
    if key in ALIASES:
        return _remember(text, ALIASES[key])
    raise InputError(
        f"unknown engine {text!r}",
        hint="choose one of: " + ", ".join(n.value for n in EngineName),
        code="unknown-engine",
    )


def _remember(text: object, name: EngineName) -> EngineName:
    if isinstance(text, str) and len(_READ) < 256:
        _READ[text] = name
    return name


class CacheTensors(str, Enum):
    """How an engine lays out the tensors of its KV cache (what ``kvcalc verify`` allocates)."""

    #: per layer (or per shared group slot) one tensor of ``num_blocks`` pages (vLLM V1)
    PAGED = "paged"
    #: per layer K and V ``[batch, kv_heads, tokens, head_dim]``, or a QuantizedCache's parts
    #: (transformers)
    PER_LAYER = "per-layer"
    #: per layer K and V rows for every cell (llama.cpp)
    CELLS = "cells"
    #: per layer K and V rows of a token pool with page padding (SGLang)
    TOKEN_POOL = "token-pool"


class RunCheck(str, Enum):
    """What ``kvcalc verify --run`` runs for an engine: the engine's own code on a cut-down model."""

    #: transformers builds the model (random weights) and generates; its cache is measured
    TRANSFORMERS = "transformers"
    #: llama.cpp's binding loads a GGUF in the model's layout; its log and state are compared
    LLAMACPP = "llamacpp"


@frozen
class EngineTraits:
    """What planning, curves, suggestions and rendering need to know about an engine."""

    name: EngineName
    #: the KV pool is sized by the settings (slots × context, batch × length), not by the memory
    #: left: headroom is memory, not concurrency
    fixed_pool: bool
    #: the pool is blocks of every layer group, so concurrency at any length follows from block
    #: arithmetic (the curves' fast path)
    block_pool: bool
    #: kvcalc's overhead estimate (activation peak, non-torch, CUDA graphs) was calibrated on this
    #: engine's own logs
    overhead_calibrated: bool
    #: the smaller KV-cache dtype worth suggesting, ``None`` if none
    compact_kv_dtype: str | None
    #: ``--gpu-memory-utilization`` is the engine's own knob for its KV budget
    memory_fraction_knob: bool
    #: the cache holds ``n_seq_max`` slots of ``n_ctx / n_seq_max`` tokens (the target concurrency
    #: becomes the slot count)
    slots_from_target: bool = False
    #: the cache is allocated for a batch up front (the target concurrency becomes the batch size)
    batch_from_target: bool = False
    #: the engine captures CUDA graphs whose memory kvcalc estimates (llama.cpp's graphs live in
    #: its compute buffer; transformers captures none)
    cuda_graphs: bool = True
    #: the engine runs on PyTorch, so the non-torch term kvcalc measured for vLLM (CUDA context,
    #: NCCL, cuBLAS outside PyTorch's allocator) applies; llama.cpp has no PyTorch
    torch_runtime: bool = True
    #: the engine has a cap on running requests (vLLM ``max_num_seqs``, SGLang
    #: ``max_running_requests``, TensorRT-LLM/LMDeploy ``max_batch_size``)
    max_num_seqs_knob: bool = True
    #: the budget is ``(total − non-torch) × fraction`` and activations and CUDA graphs live in the
    #: reserved ``1 − fraction`` (SGLang's ``mem_fraction_static``), not subtracted from it
    overhead_in_reserve: bool = False
    #: the engine's own name for its cap on running requests (``max_num_seqs`` in the JSON)
    max_num_seqs_name: str = "max_num_seqs"
    #: how the cache tensors are laid out, where ``verify`` knows it (``None``: not modelled)
    cache_tensors: CacheTensors | None = None
    #: what ``verify --run`` runs for this engine (``None``: no run check)
    run_check: RunCheck | None = None
    #: ``verify --fill`` emulates this engine's memory budget on the GPU
    fill_check: bool = False
    #: the engine can be told to accept a ``max_model_len`` past the model's own
    #: (``--allow-long-max-model-len``: vLLM's ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``)
    long_max_model_len: bool = False
    #: a request whose prompt + output exceeds ``max_model_len`` is served with its output cut at
    #: ``max_model_len`` (vLLM: the scheduler's ``check_stop`` in ``v1/core/sched/utils.py``, the
    #: 0.33 server's ``get_max_tokens`` in ``entrypoints/serve/utils/api_utils.py``); False: the
    #: engine refuses it (SGLang's ``TokenizerManager._validate_one_request``) or kvcalc does not
    #: know what it does, and such a workload is refused
    output_capped_at_max_model_len: bool = False
    #: such a request is rejected, as checked in the engine's code (SGLang:
    #: ``TokenizerManager._validate_one_request``, "Requested token count exceeds the model's
    #: maximum context length"); False with the flag above False: not known
    rejects_long_requests: bool = False
    #: the ``--engine-option`` that spells the engine's memory fraction (SGLang
    #: ``mem_fraction_static``): the planner reads it as ``--gpu-memory-utilization``
    fraction_option: str | None = None
    #: ``--kv-cache-memory 0`` means "not given" (vLLM: ``Worker.determine_available_memory``
    #: tests ``kv_cache_memory_bytes`` for truth, so 0 profiles as if unset); elsewhere 0 is refused
    kv_memory_zero_unset: bool = False
    #: ``--block-size`` is one of the engine's own settings (vLLM ``--block-size``, SGLang
    #: ``--page-size``, LMDeploy ``cache_block_seq_len``); where it is not (llama.cpp's one-token
    #: cells, transformers' per-layer tensors, TensorRT-LLM's ``-E tokens_per_block``) it is refused,
    #: not dropped
    takes_block_size: bool = True
    #: what the engine calls its block size, for that refusal
    block_size_hint: str = ""
    #: the ``-E`` option that turns prefix caching off (SGLang ``disable_radix_cache``), which
    #: ``--no-enable-prefix-caching`` sets
    prefix_caching_off_option: str | None = None
    #: the engine's data-parallel ranks share the MoE experts (vLLM ``--data-parallel-size``:
    #: experts over TP × DP × PCP, a KV pool per rank) and it has expert and context parallelism
    #: (``--enable-expert-parallel``, ``-dcp``, ``-pcp``)
    moe_data_parallel: bool = False
    #: data-parallel attention inside the TP group (SGLang ``--enable-dp-attention --dp N``)
    dp_attention: bool = False
    #: vLLM-spelled settings this engine does not read, each with what the engine has instead:
    #: given, they are refused (``unmodelled-option``), not dropped
    unread_settings: tuple[tuple[str, str], ...] = ()
    #: decode context parallelism inside the TP group read by the engine itself (SGLang
    #: ``--dcp-size``, :mod:`kvcalc.engines.sglang.dcp`), beside vLLM's
    own_dcp: bool = False
    #: speculative decoding is read from the engine's own flags (SGLang ``--speculative-algorithm``,
    #: :mod:`kvcalc.engines.sglang.speculative`), not vLLM's ``--speculative-config``
    sglang_speculative: bool = False
    #: the engine's serving command, ``{model}`` for the model (``kvcalc recommend`` writes it),
    #: and which spellings of the settings table it reads (``Setting.serve``, ``Setting.sglang``)
    serve_program: str | None = None
    serve_flags: str | None = None


#: vLLM's CUDA-graph and scheduling settings, which only vLLM reads
_VLLM_GRAPHS = (
    ("cudagraph_mode", "it is vLLM's CUDA-graph mode"),
    ("cudagraph_capture_sizes", "they are vLLM's CUDA-graph sizes"),
    ("max_cudagraph_capture_size", "it is vLLM's largest CUDA graph"),
    ("async_scheduling", "it is vLLM's scheduler setting"),
    ("disable_sliding_window", "it is vLLM's sliding-window setting"),
)
_NO_PREFIX_CACHE = (("enable_prefix_caching", "kvcalc models prefix caching for vLLM and SGLang"),)


_TRAITS = {
    EngineName.VLLM: EngineTraits(name=EngineName.VLLM, fixed_pool=False, block_pool=True,
                                  overhead_calibrated=True, compact_kv_dtype="fp8", memory_fraction_knob=True,
                                  cache_tensors=CacheTensors.PAGED, fill_check=True, long_max_model_len=True,
                                  output_capped_at_max_model_len=True, kv_memory_zero_unset=True,
                                  moe_data_parallel=True, serve_program="vllm serve {model}",
                                  serve_flags="serve"),
    EngineName.SGLANG: EngineTraits(name=EngineName.SGLANG, fixed_pool=False, block_pool=True,
                                    overhead_calibrated=False, compact_kv_dtype="fp8_e4m3",
                                    memory_fraction_knob=False, overhead_in_reserve=True,
                                    max_num_seqs_name="max_running_requests", rejects_long_requests=True,
                                    cache_tensors=CacheTensors.TOKEN_POOL,
                                    fraction_option="mem_fraction_static",
                                    prefix_caching_off_option="disable_radix_cache", dp_attention=True,
                                    unread_settings=(
                                        ("max_num_batched_tokens", "SGLang's setting is "
                                         "--chunked-prefill-size: -E chunked_prefill_size=N"),
                                        ("enforce_eager", "SGLang's setting is "
                                         "--disable-cuda-graph: -E disable_cuda_graph=true"),
                                        *_VLLM_GRAPHS),
                                    own_dcp=True, sglang_speculative=True,
                                    serve_program="python -m sglang.launch_server --model-path {model}",
                                    serve_flags="sglang"),
    EngineName.TRTLLM: EngineTraits(name=EngineName.TRTLLM, fixed_pool=False, block_pool=True,
                                    overhead_calibrated=False, compact_kv_dtype="fp8",
                                    memory_fraction_knob=False, takes_block_size=False,
                                    block_size_hint="TensorRT-LLM's block size is -E tokens_per_block=N",
                                    unread_settings=(*_VLLM_GRAPHS, *_NO_PREFIX_CACHE)),
    EngineName.LMDEPLOY: EngineTraits(name=EngineName.LMDEPLOY, fixed_pool=False, block_pool=True,
                                      overhead_calibrated=False, compact_kv_dtype="int8",
                                      memory_fraction_knob=False,
                                      unread_settings=(*_VLLM_GRAPHS, *_NO_PREFIX_CACHE)),
    EngineName.LLAMACPP: EngineTraits(name=EngineName.LLAMACPP, fixed_pool=True, block_pool=False,
                                      overhead_calibrated=False, compact_kv_dtype="q8_0",
                                      memory_fraction_knob=False, slots_from_target=True,
                                      cuda_graphs=False, max_num_seqs_knob=False, torch_runtime=False,
                                      max_num_seqs_name="n_seq_max", cache_tensors=CacheTensors.CELLS,
                                      run_check=RunCheck.LLAMACPP, takes_block_size=False,
                                      block_size_hint="llama.cpp's cache is cells of one token",
                                      unread_settings=(
                                          ("max_num_batched_tokens", "llama.cpp's batches are "
                                           "-E n_batch=N and -E n_ubatch=N"),
                                          ("enforce_eager", "llama.cpp has no such setting"),
                                          *_VLLM_GRAPHS, *_NO_PREFIX_CACHE)),
    EngineName.HF: EngineTraits(name=EngineName.HF, fixed_pool=True, block_pool=False,
                                overhead_calibrated=False, compact_kv_dtype=None,
                                memory_fraction_knob=False, batch_from_target=True,
                                cuda_graphs=False, max_num_seqs_knob=False,
                                max_num_seqs_name="batch_size", cache_tensors=CacheTensors.PER_LAYER,
                                run_check=RunCheck.TRANSFORMERS, takes_block_size=False,
                                block_size_hint="transformers' caches are per-layer tensors, not blocks",
                                unread_settings=(
                                    ("enforce_eager", "transformers captures no CUDA graphs"),
                                    *_VLLM_GRAPHS, *_NO_PREFIX_CACHE)),
}  # fmt: skip


def traits(name: str | EngineName) -> EngineTraits:
    """The capability flags of the engine called ``name`` (any accepted spelling)."""
    return _TRAITS[engine_name(name)]
