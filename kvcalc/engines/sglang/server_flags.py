"""SGLang 0.5.23's ``launch_server`` flags that do not change GPU memory: the reviewed list.

The flags are SGLang's own (:func:`kvcalc.engines.flag_table.flag_table`, recorded from
``ServerArgs.add_cli_args`` in ``sglang/srt/server_args.py``). A flag is *modelled* when the
settings table names one of its spellings (``sglang=``) or its ``dest`` is an engine option the
SGLang module reads (:data:`~kvcalc.engines.sglang.defaults.EXTRA_KEYS`: ``--page-size`` is
``-E page_size``); it has *no effect on memory* when it is listed here; every other flag is *not
modelled* and refused by name (``flag-not-modelled``).

Listed here: the HTTP/gRPC server and its TLS, the tokenizer and detokenizer processes, chat
templates, tool and reasoning parsers, sampling defaults, logging, metrics and tracing, ports,
addresses and device numbering, the scheduler's policies (which request runs next, not how many
fit), speculative acceptance thresholds and the n-gram drafter's host-memory corpus, how
checkpoint files are read — all outside the memory pool SGLang sizes at start-up
(``sglang/srt/mem_cache/kv_cache_configurator.py`` ``_profile_available_bytes``,
``sglang/srt/model_executor/pool_configurator.py``). Each was read in SGLang's code, and the ones
reviewed since the first list were also given to SGLang itself
(``scripts/sglang_flag_probe.py``: its resolution and pool unchanged,
``tests/fixtures/sglang_0_5_23/no_effect_flags.json``). What SGLang refuses at start-up among
them is refused too (:func:`check_startup`). Everything that touches the engine's kernels,
parallelism, caches, the scheduler's budget or weights is not modelled unless the planner reads
it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

from kvcalc.engines.flag_table import FlagTable, flag_table, listed_reason
from kvcalc.errors import InputError

__all__ = [
    "NO_EFFECT", "NO_EFFECT_VALUES", "UNMODELLED", "check_startup", "parse_human_int",
    "server_flags", "unmodelled_reason",
]  # fmt: skip

_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")


def server_flags() -> FlagTable:
    """SGLang 0.5.23's ``launch_server`` flags, as its parser matches them."""
    return flag_table("sglang")


def parse_human_int(text: str, *, what: str) -> int:
    """SGLang's ``human_readable_int`` (sglang/srt/utils/common.py): SI ``k``/``M``/``G``/``T``
    (decimals allowed: ``25.6k`` = 25,600) and IEC ``Ki``/``Mi``/``Gi``/``Ti``, case-sensitive —
    ``32k`` = 32,000 and ``32Ki`` = 32,768; ``32K`` is refused (vLLM reads it as 32,768).

    >>> parse_human_int("32k", what="x"), parse_human_int("32Ki", what="x")
    (32000, 32768)
    """
    value = text.strip()
    match = _HUMAN.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC and "." not in number:
            return int(number) * _IEC[suffix]
        if suffix in _SI:
            return int(Decimal(number) * _SI[suffix])
    elif re.fullmatch(r"[+-]?\d+", value):
        return int(value)
    raise InputError(
        f"{what}: invalid integer value {text[:40]!r} (SGLang takes a plain integer, SI suffixes "
        "1k, 1M, or IEC suffixes 1Ki, 1Mi; case-sensitive)",
        code="invalid-serve-command",
    )


