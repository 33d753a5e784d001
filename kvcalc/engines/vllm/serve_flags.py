"""vLLM 0.33's ``vllm serve`` flags that do not change GPU memory: the reviewed list.

The flags themselves are vLLM's own (:func:`kvcalc.engines.flag_table.flag_table`, recorded from
its parser). A flag is *modelled* when the settings table (:mod:`kvcalc.planning.settings`) names
one of its spellings; it has *no effect on memory* when it is listed here; every other flag is
*not modelled* and refused by name (``flag-not-modelled``). So a flag vLLM adds in a release is
refused until someone reads what vLLM does with it and classifies it.

Listed here only what, read in vLLM 0.33's code, touches neither the GPU memory a worker uses
(weights, activation, KV cache, CUDA graphs, buffers) nor the host memory kvcalc reports: the
API server and its HTTP options (``vllm/entrypoints/openai/cli_args.py`` ``FrontendArgs``),
tokenizers, chat templates and tool/reasoning parsers (all in the API-server process), logging,
metrics and tracing, ports and addresses, placement of processes. Doubtful flags are *not* listed
(kernel backends, allocator modes, sampling buffers, scheduler modes): kvcalc refuses them rather
than plan without them.
"""

from __future__ import annotations

from kvcalc.engines.flag_table import FlagTable, flag_table, listed_reason

__all__ = [
    "ENGINE_OPTION_DESTS", "NO_EFFECT", "NO_EFFECT_CONFIG_KEYS", "NO_EFFECT_VALUES", "UNMODELLED", "serve_flags",
    "unmodelled_reason",
]  # fmt: skip


def serve_flags() -> FlagTable:
    """vLLM 0.33.0's ``vllm serve`` flags, as its parser matches them."""
    return flag_table("vllm")


#: flags (by their ``dest``) read as vLLM engine options (``-E KEY``): the option the planner
#: reads under the same name (``--num-gpu-blocks-override N`` is ``-E num_gpu_blocks_override=N``;
#: :mod:`kvcalc.engines.vllm.v1` sizes the pool as vLLM 0.33's ``kv_cache_planning.py`` does)
ENGINE_OPTION_DESTS = frozenset({"num_gpu_blocks_override"})

#: flags (by their first option string) with no effect on memory, whatever their value
NO_EFFECT = frozenset((
    # processes and placement: API servers (CPU), headless workers, node topology (each GPU
    # still runs the same worker: vllm/entrypoints/cli/serve.py run_headless, run_multi_api_server)
    "--headless", "--api-server-count", "--grpc", "--grpc-port", "--uds", "--host", "--port",
    "--data-parallel-supervisor-port", "--dp-supervisor-probe-interval-s",
    "--dp-supervisor-probe-timeout-s", "--dp-supervisor-probe-failure-threshold",
    "--distributed-executor-backend", "--master-addr", "--master-port", "--nnodes", "--node-rank",
    "--distributed-timeout-seconds", "--cpu-distributed-timeout-seconds", "--numa-bind",
    "--numa-bind-nodes", "--numa-bind-cpus", "--device-ids", "--data-parallel-rank",
    "--data-parallel-start-rank", "--data-parallel-size-local", "--data-parallel-address",
    "--data-parallel-rpc-port", "--data-parallel-backend", "--data-parallel-hybrid-lb",
    "--data-parallel-external-lb", "--data-parallel-multi-port-external-lb",
    "--max-parallel-loading-workers", "--ray-workers-use-nsight", "--shutdown-timeout",
    "--fail-on-environ-validation", "--renderer-num-workers",
    # HTTP server (FrontendArgs: uvicorn, CORS, TLS, docs, headers)
    "--uvicorn-log-level", "--disable-uvicorn-access-log", "--disable-access-log-for-endpoints",
    "--allow-credentials", "--allowed-origins", "--allowed-methods", "--allowed-headers",
    "--api-key", "--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--enable-ssl-refresh",
    "--ssl-cert-reqs", "--ssl-ciphers", "--root-path", "--middleware",
    "--enable-request-id-headers", "--disable-fastapi-docs", "--h11-max-incomplete-event-size",
    "--h11-max-header-count", "--enable-offline-docs", "--sse-keep-alive-interval",
    "--enable-server-load-tracking", "--enable-tokenizer-info-endpoint", "--fingerprint-mode",
    "--fingerprint-value", "--enable-scale-out",
    # --tokens-only: the API server skips the tokenizer (arg_utils.py create_engine_config sets
    # skip_tokenizer_init); --enable-flash-late-interaction: a pooling scorer's path only
    "--tokens-only", "--enable-flash-late-interaction",
    # requests, responses, chat templates, tools and reasoning (the API-server process)
    "--chat-template", "--chat-template-content-format", "--trust-request-chat-template",
    "--trust-request-mm-kwargs", "--default-chat-template-kwargs", "--reasoning-effort-map",
    "--response-role", "--return-tokens-as-token-ids", "--enable-auto-tool-choice",
    "--exclude-tools-when-tool-choice-none", "--tool-call-parser", "--tool-parser-plugin",
    "--tool-strict-level", "--tool-server", "--enable-prompt-tokens-details",
    "--enable-force-include-usage", "--cohere-is-reasoning-model", "--cohere-format",
    "--anthropic-disabled-thinking-effort", "--reasoning-parser", "--reasoning-parser-plugin",
    "--served-model-name", "--generation-config", "--override-generation-config",
    "--allowed-local-media-path", "--allowed-media-domains",
    "--interleave-mm-strings", "--mm-hasher-algorithm", "--stream-interval",
    "--max-num-queued-reqs", "--max-num-queued-tokens", "--scheduling-policy",
    # tokenizer and the files read (the weights are the model's whatever the source)
    "--tokenizer", "--tokenizer-mode", "--tokenizer-revision", "--skip-tokenizer-init",
    "--trust-remote-code", "--code-revision", "--hf-token", "--download-dir", "--ignore-patterns",
    "--use-tqdm-on-load", "--safetensors-prefetch-num-threads", "--seed",
    "--allow-deprecated-quantization", "--prefix-caching-hash-algo",
    # logging, metrics, tracing (vllm/config/observability.py; the KV-event publisher runs in the
    # scheduler process: v1/core/sched/scheduler.py)
    "--max-log-len", "--enable-per-request-metrics", "--enable-log-outputs", "--enable-log-deltas",
    "--log-error-stack", "--logging-config", "--log-level", "--log-config-file",
    "--show-hidden-metrics-for-version", "--otlp-traces-endpoint", "--collect-detailed-traces",
    "--per-request-spec-decode-metrics", "--kv-cache-metrics", "--kv-cache-metrics-sample",
    "--custom-histogram-buckets", "--cudagraph-metrics", "--enable-mfu-metrics",
    "--enable-logging-iteration-details", "--jit-monitor-mode", "--jit-monitor-verbose",
    "--disable-log-stats", "--aggregate-engine-logging", "--enable-log-requests",
    "--kv-events-config", "--profiler-config", "--watchdog-config",
    # deprecated, read by nothing but a warning (engine/arg_utils.py create_model_config,
    # create_engine_config: _DISABLE_CASCADE_ATTN_/_MAMBA_CACHE_MODE_DEPRECATION_MESSAGE); the
    # mamba cache mode follows --enable-prefix-caching
    "--disable-cascade-attn", "--mamba-cache-mode",
))  # fmt: skip

