"""Every setting a person can give kvcalc, in one table: its name, flags, parser, help, vLLM flag
and deployment-file key.

A :class:`Setting` is written once here and read by three surfaces, so that one setting has one
name, one parser and one help text everywhere:

- the command line: :mod:`kvcalc.cli.options` generates the typer options of ``plan``, ``check``,
  ``curve``, ``compare``, ``throughput``, ``verify`` and ``inspect`` from it;
- ``vllm serve`` commands: :mod:`kvcalc.planning.servecmd` reads the flags in :attr:`Setting.serve`
  (``--from-command``, ``command:`` in deployment files);
- deployment files: :mod:`kvcalc.deploy.keys` builds the keys in :attr:`Setting.yaml` (and the
  JSON Schema follows from those).

Pure data: importing this module imports only :mod:`kvcalc.planning.setting_values` (each kind's
parser) and :mod:`kvcalc.units` (start-up stays short). Help texts may name other settings as
``{name}``; each surface writes them its own way (``--gpu`` on the command line, ```gpu``` in a
file).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.planning.setting_values import (
    TOKENS_HELP,
    WEIGHT_DTYPES,
    Kind,
    parse_weight_dtype,
    read_value,
)
from kvcalc.units import parse_token_count

__all__ = [
    "BY_NAME",
    "Kind",
    "SETTINGS",
    "WEIGHT_DTYPES",
    "Setting",
    "parse_weight_dtype",
    "setting",
]


MODEL_PANEL = "Model"
HARDWARE_PANEL = "Hardware"
SERVING_PANEL = "Serving"
WORKLOAD_PANEL = "Workload"
OUTPUT_PANEL = "Output"
#: the help panels in the order ``--help`` lists them
PANELS = (MODEL_PANEL, HARDWARE_PANEL, SERVING_PANEL, WORKLOAD_PANEL, OUTPUT_PANEL)


@frozen
class Setting:
    """One setting. ``name`` is its identity and the Python parameter name of the commands."""

    name: str
    kind: Kind
    help: str
    panel: str
    #: command-line spellings, long first (default ``--name-with-dashes``); ``()``: not a flag
    flags: tuple[str, ...] | None = None
    #: the :class:`~kvcalc.planning.inputs.PlanInputs` field it fills (``None``: used elsewhere)
    field: str | None = None
    #: its deployment-file key (``"workload.prompt_len"`` inside a section); ``None``: none
    yaml: str | None = None
    #: how ``vllm serve`` spells it (``()``: vLLM has no such flag)
    serve: tuple[str, ...] = ()
    #: how vLLM reads the value when that differs from kvcalc's own reading
    serve_kind: str | None = None
    #: how ``python -m sglang.launch_server`` spells it (``()``: SGLang has no such flag; SGLang
    #: flags that are engine options, ``--page-size``, fill ``-E`` by their own name)
    sglang: tuple[str, ...] = ()
    default: Any = None
    #: said in the help when the command keeps the table's default (``"the engine's"``)
    default_help: str = ""
    minimum: int | None = None
    examples: tuple[Any, ...] = ()
    metavar: str | None = None

    @property
    def cli_flags(self) -> tuple[str, ...]:
        if self.flags is None:
            return ("--" + self.name.replace("_", "-"),)
        return self.flags

    @property
    def what(self) -> str:
        """How errors name it: its long flag, else its name."""
        return self.cli_flags[0] if self.cli_flags else self.name

    @property
    def param(self) -> str:
        """The commands' parameter name (``json_``: ``json`` is a module's name)."""
        return "json_" if self.name == "json" else self.name

    def spelled(self, surface: str) -> str:
        """How ``surface`` (``"cli"`` or ``"yaml"``) writes this setting's name."""
        if surface == "yaml" and self.yaml:
            return f"`{self.yaml.rpartition('.')[2]}`"
        return self.cli_flags[0] if self.cli_flags else self.name

    def help_for(self, surface: str, *, default_shown: bool = False) -> str:
        """The help text, other settings named as ``surface`` writes them."""
        default = (
            f" (default: {self.default_help})" if self.default_help and not default_shown else ""
        )
        names = _spellings(surface)
        if "{default}" in self.help:
            return self.help.format_map({**names, "default": default})
        text = self.help.format_map(names)
        return text.rstrip(".") + default + "." if default else text

    def parse(self, text: Any) -> Any:
        """Read a value given as text (a command-line argument, a serving command's value)."""
        return read_value(self.kind, text, what=self.what, minimum=self.minimum)

    def parse_serve(self, text: str) -> Any:
        """Read the value of this setting's ``vllm serve`` flag, as vLLM reads it."""
        if self.serve_kind == "tokens_or_auto":  # human_readable_int_or_auto: None = fit to memory
            if text.strip().lower() == "auto" or text.strip() == "-1":
                return None
            return read_value(Kind.TOKENS, text, what=self.what, minimum=self.minimum)
        if self.serve_kind == "bytes":  # human_readable_int, in bytes
            return parse_token_count(text, what=self.serve[0], minimum=0)
        if self.serve_kind == "gib":  # a float of GiB (--kv-offloading-size, --cpu-offload-gb)
            try:
                value = float(text)
            except ValueError:
                raise InputError(f"{self.serve[0]}: expected a number of GiB, got {text[:40]!r}",
                                 code="invalid-input") from None  # fmt: skip
            if not value >= 0 or value == float("inf"):
                raise InputError(f"{self.serve[0]}: must be a finite number >= 0, got {text[:40]!r}",
                                 code="invalid-input")  # fmt: skip
            return int(value * (1 << 30))
        if self.kind is Kind.COUNT:  # vLLM's argparse int: no k/K suffix
            return read_value(Kind.COUNT, text, what=self.what, minimum=self.minimum)
        return self.parse(text)