#: flags (by their first option string) with no effect on memory, whatever their value
NO_EFFECT = frozenset((
    "--tokenizer-path", "--tokenizer-mode", "--tokenizer-backend", "--tokenizer-worker-num",
    "--detokenizer-worker-num", "--skip-tokenizer-init", "--trust-remote-code",
    "--max-queued-requests", "--nccl-port", "--dist-timeout", "--dist-init-addr",
    "--gated-launch-port", "--nnodes", "--node-rank", "--base-gpu-id", "--gpu-id-step",
    "--random-seed", "--watchdog-timeout", "--soft-watchdog-timeout", "--numa-node", "--host",
    "--port", "--fastapi-root-path", "--smg-grpc-mode", "--grpc-mode", "--grpc-port",
    "--skip-server-warmup", "--warmups", "--enable-http2",
    "--http2-max-concurrent-streams", "--http2-initial-connection-window-size", "--ssl-keyfile",
    "--ssl-certfile", "--ssl-ca-certs", "--ssl-keyfile-password", "--enable-ssl-refresh",
    "--api-key", "--admin-api-key", "--served-model-name", "--weight-version",
    "--chat-template", "--trust-request-chat-template", "--hf-chat-template-name",
    "--completion-template", "--file-storage-path", "--enable-cache-report",
    "--return-input-ids", "--return-output-ids", "--default-chat-template-kwargs",
    "--strip-thinking-cache", "--enable-strict-thinking", "--tool-server",
    "--sampling-defaults", "--preferred-sampling-params", "--allow-auto-truncate",
    "--stream-interval", "--batch-notify-size", "--stream-response-default-include-usage",
    "--incremental-streaming-output", "--log-level", "--log-level-http", "--log-requests",
    "--log-requests-level", "--log-requests-format", "--log-requests-target",
    "--uvicorn-access-log-exclude-prefixes", "--crash-dump-folder", "--show-time-cost",
    "--enable-metrics", "--smg-http-sidecar-port", "--enable-mfu-metrics",
    "--enable-metrics-for-all-schedulers", "--load-snapshot-publish-interval",
    "--tokenizer-metrics-custom-labels-header", "--tokenizer-metrics-allowed-custom-labels",
    "--extra-metric-labels", "--bucket-time-to-first-token", "--bucket-inter-token-latency",
    "--bucket-e2e-request-latency", "--prompt-tokens-buckets", "--generation-tokens-buckets",
    "--gc-warning-threshold-secs", "--decode-log-interval",
    "--enable-request-time-stats-logging", "--kv-events-config", "--load-publish-endpoint",
    "--enable-forward-pass-metrics", "--forward-pass-metrics-worker-id",
    "--forward-pass-metrics-ipc-name", "--enable-trace", "--trace-modules",
    "--otlp-traces-endpoint", "--export-metrics-to-file", "--export-metrics-to-file-dir",
    "--constrained-json-whitespace-pattern", "--constrained-json-disable-any-whitespace",
    "--constrained-json-max-whitespace-cnt", "--spec-trace-dir", "--allowed-media-domains",
    "--engine-info-bootstrap-port", "--download-dir", "--model-checksum", "--otlp-service-name",
    "--grpc-response-timeout-secs", "--enable-http-worker-reuseport", "--reasoning-parser",
    "--tool-call-parser", "--lora-eviction-policy", "--lora-strict-loading",
    "--lora-drain-wait-threshold",
    # the capture's profiler and Python's garbage collector during capture (gc.freeze): read by
    # the graph runners after the pool is sized, no GPU memory of their own
    "--enable-profile-cuda-graph", "--enable-cudagraph-gc",
    # which waiting request runs next, and when: read by the scheduler's policy objects
    # (managers/scheduler.py, schedule_policy.py, schedule_batch.py retract_decode,
    # prefill_delayer.py: a 6-integer all-gather buffer per rank) after the pools are built;
    # priority scheduling reaches the pools only through disaggregated decode's retraction
    # backup (mem_cache/kv_cache_builder.py), refused with --disaggregation-mode.
    # --num-continuous-decode-steps is read by nothing in 0.5.23. Recorded:
    # tests/fixtures/sglang_0_5_23/no_effect_flags.json (start-up resolution and pool unchanged);
    # SGLang's start-up checks on them: check_startup below
    "--schedule-policy", "--enable-priority-scheduling", "--disable-priority-preemption",
    "--default-priority-value", "--abort-on-priority-when-disabled",
    "--schedule-low-priority-values-first", "--priority-scheduling-preemption-threshold",
    "--retraction-policy", "--schedule-conservativeness", "--prefill-decode-interval",
    "--prefill-decode-interval-min-bs", "--num-continuous-decode-steps",
    "--scheduler-recv-interval", "--min-free-slots-delay", "--enable-prefill-delayer",
    "--prefill-delayer-max-delay-passes", "--prefill-delayer-token-usage-low-watermark",
    "--prefill-delayer-forward-passes-buckets", "--prefill-delayer-wait-seconds-buckets",
    "--prefill-delayer-queue-min-ratio", "--prefill-delayer-max-delay-ms",
    # the tokenizer and detokenizer processes (managers/tokenizer_manager.py,
    # detokenizer_manager.py), the Responses API's store (entrypoints/openai), outlines' disk
    # cache (an environment variable), the multimodal processors' CPU workers and download cap
    # (multimodal/processors/base_processor.py), the realtime ASR sessions
    # (entrypoints/openai/realtime) and Python's gc thresholds (entrypoints/engine.py)
    "--enable-dynamic-batch-tokenizer", "--dynamic-batch-tokenizer-batch-size",
    "--dynamic-batch-tokenizer-batch-timeout", "--enable-tokenizer-batch-encode",
    "--disable-tokenizer-batch-decode", "--disable-outlines-disk-cache",
    "--enable-response-store", "--mm-processor-worker-num", "--mm-io-worker-num",
    "--media-url-max-file-size-mb", "--trust-mm-content-hashes", "--asr-max-buffer-seconds",
    "--asr-max-concurrent-sessions", "--gc-threshold",
    # speculative decoding's acceptance thresholds (the verify step's sampling), the n-gram
    # drafter's CPU corpus (speculative/cpp_ngram: its trie and capacity live in host memory;
    # --speculative-ngram-max-bfs-breadth is not listed: it becomes the tree's top-k,
    # speculative_hook.py), and the decoupled drafter's endpoints (read only with
    # --decoupled-spec-role, not modelled: server_args.py)
    "--speculative-accept-threshold-single", "--speculative-accept-threshold-acc",
    "--speculative-ngram-min-bfs-breadth", "--speculative-ngram-match-type",
    "--speculative-ngram-max-trie-depth", "--speculative-ngram-capacity",
    "--decoupled-spec-bind-endpoint", "--decoupled-spec-connect-endpoints",
    "--decoupled-spec-rank",
    # how checkpoint files are read into host memory (model_loader/loader.py: mmap, prefetch
    # threads, page-cache drop): the same weights reach the GPU; what happens to the files and
    # readiness after loading (entrypoints/http_server.py); the weight cache daemon's timeout
    # (read only with --weight-cache-mode, not modelled)
    "--weight-loader-disable-mmap", "--weight-loader-prefetch-checkpoints",
    "--weight-loader-prefetch-num-threads", "--weight-loader-drop-cache-after-load",
    "--delete-ckpt-after-loading", "--checkpoint-engine-wait-weights-before-ready",
    "--weight-cache-timeout",
    # which DP rank takes a request (managers/data_parallel_controller.py: round robin or the
    # lightest rank; the bootstrap room's rank under PD), bootstrap ports and the decode side's
    # polling interval of disaggregated serving (read only with --disaggregation-mode and
    # --encoder-urls, not modelled), TF32 matmuls, the P2P access check and NVTX markers, an
    # interpolation's align_corners (Qwen3-VL's position embedding), and the scheduler's sleep
    # when idle (managers/scheduler.py IdleSleeper). Recorded in no_effect_flags_2.json
    "--load-balance-method", "--disaggregation-bootstrap-port", "--encoder-bootstrap-port",
    "--disaggregation-decode-polling-interval", "--enable-tf32-matmul", "--enable-p2p-check",
    "--enable-layerwise-nvtx-marker", "--enable-precise-embedding-interpolation",
    "--sleep-on-idle",
    # user logit processors run per request on the sampled batch's logits
    # (sampling/sampling_batch_info.py; refused beside --enable-watermark, not modelled), and the
    # scheduler's broadcast of processed multimodal inputs from rank 0 (managers/scheduler.py:
    # host objects; refused beside --language-model-only, not modelled)
    "--enable-custom-logit-processor", "--enable-broadcast-mm-inputs-process",
    # the grammar backend compiles grammars on the host; its vocabulary mask is allocated per
    # batch that has a constrained request (sampling/sampling_batch_info.py
    # update_regex_vocab_mask), after start-up. Kernel switches read by the model's layers
    # (qwen3_moe.py, mellum.py: the fused q/k-norm + RoPE kernel, in place) or by nothing in
    # 0.5.23 (--triton-attention-reduce-in-fp32); FlashInfer's autotuning, which runs in the
    # graph runner after the pool is sized (model_executor/runner/base_runner.py; the PCIe-IPC
    # all-reduce builds the same workspace with it off); MLX's sampling (hardware_backend/mlx,
    # and a per-request refusal of prompt logprobs in managers/scheduler.py). Recorded in
    # no_effect_flags_3.json
    "--grammar-backend", "--enable-fused-qk-norm-rope", "--triton-attention-reduce-in-fp32",
    "--disable-flashinfer-autotune", "--flashinfer-autotune-skip-ops", "--mlx-enable-sampling",
))  # fmt: skip