#: flags with no effect on memory for these values only (other values are not modelled)
NO_EFFECT_VALUES: dict[str, frozenset[str]] = {
    # vllm/config/load.py LoadConfig.load_format (lowercased): these read the same weights
    # (dummy: random values of the same shapes); gguf, bitsandbytes, sharded_state, tensorizer,
    # runai_streamer, ... load differently
    "--load-format": frozenset({"auto", "pt", "safetensors", "npcache", "dummy"}),
    # how config.json is found; mistral reads params.json (another reading of the shape)
    "--config-format": frozenset({"auto", "hf"}),
    # the generative runner kvcalc plans (auto picks it for a generative model)
    "--runner": frozenset({"auto", "generate"}),
    "--convert": frozenset({"auto", "none"}),
    "--model-impl": frozenset({"auto", "vllm"}),
}

#: keys of ``-cc``/``--compilation-config`` with no effect on memory (the CUDA-graph keys kvcalc
#: reads are modelled: :mod:`kvcalc.planning.servecmd_compile`): where compiled code is cached
#: and dumped, and the warm-up runs before each capture (the same sizes, no graph kept)
NO_EFFECT_CONFIG_KEYS: dict[str, frozenset[str]] = {
    "compilation_config": frozenset({
        "debug_dump_path", "cache_dir", "compile_cache_save_format", "local_cache_dir",
        "cudagraph_num_of_warmups",
    }),
}  # fmt: skip