_KV_DTYPES_HELP = (
    "Cache dtype, as the engine names it: auto (the model's); vLLM fp8, fp8_e5m2, "
    "fp8_per_token_head, int8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla (MLA); SGLang "
    "fp8_e4m3, fp8_e5m2; llama.cpp f16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1; transformers fp32, "
    "bf16, quanto_int4, quanto_int2, hqq_int1..8, fp8; TensorRT-LLM fp8, nvfp4, int8; LMDeploy "
    "int8, int4. int4/int8 alone: the engine's own 4-/8-bit format where it has one."
)


def _s(name: str, kind: Kind, panel: str, help: str, **kw: Any) -> Setting:
    return Setting(name=name, kind=kind, panel=panel, help=help, **kw)


M, H, S, W, OUT = MODEL_PANEL, HARDWARE_PANEL, SERVING_PANEL, WORKLOAD_PANEL, OUTPUT_PANEL
#: the table. Its order is the order of the deployment-file keys and, per help panel, of the flags.
SETTINGS: tuple[Setting, ...] = (
    _s("model", Kind.TEXT, M, "Bundled model (`kvcalc models`), config path (in a file: relative "
       "to the file) or Hub id `org/name[@revision]`.", flags=(), yaml="model",
       serve=("--model",), sglang=("--model-path",), examples=("llama-3.1-8b", "Qwen/Qwen3-8B")),
    _s("revision", Kind.TEXT, M, "Hub revision (branch, tag or commit) of a Hub model.",
       yaml="revision", serve=("--revision",), sglang=("--revision",)),
    _s("from_command", Kind.TEXT, S, "The serving command, e.g. 'vllm serve MODEL --max-model-len "
       "32k -tp 2'; its flags fill the settings not given (and must agree with those given).",
       yaml="command"),
    _s("ignore_unmodelled", Kind.BOOL, S, "Plan a {from_command} that sets flags kvcalc does "
       "not model anyway, leaving them out (a warning in the notes, fully_modelled: false in "
       "JSON); without it such a command is refused.", yaml="ignore_unmodelled", default=False),
    _s("engine", Kind.ENGINE, S, "Serving engine: vllm, sglang, llamacpp, hf (transformers), "
       "trtllm or lmdeploy (TurboMind).", field="engine", yaml="engine", default="vllm"),
    _s("engine_version", Kind.TEXT, S, "Engine version whose defaults apply, a profile of the "
       "engine as `kvcalc plan --help` lists them.", field="engine_version", yaml="engine_version",
       default_help="the newest", examples=("0.33",)),
    _s("gpu", Kind.GPU, H, "GPU from the catalog (`kvcalc gpus`), e.g. H100-80GB.", field="gpu",
       yaml="gpu", examples=("H100-80GB",)),
    _s("gpu_memory", Kind.SIZE, H, "Memory per GPU instead of {gpu}: 80GB, 79.2GiB, 80000000000; "
       "a bare number below 1,048,576 means GiB.", field="gpu_memory_bytes", yaml="gpu_memory",
       minimum=1, metavar="SIZE"),
    _s("num_gpus", Kind.COUNT, H, "GPUs in all. With {data_parallel_size} it must be DP × PP × "
       "TP × PCP; without, more than {tensor_parallel_size} × {pipeline_parallel_size} × "
       "{prefill_context_parallel_size} make independent full replicas.", field="num_gpus",
       yaml="num_gpus", minimum=1, default_help="the parallel sizes' product"),
    _s("data_parallel_size", Kind.COUNT, H, "vLLM data-parallel ranks (engine cores, each with "
       "its own KV pool; MoE experts split over TP × DP × PCP); SGLang: with "
       "{enable_dp_attention}, attention data-parallel ranks within {tensor_parallel_size}.",
       flags=("--data-parallel-size", "-dp"), field="data_parallel_size",
       yaml="data_parallel_size", serve=("--data-parallel-size", "-dp"), sglang=("--dp-size",),
       default=1, minimum=1),
    _s("enable_expert_parallel", Kind.BOOL, H, "vLLM expert parallelism: whole MoE experts per "
       "rank over TP × DP × PCP instead of each expert split (the same bytes per GPU, whole "
       "experts rounded up).", flags=("--enable-expert-parallel", "-ep"),
       field="enable_expert_parallel", yaml="enable_expert_parallel",
       serve=("--enable-expert-parallel", "-ep"), default=False),
    _s("enable_eplb", Kind.BOOL, H, "vLLM expert-parallel load balancing (needs "
       "{enable_expert_parallel}); required for {num_redundant_experts}.", field="enable_eplb",
       yaml="enable_eplb", serve=("--enable-eplb",), default=False),
    _s("num_redundant_experts", Kind.COUNT, H, "EPLB's redundant experts (vLLM --eplb-config "
       "num_redundant_experts): N more experts spread over the expert-parallel ranks.",
       field="num_redundant_experts", yaml="num_redundant_experts",
       serve=("--eplb-config.num_redundant_experts",), default=0, minimum=0),
    _s("decode_context_parallel_size", Kind.COUNT, H, "Decode context parallelism (vLLM, SGLang "
       "--dcp-size): each request's KV tokens sharded over this many of the TP ranks (no extra "
       "GPUs).",
       flags=("--decode-context-parallel-size", "-dcp"), field="decode_context_parallel_size",
       yaml="decode_context_parallel_size", serve=("--decode-context-parallel-size", "-dcp"),
       sglang=("--dcp-size",), default=1, minimum=1),
    _s("cp_kv_cache_interleave_size", Kind.COUNT, H, "Tokens stored on one DCP rank before the "
       "next (vLLM); must divide the block size.", field="cp_kv_cache_interleave_size",
       yaml="cp_kv_cache_interleave_size",
       serve=("--cp-kv-cache-interleave-size",), minimum=1,
       default_help="1"),
    _s("prefill_context_parallel_size", Kind.COUNT, H, "vLLM prefill context parallelism: "
       "multiplies the GPUs per engine; the KV cache is unchanged.",
       flags=("--prefill-context-parallel-size", "-pcp"), field="prefill_context_parallel_size",
       yaml="prefill_context_parallel_size", serve=("--prefill-context-parallel-size", "-pcp"),
       default=1, minimum=1),
    _s("all2all_backend", Kind.TEXT, H, "vLLM's MoE all-to-all backend under expert parallelism; "
       "kvcalc models allgather_reducescatter (vLLM's default) and refuses the others (DeepEP, "
       "MoRI, NIXL-EP, FlashInfer and pplx allocate buffers it does not size).",
       field="all2all_backend", yaml="all2all_backend", serve=("--all2all-backend",),
       default_help="allgather_reducescatter", metavar="NAME"),
    _s("enable_dp_attention", Kind.BOOL, H, "SGLang data-parallel attention: "
       "{data_parallel_size} attention ranks within {tensor_parallel_size}, each with its own "
       "requests.", field="enable_dp_attention", yaml="enable_dp_attention",
       sglang=("--enable-dp-attention",), default=False),
    _s("tensor_parallel_size", Kind.COUNT, H, "Tensor-parallel ranks.",
       flags=("--tensor-parallel-size", "-tp"), field="tensor_parallel_size",
       yaml="tensor_parallel_size", serve=("--tensor-parallel-size", "-tp"), sglang=("--tp-size",),
       default=1, minimum=1),
    _s("pipeline_parallel_size", Kind.COUNT, H, "Pipeline stages.",
       flags=("--pipeline-parallel-size", "-pp"), field="pipeline_parallel_size",
       yaml="pipeline_parallel_size", serve=("--pipeline-parallel-size", "-pp"), default=1,
       sglang=("--pp-size",), minimum=1),
    _s("max_model_len", Kind.TOKENS, S, "Tokens per request{default}; " + TOKENS_HELP + ".",
       field="max_model_len", yaml="max_model_len", serve=("--max-model-len",),
       sglang=("--context-length",),
       serve_kind="tokens_or_auto", minimum=1, default_help="the model's, as vLLM derives it"),
    _s("max_num_seqs", Kind.COUNT, S, "The engine's cap on concurrent requests.",
       field="max_num_seqs", yaml="max_num_seqs", serve=("--max-num-seqs",),
       sglang=("--max-running-requests",), minimum=1,
       default_help="the engine's"),
    _s("batch", Kind.COUNT, S, "Concurrent requests (sequences) to size for.", field="batch",
       yaml="batch", minimum=1),
    _s("max_num_batched_tokens", Kind.TOKENS, S, "Tokens per scheduler step.",
       field="max_num_batched_tokens", yaml="max_num_batched_tokens",
       serve=("--max-num-batched-tokens",), minimum=1, default_help="the engine's, by GPU"),
    _s("kv_cache_dtype", Kind.CACHE_DTYPE, S, _KV_DTYPES_HELP, field="kv_cache_dtype",
       yaml="kv_cache_dtype", serve=("--kv-cache-dtype",), sglang=("--kv-cache-dtype",),
       default="auto"),
    _s("dtype", Kind.WEIGHT_DTYPE, S, "Weight dtype: auto, bfloat16, float16, float32 (or bf16, "
       "fp16, half, fp32, float).", field="dtype", yaml="dtype", serve=("--dtype",),
       sglang=("--dtype",)),
    _s("quantization", Kind.TEXT, S, "Weight quantization: fp8, awq, gptq, mxfp4, bitsandbytes, "
       "none.", flags=("--quantization", "-q"), field="quantization", yaml="quantization",
       serve=("--quantization", "-q"), sglang=("--quantization",), default_help="the checkpoint's"),
    _s("gpu_memory_utilization", Kind.FRACTION, S, "Fraction of total GPU memory the engine may "
       "use{default}.", field="gpu_memory_utilization", yaml="gpu_memory_utilization",
       serve=("--gpu-memory-utilization",), sglang=("--mem-fraction-static",),
       default_help="the engine's; vLLM 0.92, 0.9 in older versions"),
    _s("block_size", Kind.COUNT, S, "Tokens per KV block.", field="block_size", yaml="block_size",
       serve=("--block-size",), minimum=1, default_help="the engine's"),
    _s("enforce_eager", Kind.BOOL, S, "No CUDA graphs (no graph memory).", field="enforce_eager",
       yaml="enforce_eager", serve=("--enforce-eager",), default=False),
    _s("disable_sliding_window", Kind.BOOL, S, "vLLM's --disable-sliding-window: sliding-window "
       "layers attend to every token (full-attention caches) and max_model_len is capped at the "
       "window.", field="disable_sliding_window", yaml="disable_sliding_window",
       serve=("--disable-sliding-window",), default=False),
    _s("enable_prefix_caching", Kind.BOOL, S, "Prefix caching on or off: vLLM keeps a hybrid "
       "model's Mamba state in 'align' mode with it (2 blocks per request) and 'none' without "
       "(1); SGLang's off is --disable-radix-cache (one state slot per request).",
       flags=("--enable-prefix-caching", "--no-enable-prefix-caching"), field="enable_prefix_caching",
       yaml="enable_prefix_caching", serve=("--enable-prefix-caching",),
       default_help="the engine's: on"),
    _s("async_scheduling", Kind.BOOL, S, "vLLM's async scheduling: two batches in flight (PP + 1 "
       "under pipeline parallelism), which the sliding-window and chunked-attention reserves "
       "hold; off, one batch per pipeline stage.",
       flags=("--async-scheduling", "--no-async-scheduling"), field="async_scheduling",
       yaml="async_scheduling", serve=("--async-scheduling",), default_help="vLLM's: on"),
    _s("cudagraph_capture_sizes", Kind.COUNTS, S, "vLLM's CUDA graph capture sizes (tokens per "
       "batch), e.g. 1,2,4,8,16; the graphs whose memory vLLM sets aside.",
       field="cudagraph_capture_sizes", yaml="cudagraph_capture_sizes",
       serve=("--cudagraph-capture-sizes",), minimum=1, default_help="vLLM's, from max_num_seqs",
       metavar="N,N,..."),
    _s("max_cudagraph_capture_size", Kind.COUNT, S, "The largest CUDA graph vLLM captures "
       "(tokens); its default sizes stop there.", field="max_cudagraph_capture_size",
       yaml="max_cudagraph_capture_size", serve=("--max-cudagraph-capture-size",), minimum=1,
       default_help="vLLM's: 2 × max_num_seqs, at most 512 (1,024 on B200/B300)"),
    _s("cudagraph_mode", Kind.GRAPH_MODE, S, "vLLM's CUDA graph mode: none, piecewise, full, "
       "full_decode_only or full_and_piecewise (-cc.cudagraph_mode).", field="cudagraph_mode",
       yaml="cudagraph_mode", serve=("-cc.cudagraph_mode", "--compilation-config.cudagraph-mode"),
       default_help="vLLM's, full_and_piecewise", metavar="MODE"),
    _s("speculative_config", Kind.JSON, S, "Speculative decoding as vLLM's JSON, e.g. "
       "'{{\"method\":\"mtp\",\"num_speculative_tokens\":1}}' (mtp, eagle, eagle3, draft_model, "
       "ngram, suffix): the draft's layers join the KV cache and its weights the weights term.",
       flags=("--speculative-config", "-sc"), field="speculative_config", yaml="speculative_config",
       serve=("--speculative-config", "-sc"), metavar="JSON"),
    _s("spec_method", Kind.TEXT, S, "Speculative method, vLLM's shorthand for {speculative_config}'s "
       "method; SGLang's --speculative-algorithm (NEXTN, EAGLE, EAGLE3, STANDALONE, NGRAM).",
       field="spec_method", yaml="spec_method", serve=("--spec-method",),
       sglang=("--speculative-algorithm",)),
    _s("spec_model", Kind.TEXT, S, "The draft (EAGLE head or draft model: bundled, path or Hub id), "
       "vLLM's shorthand for {speculative_config}'s model; SGLang's --speculative-draft-model-path.",
       field="spec_model", yaml="spec_model", serve=("--spec-model",),
       sglang=("--speculative-draft-model-path",)),
    _s("spec_tokens", Kind.COUNT, S, "Tokens proposed per step, vLLM's shorthand for "
       "{speculative_config}'s num_speculative_tokens; SGLang's --speculative-num-steps.",
       field="spec_tokens", yaml="spec_tokens", serve=("--spec-tokens",),
       sglang=("--speculative-num-steps",), minimum=1),
    _s("kv_cache_memory", Kind.SIZE, S, "KV-cache bytes per GPU, skipping the memory estimate "
       "(vLLM --kv-cache-memory-bytes); a bare number below 1,048,576 means GiB.",
       field="kv_cache_memory_bytes", yaml="kv_cache_memory", serve=("--kv-cache-memory-bytes",),
       serve_kind="bytes", minimum=0, metavar="SIZE"),
    _s("weights_memory", Kind.SIZE, S, "Weight bytes per GPU you already know (e.g. vLLM's 'Model "
       "loading took X GiB'); a bare number below 1,048,576 means GiB.",
       field="weights_memory_bytes", yaml="weights_memory", minimum=0, metavar="SIZE"),
    _s("tight_threshold", Kind.THRESHOLD, S, "Headroom under this share of the KV cache is "
       "'tight' (0.1 or 10%).", field="tight_fraction", yaml="tight_threshold", default=0.10,
       metavar="SHARE"),
    _s("engine_option", Kind.OPTIONS, S, "Engine-specific knobs (`kvcalc plan --help` lists each "
       "engine's), e.g. llama.cpp n_seq_max, hf cache_implementation=static.", flags=("--engine-option", "-E"), field="engine_options",
       yaml="engine_options", metavar="KEY=VALUE"),
    _s("enable_lora", Kind.BOOL, S, "vLLM/SGLang LoRA adapters: {max_loras} slots of rank "
       "{max_lora_rank} are allocated beside the weights, before the KV budget.",
       field="enable_lora", yaml="enable_lora", serve=("--enable-lora",),
       sglang=("--enable-lora",), default=False),
    _s("max_loras", Kind.COUNT, S, "LoRA adapters in one batch: the GPU slots (vLLM --max-loras, "
       "SGLang --max-loras-per-batch){default}.", field="max_loras", yaml="max_loras",
       serve=("--max-loras",), sglang=("--max-loras-per-batch",), minimum=1,
       default_help="1, vLLM's; SGLang's 8"),
    _s("max_lora_rank", Kind.COUNT, S, "The rank every LoRA slot is sized for: vLLM takes 1, 8, "
       "16, 32, 64, 128, 256, 320 or 512{default}.", field="max_lora_rank", yaml="max_lora_rank",
       serve=("--max-lora-rank",), sglang=("--max-lora-rank",), minimum=1,
       default_help="16, vLLM's; SGLang needs it"),
    _s("lora_target_modules", Kind.TEXT, S, "SGLang's --lora-target-modules: the modules its "
       "LoRA pool holds slots for (all, or names such as q_proj k_proj v_proj o_proj, separated "
       "by spaces or commas).", field="lora_target_modules", yaml="lora_target_modules",
       sglang=("--lora-target-modules",), metavar="MODULES"),
    _s("max_cpu_loras", Kind.COUNT, S, "LoRA adapters kept in host memory, at least {max_loras} "
       "(vLLM --max-cpu-loras, SGLang --max-loaded-loras){default}.", field="max_cpu_loras",
       yaml="max_cpu_loras", serve=("--max-cpu-loras",), sglang=("--max-loaded-loras",),
       minimum=1, default_help="max_loras"),
    _s("fully_sharded_loras", Kind.BOOL, S, "vLLM's fully sharded LoRA layers: the slots' rank "
       "(column layers) or output (row layers) split over the tensor-parallel ranks.",
       field="fully_sharded_loras", yaml="fully_sharded_loras", serve=("--fully-sharded-loras",),
       default=False),
    _s("lora_dtype", Kind.TEXT, S, "The LoRA slots' dtype: auto (the model's), float16 or "
       "bfloat16.", field="lora_dtype", yaml="lora_dtype", serve=("--lora-dtype",),
       default_help="auto"),
    _s("kv_offloading_size", Kind.SIZE, S, "vLLM's CPU KV offloading: host memory for KV blocks, "
       "summed over the tensor-parallel ranks (vLLM --kv-offloading-size, in GiB); a bare number "
       "means GiB.", field="kv_offloading_bytes", yaml="kv_offloading_size",
       serve=("--kv-offloading-size",), serve_kind="gib", minimum=0, metavar="SIZE"),
    _s("kv_offloading_backend", Kind.TEXT, S, "The offloading backend of {kv_offloading_size}: "
       "native or lmcache{default}.", field="kv_offloading_backend", yaml="kv_offloading_backend",
       serve=("--kv-offloading-backend",), default_help="native"),
    _s("kv_transfer_config", Kind.TEXT, S, "vLLM's --kv-transfer-config JSON: OffloadingConnector "
       "(cpu_bytes_to_use), NixlConnector (kv_buffer_device cpu mirrors the KV cache in host "
       "memory) or the LMCache connectors.", field="kv_transfer_config", yaml="kv_transfer_config",
       serve=("--kv-transfer-config",), metavar="JSON"),
    _s("cpu_offload_gb", Kind.SIZE, S, "vLLM's weight offloading: decoder-layer parameters moved to "
       "host memory per GPU, in module order, until this size (vLLM --cpu-offload-gb, in GiB); "
       "a bare number means GiB.", field="cpu_offload_bytes", yaml="cpu_offload_gb",
       serve=("--cpu-offload-gb",), serve_kind="gib", minimum=0, metavar="SIZE"),
    _s("limit_mm_per_prompt", Kind.TEXT, S, "vLLM's items per prompt by modality, JSON "
       "('{{\"image\": 2, \"video\": 0}}') or image=2,video=0; 999 where not given (vLLM 0.33); "
       "every modality the tower serves at 0 (image and video; image alone for LLaVA, Mistral 3, "
       "Gemma 3, Llama 4, LightOnOCR, LFM2-VL, PaliGemma; video alone for LLaVA-NeXT-Video): "
       "no vision tower.",
       field="limit_mm_per_prompt",
       yaml="limit_mm_per_prompt", serve=("--limit-mm-per-prompt",), metavar="JSON"),
    _s("mm_encoder_tp_mode", Kind.TEXT, S, "vLLM's vision encoder under tensor parallelism: "
       "weights (split, the default) or data (whole on every rank, where the model supports it).",
       field="mm_encoder_tp_mode", yaml="mm_encoder_tp_mode", serve=("--mm-encoder-tp-mode",),
       default_help="weights"),
    _s("mm_ipc_gpu_memory_gb", Kind.SIZE, S, "vLLM's GPU memory held for frontend multimodal "
       "decoding, out of the KV memory (vLLM --mm-ipc-gpu-memory-gb, in GiB); a bare number "
       "means GiB.", field="mm_ipc_gpu_memory_bytes", yaml="mm_ipc_gpu_memory_gb",
       serve=("--mm-ipc-gpu-memory-gb",), serve_kind="gib", minimum=0, metavar="SIZE"),
    _s("mamba_cache_dtype", Kind.TEXT, S, "vLLM's recurrent conv-state dtype: auto (the model's), "
       "float32, float16 or bfloat16; the SSM state follows it unless the model or "
       "{mamba_ssm_cache_dtype} sets its own.", field="mamba_cache_dtype", yaml="mamba_cache_dtype",
       serve=("--mamba-cache-dtype",), default_help="auto"),
    _s("mamba_ssm_cache_dtype", Kind.TEXT, S, "vLLM's recurrent SSM-state dtype (Mamba, Gated "
       "DeltaNet, KDA): auto (the checkpoint's choice), float32, float16 or bfloat16.",
       field="mamba_ssm_cache_dtype", yaml="mamba_ssm_cache_dtype",
       serve=("--mamba-ssm-cache-dtype",), default_help="auto"),
    _s("prompt_len", Kind.TOKENS, W, "Expected prompt tokens per request.", field="prompt_len",
       yaml="workload.prompt_len", minimum=1),
    _s("output_len", Kind.TOKENS, W, "Expected output tokens per request.", field="output_len",
       yaml="workload.output_len", minimum=0),
    _s("shared_prefix", Kind.TOKENS, W, "Prompt tokens all requests share (prefix caching).",
       field="shared_prefix", yaml="workload.shared_prefix", default=0, minimum=0),
    _s("calibration", Kind.TEXT, S, "A `kvcalc verify --record` file correcting the overhead "
       "estimate.", field="calibration", metavar="FILE"),
    _s("allow_long_max_model_len", Kind.BOOL, S, "Model VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a "
       "{max_model_len} above the model's derived maximum starts.",
       field="allow_long_max_model_len", yaml="allow_long_max_model_len", default=False),
    _s("gguf_file", Kind.TEXT, M, "The GGUF file of a Hub repo to read (same as MODEL:FILE.gguf; "
       "MODEL:Q4_K_M picks by quant tag).", metavar="FILE"),
    _s("token", Kind.TEXT, M, "Hugging Face token (default: HF_TOKEN or the stored login). "
       "Never printed."),
    _s("offline", Kind.BOOL, M, "Never touch the network (also HF_HUB_OFFLINE=1): bundled models, "
       "paths and the Hub cache only.", default=False),
    _s("trust_layout", Kind.BOOL, M, "Plan a config whose architecture kvcalc has not verified "
       "anyway, as plain attention (marked layout_validated: false).", field="trust_layout",
       yaml="trust_layout", default=False),
    _s("json", Kind.BOOL, OUT, "Print the result as JSON.", default=False),
)  # fmt: skip
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


@cache
def _spellings(surface: str) -> dict[str, str]:
    """Every setting's name as ``surface`` writes it (the help texts' placeholders), built once."""
    return {s.name: s.spelled(surface) for s in SETTINGS}


BY_FIELD: dict[str, Setting] = {s.field: s for s in SETTINGS if s.field}


def setting(name: str) -> Setting:
    return BY_NAME[name]


def plan_fields(values: dict[str, Any]) -> dict[str, Any]:
    """Setting name → value, read as :class:`~kvcalc.planning.inputs.PlanInputs` field → value
    (the settings that fill no field are left out)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        s = BY_NAME.get(name)
        if s is None or s.field is None:
            continue
        out[s.field] = tuple(value or ()) if s.kind is Kind.OPTIONS else value
    return out