#: flags with no effect on memory for these values only (other values are not modelled)
NO_EFFECT_VALUES: dict[str, frozenset[str]] = {
    # the radix tree's eviction order (mem_cache/utils.py get_eviction_strategy): which cached
    # prefix goes first, not how many tokens the pool holds; tlru needs its config and a unified
    # radix tree (mem_cache/registry.py) and stays not modelled
    "--radix-eviction-policy": frozenset({"lru", "lfu", "slru", "priority"}),
    # the sampling kernels run on each step's logits (layers/sampler.py), after start-up;
    # intel_xpu needs --device xpu (refused: check_startup), ascend is an NPU's
    "--sampling-backend": frozenset({"flashinfer", "pytorch"}),
    # the default loader reads the same weights from .safetensors, .bin or a numpy cache of
    # them (model_loader/loader.py get_model_loader: each reaches DefaultModelLoader, after the
    # same ModelOpt and AutoRound checks as auto); dummy takes another loader for those
    # checkpoints, gguf/bitsandbytes/layered/sharded formats other weights or their own
    # loading, and stay not modelled
    "--load-format": frozenset({"auto", "pt", "safetensors", "npcache"}),
}

#: the flags reviewed and not modelled, by what they change (said in ``flag-not-modelled``);
#: as for vLLM, not a class of its own: every flag neither modelled nor listed above is not
#: modelled, and tests/test_serve_flags.py fails while a recorded flag is in no list
UNMODELLED: dict[str, tuple[str, ...]] = {
    "speculative decoding": (
        "--uno-lora-path", "--speculative-draft-model-revision",
        "--speculative-draft-load-format", "--speculative-dflash-block-size",
        "--speculative-dspark-block-size", "--speculative-dspark-sps-table-path",
        "--speculative-dspark-confidence-sts-path",
        "--speculative-dspark-align-verify-tokens-to-graph-tier",
        "--speculative-use-rejection-sampling", "--speculative-token-map",
        "--speculative-attention-mode", "--speculative-draft-attention-backend",
        "--speculative-dsa-topk-backend", "--speculative-draft-kv-cache-dtype",
        "--speculative-draft-window-size", "--speculative-moe-runner-backend",
        "--speculative-moe-a2a-backend", "--speculative-enable-w4a4-mxfp4-megamoe",
        "--speculative-draft-model-quantization", "--enable-multi-layer-eagle",
        "--speculative-adaptive", "--speculative-adaptive-config", "--decoupled-spec-role",
        "--speculative-ngram-max-bfs-breadth", "--speculative-ngram-external-corpus-path",
        "--speculative-ngram-external-sam-budget",
        "--speculative-ngram-external-corpus-max-tokens",
        "--speculative-domino-candidate-pool-size", "--speculative-use-block-verification",
        "--speculative-draft-sink-size",
    ),
    # --enable-lora, --max-loras-per-batch, --max-lora-rank, --lora-target-modules and
    # --max-loaded-loras are modelled (kvcalc.engines.sglang.lora)
    "LoRA adapters": (
        "--enable-lora-overlap-loading", "--lora-paths", "--lora-backend",
        "--max-lora-chunk-size", "--experts-shared-outer-loras", "--lora-use-virtual-experts",
    ),
    # --enable-hierarchical-cache, --hicache-ratio, --hicache-size, --hicache-mem-layout,
    # --hicache-io-backend, --hicache-host-memory-mode, --hicache-host-memory-fraction and
    # --hicache-write-policy are modelled (kvcalc.engines.sglang.hicache)
    "host offload and the hierarchical cache's storage tier": (
        "--enable-unified-memory", "--hicache-storage-backend",
        "--hicache-storage-prefetch-policy", "--hicache-storage-backend-extra-config",
        "--hicache-storage-prefetch-retry-poll-interval",
        "--hicache-storage-prefetch-retry-max-attempts",
        "--enable-unified-cache-external-linker", "--unified-cache-external-linker-backend",
        "--enable-hisparse", "--hisparse-config", "--cpu-offload-gb", "--offload-group-size",
        "--offload-num-in-group", "--offload-prefetch-step", "--offload-mode",
        "--enable-lmcache", "--lmcache-config-file", "--enable-flexkv", "--flexkv-config-file",
        "--kt-weight-path", "--kt-method", "--kt-cpuinfer", "--kt-threadpool-count",
        "--kt-num-gpu-experts", "--kt-max-deferred-experts-per-token", "--enable-memory-saver",
        "--enable-weights-cpu-backup", "--enable-draft-weights-cpu-backup",
        "--ple-offload-embedding", "--ple-offload-backend", "--ple-offload-dir",
        "--enable-paged-experts", "--paged-experts-num-resident",
        "--unified-cache-external-linker-config",
    ),
    "disaggregated serving": (
        "--disaggregation-mode", "--disaggregation-transfer-backend",
        "--disaggregation-ib-device", "--disaggregation-decode-enable-radix-cache",
        "--disaggregation-decode-enable-offload-kvcache",
        "--disaggregation-decode-retraction-backup", "--num-reserved-decode-tokens",
        "--disaggregation-decode-extra-slots", "--optimistic-prefill-attempts",
        "--encoder-only", "--language-only", "--encoder-transfer-backend", "--encoder-urls",
        "--encoder-register-urls", "--enable-adaptive-dispatch-to-encoder", "--enable-pdmux",
        "--pdmux-config-path", "--sm-group-num", "--disaggregation-enable-kv-checksum",
        "--enable-pd-role-switch", "--disaggregation-decode-host-receive-threshold",
        "--disaggregation-decode-allocation-policy",
    ),
    "parallelism": (
        "--pp-max-micro-batch-size", "--pp-async-batch-depth", "--attn-cp-size",
        "--moe-dp-size", "--dwdp-size", "--dcp-comm-backend", "--dcp-replicate-q-proj",
        "--enable-prefill-cp", "--cp-strategy", "--enable-dsa-cache-layer-split",
        "--enable-cp-decode-attn-tp", "--enable-kv-cache-sharding",
        "--enable-dp-attention-local-control-broadcast", "--enable-dp-lm-head",
        "--enable-tp-lm-head-all-to-all", "--enable-attn-tp-input-scattered",
        "--enable-shared-experts-attn-tp", "--shared-experts-tp-size",
        "--enable-dense-mlp-attn-tp", "--enable-layernorm-sp", "--disable-attn-tp-gather",
        "--ep-size", "--moe-a2a-backend", "--enable-w4a4-mxfp4-megamoe", "--deepep-v2-mode",
        "--moe-runner-backend", "--flashinfer-mxfp4-moe-precision", "--deepep-mode",
        "--fuseep-mode", "--deepep-dispatcher-output-dtype", "--ep-num-redundant-experts",
        "--ep-dispatch-algorithm", "--init-expert-location", "--enable-eplb",
        "--eplb-algorithm", "--eplb-rebalance-num-iterations",
        "--eplb-rebalance-layers-per-chunk", "--eplb-min-rebalancing-utilization-threshold",
        "--expert-distribution-recorder-mode", "--expert-distribution-recorder-buffer-size",
        "--expert-balancedness-report-mode", "--deepep-config", "--moe-dense-tp-size",
        "--elastic-ep-backend", "--enable-elastic-expert-backup", "--mooncake-ib-device",
        "--enable-waterfill", "--elastic-ep-join-mode", "--elastic-ep-join-rank-offset",
        "--elastic-ep-initial-size", "--max-ep-size", "--elastic-ep-scale-timeout",
        "--disable-flashinfer-cutlass-moe-fp4-allgather", "--disable-shared-experts-fusion",
        "--enforce-shared-experts-fusion", "--enable-two-batch-overlap",
        "--enable-single-batch-overlap", "--tbo-token-distribution-threshold",
        "--flashinfer-a2a-dispatch-type", "--enable-megamoe-for-layernorm-sp",
    ),
    "CUDA graphs": (
        # every decode size captured up to max_bs: the graph estimate does not follow it
        "--disable-cuda-graph-padding",
    ),
    "kernels, communication and their workspaces": (
        "--enable-fp32-lm-head", "--device", "--attention-backend", "--decode-attention-backend",
        "--enable-lean-attention", "--prefill-attention-backend", "--radix-cache-backend",
        "--mm-attention-backend", "--fp8-gemm-backend", "--fp4-gemm-backend",
        "--bf16-gemm-backend", "--dsa-prefill-backend", "--dsv4-prefill-backend",
        "--dsa-decode-backend", "--dsa-paged-mqa-logits-backend", "--dsa-topk-backend",
        "--mamba-backend", "--enable-nccl-nvls", "--enable-symm-mem",
        "--triton-attention-num-kv-splits", "--triton-attention-split-tile-size",
        "--flashinfer-mla-disable-ragged", "--enable-fused-moe-sum-all-reduce",
        "--enable-deepseek-v4-fp4-indexer", "--disable-custom-all-reduce", "--enable-mscclpp",
        "--enable-torch-symm-mem", "--enable-scattered-sconv", "--pre-warm-nccl",
        "--boundary-reduction", "--enable-quant-communications",
        "--enforce-disable-flashinfer-allreduce-fusion", "--flashinfer-allreduce-fusion-backend",
        "--enable-aiter-allreduce-fusion", "--linear-attn-backend", "--linear-attn-decode-backend",
        "--linear-attn-prefill-backend", "--linear-attn-verify-backend",
        "--image-processor-backend", "--mm-global-cache-backend",
        "--remote-instance-weight-loader-backend", "--enable-deterministic-inference",
        "--rl-on-policy-target", "--enable-mis", "--dsv4-attn-backend",
        "--enable-linker-mla-dedup", "--disable-aiter-allreduce-fusion-in-prefill",
        "--disable-aiter-allreduce-fusion-in-decode", "--enable-amd-monokernel",
        "--dsa-triton-union", "--enable-dsa-fused-indexer", "--enable-nvidia-megakernel",
        "--sampling-backend", "--monokernel-backend", "--enable-flashinfer-allreduce-fusion",
    ),
    "the mamba and linear-attention state": (
        "--mamba-ssm-dtype", "--mamba-max-states-per-path",
        "--enable-mamba-cache-stochastic-rounding", "--mamba-cache-philox-rounds",
        "--mamba-radix-cache-strategy", "--mamba-track-interval",
        "--enable-int8-mamba-checkpoint", "--int8-mamba-ckpt-size", "--enable-linear-replayssm",
        "--linear-replayssm-cache-len", "--enable-linear-replayssm-spec",
    ),
    "multimodal inputs and the encoder": (
        "--enable-multimodal", "--enable-prefix-mm-cache", "--mm-enable-dp-encoder",
        "--mm-process-config", "--mm-preprocess-cache-size-mb", "--limit-mm-data-per-request",
        "--enable-mm-global-cache", "--disable-fast-image-processor", "--mm-feature-transport",
    ),
    "the KV cache and its pool": (
        "--c128-page-size", "--disable-hybrid-swa-memory", "--radix-eviction-policy",
        "--radix-eviction-policy-config", "--prefill-only-disable-kv-cache",
        "--enable-page-major-kv-layout", "--disable-chunked-prefix-cache",
        "--enable-streaming-session", "--enable-session-radix-cache", "--kv-canary",
        "--kv-canary-sweep-interval", "--enable-return-hidden-states",
        "--return-hidden-states-mode", "--enable-return-routed-experts",
        "--enable-return-indexer-topk", "--sampling-mask-max-tokens",
        "--prefill-kv-cache-dequant-dtype", "--swa-prefix-tails",
        "--enable-encoder-swa-bounded-replay", "--enable-decoder-swa-bounded-replay",
        "--qsa-indexer-dtype", "--enable-watermark", "--watermark-config",
        "--enable-return-aux-hidden-states", "--return-aux-hidden-state-layer-ids",
        "--kv-canary-real-data",
    ),
    "processes the server starts besides the engine": (
        "--sidecar", "--sidecar-args",
    ),
    "the model, its weights and how they load": (
        "--load-format", "--model-loader-extra-config", "--is-embedding", "--model-impl",
        "--model-config-parser", "--json-model-override-args", "--quantization-param-path",
        "--modelopt-quant", "--modelopt-checkpoint-restore-path",
        "--modelopt-checkpoint-save-path", "--modelopt-export-path", "--quantize-and-serve",
        "--rl-quant-profile", "--use-ray", "--dllm-algorithm", "--dllm-algorithm-config",
        "--dllm-fdfo", "--language-model-only", "--startup-weight-load-mode",
        "--custom-weight-loader", "--remote-instance-weight-loader-seed-instance-ip",
        "--remote-instance-weight-loader-seed-instance-service-port",
        "--remote-instance-weight-loader-send-weights-group-ports",
        "--remote-instance-weight-loader-start-seed-via-transfer-engine",
        "--modelexpress-config", "--decrypted-config-file", "--decrypted-draft-config-file",
        "--debug-tensor-dump-output-folder", "--debug-tensor-dump-layers",
        "--debug-tensor-dump-input-file", "--weight-cache-mode", "--weight-cache-socket",
        "--forward-hooks", "--msprobe-dump-config", "--config",
    ),
    "the scheduler's batch budget": (
        "--enable-dynamic-chunking", "--prefill-max-requests", "--disable-overlap-schedule",
        "--enable-mixed-chunk",
    ),
}  # fmt: skip