#: the flags reviewed and not modelled, by what they change (said in ``flag-not-modelled``).
#: Not a class of its own: a flag is not modelled when it is neither modelled nor listed above,
#: listed here or not (a flag the settings table models counts as modelled even if still listed).
#: tests/test_serve_flags.py fails while a recorded flag is in none of the lists, so a flag a
#: new release adds is read and placed before the recording is accepted.
UNMODELLED: dict[str, tuple[str, ...]] = {
    "flags read from a file kvcalc does not see": ("--config",),
    "the model's configuration or its weights": (
        "--hf-config-path", "--quantization-config", "--hf-overrides", "--model-class-overrides",
        "--pooler-config", "--language-model-only", "--model-loader-extra-config",
        "--pt-load-map-location", "--safetensors-load-strategy", "--safetensors-prefetch-block-size",
        "--io-processor-plugin", "--worker-cls", "--worker-extension-cls", "--additional-config",
        "--weight-transfer-config", "--engram-config", "--diffusion-config",
        "--load-format", "--config-format", "--runner", "--convert", "--model-impl",
    ),
    "sampling and output buffers": (
        "--enable-return-routed-experts", "--return-sampling-mask", "--max-logprobs",
        "--logprobs-mode", "--use-fp64-gumbel", "--enable-trace-replay", "--enable-prompt-embeds",
        "--logits-processors", "--structured-outputs-config", "--aux-output-config",
        "--watermark-config", "--reasoning-config", "--enable-batch-sharded-sampling",
    ),
    "the KV cache's layout or size": (
        "--prefix-cache-retention-interval", "--kv-cache-dtype-skip-layers",
        "--kv-sharing-fast-prefill", "--swa-bounded-replay", "--mamba-block-size", "--prefix-match-unit",
        "--enable-mamba-shared-prefix-checkpoint", "--replayssm-buffer-len", "--use-replayssm",
        "--disable-hybrid-kv-cache-manager", "--enable-mamba-cache-stochastic-rounding",
        "--mamba-cache-philox-rounds",
    ),
    "host offload of weights or KV": (
        "--offload-backend", "--cpu-offload-params", "--offload-group-size", "--offload-num-in-group",
        "--offload-prefetch-step", "--offload-params", "--ec-transfer-config", "--ec-manager-config",
    ),
    "the memory allocator": (
        "--enable-sleep-mode", "--sleep-mode-backend", "--sleep-mode-offload-cudagraph",
        "--sleep-preserve-parameter-names", "--enable-cumem-allocator", "--enable-nccl-comm-suspend",
        "--enable-shm-tensor-arena",
    ),
    "kernels and their workspaces": (
        "--attention-backend", "--mamba-backend", "--mamba-ssu-algorithm",
        "--moe-backend", "--linear-backend", "--sparse-indexer-topk-backend", "--attention-config",
        "--kernel-config", "--ir-op-priority", "--enable-flashinfer-autotune", "--monokernel",
        "--gdn-prefill-backend", "--kda-prefill-backend", "--kda-decode-backend",
        "--disable-custom-all-reduce", "--all2all-backend", "--enable-layerwise-nvtx-tracing",
    ),
    "parallelism": (
        "--decode-context-parallel-size", "--dcp-comm-backend", "--dcp-q-replicate",
        "--dcp-kv-cache-interleave-size", "--cp-kv-cache-interleave-size",
        "--prefill-context-parallel-size", "--data-parallel-size", "--enable-hc-sp",
        "--enable-expert-parallel", "--enable-ep-weight-filter", "--enable-dbo", "--ubatch-size",
        "--enable-elastic-ep", "--elastic-ep-max-dp-size", "--dbo-decode-token-threshold",
        "--dp-sync-interval", "--dbo-prefill-token-threshold",
        "--disable-nccl-for-dp-synchronization", "--enable-eplb", "--eplb-config",
        "--expert-placement-strategy", "--enable-fault-tolerance", "--fault-tolerance-config",
    ),
    "multimodal inputs and the encoder": (
        "--enable-mm-embeds", "--media-io-kwargs", "--mm-processor-kwargs",
        "--mm-processor-cache-gb", "--mm-processor-cache-type", "--mm-shm-cache-max-object-size-mb",
        "--mm-encoder-only", "--mm-encoder-attn-backend",
        "--mm-encoder-attn-dtype", "--mm-encoder-fp8-scale-path", "--mm-encoder-fp8-scale-save-path",
        "--mm-encoder-fp8-scale-save-margin", "--skip-mm-profiling", "--video-pruning-rate",
        "--video-pruning-method", "--mm-tensor-ipc", "--mm-processor-device",
        "--mm-device-do-normalize", "--disable-chunked-mm-input",
    ),
    "LoRA adapters": (
        "--lora-modules", "--enable-tower-connector-lora", "--lora-target-modules", "--default-mm-loras", "--specialize-active-lora",
        "--enable-mixed-moe-lora-format", "--enable-moe-shared-loras", "--max-lora-cls-labels",
    ),
    "speculative decoding": ("--speculative-config", "--spec-method", "--spec-model", "--spec-tokens"),
    "the scheduler's batch budget": (
        "--max-num-scheduled-tokens", "--max-num-active-seqs", "--long-prefill-token-threshold",
        "--long-prefill-token-threshold-adaptive", "--enable-chunked-prefill", "--scheduler-cls",
        "--scheduler-reserve-full-isl", "--watermark", "--prefill-schedule-interval",
        "--performance-mode",
    ),
}  # fmt: skip


def unmodelled_reason(name: str) -> str | None:
    """What the not-modelled flag ``name`` changes, when it was reviewed."""
    return listed_reason(UNMODELLED, name)