def unmodelled_reason(name: str) -> str | None:
    """What the not-modelled flag ``name`` changes, when it was reviewed."""
    return listed_reason(UNMODELLED, name)


#: SGLang 0.5.23's start-up checks on single no-effect flags (``check_server_args``,
#: sglang/srt/arg_groups/validation_hook.py and serving_hook.py handle_asr_validation): the
#: smallest value each accepts
_MINIMUM: dict[str, tuple[float, str]] = {
    "--prefill-decode-interval": (0, "must be non-negative"),
    "--prefill-decode-interval-min-bs": (0, "must be non-negative"),
    "--schedule-conservativeness": (0, "must be non-negative"),
    "--mm-io-worker-num": (0, "must be >= 0"),
    "--asr-max-buffer-seconds": (1, "must be positive"),
    "--asr-max-concurrent-sessions": (1, "must be positive"),
}
#: Python's gc.set_threshold takes at most three thresholds (entrypoints/engine.py)
_GC_THRESHOLDS = 3


def check_startup(
    values: Mapping[str, Sequence[str]],
    *,
    pipeline_size: int,
    given: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Refuse what SGLang refuses at start-up among the no-effect flags ``values`` (each
    flag's name and the values given; an on/off flag has none): the checks of
    ``ServerArgs.check_server_args`` and the resolution handlers that read them, and Python's
    own limit on ``--gc-threshold``. ``given``: every flag of the command, for the checks on a
    value kvcalc does not model (``--sampling-backend intel_xpu``)."""

    def refuse(message: str) -> InputError:
        return InputError(
            message, hint="SGLang refuses it at start-up", code="invalid-serve-command"
        )

    for name, (least, why) in _MINIMUM.items():
        for text in values.get(name, ()):
            if float(text) < least:
                raise refuse(f"{name} {text[:20]}: {why} (SGLang 0.5.23's start-up check)")
    if len(values.get("--gc-threshold", ())) > _GC_THRESHOLDS:
        raise refuse("--gc-threshold: at most 3 thresholds (Python's gc.set_threshold)")
    policy = (values.get("--schedule-policy") or ["fcfs"])[-1]
    priority = "--enable-priority-scheduling" in values
    if priority and policy not in ("fcfs", "lof"):
        raise refuse(
            f"--enable-priority-scheduling with --schedule-policy {policy}: priority scheduling "
            "needs schedule_policy 'fcfs' or 'lof'"
        )
    if (values.get("--retraction-policy") or ["length"])[-1] == "priority" and not priority:
        raise refuse("--retraction-policy priority requires --enable-priority-scheduling")
    if "--enable-tokenizer-batch-encode" in values and "--enable-dynamic-batch-tokenizer" in values:
        raise refuse(
            "--enable-tokenizer-batch-encode and --enable-dynamic-batch-tokenizer cannot both be "
            "enabled (choose one tokenizer batching approach)"
        )
    if pipeline_size > 1 and "--min-free-slots-delay" in values:
        raise refuse("--min-free-slots-delay is not supported with pipeline parallelism")
    given = given or {}
    device = (given.get("--device") or ["cuda"])[-1]
    # validation_hook.py validate_device_sampling_backend: sampler.py binds the intel_xpu
    # kernels only on an XPU
    if (given.get("--sampling-backend") or [""])[-1] == "intel_xpu" and device != "xpu":
        raise refuse(f"--sampling-backend intel_xpu requires --device xpu, got --device {device}")
