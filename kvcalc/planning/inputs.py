"""What a person asks ``kvcalc plan`` (and a deployment file holds): plain values, validated once.

Names follow vLLM's flags so serving commands can be pasted (``max_model_len``,
``tensor_parallel_size``, ``gpu_memory_utilization``...). ``None`` means "the engine's default".
"""

from __future__ import annotations

import math
import operator
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any

from kvcalc.engines.names import EngineName, engine_name
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.planning.parallel_checks import check_parallelism
from kvcalc.units import MAX_SIZE_BYTES, short_int

if TYPE_CHECKING:  # built only when asked for (below): kept off start-up
    from kvcalc.engines.host_options import OffloadOptions
    from kvcalc.engines.lora_options import LoraOptions

#: verdicts, from best to worst
VERDICTS = ("ok", "tight", "below-target", "wont-start", "weights-dont-fit")
#: headroom below this fraction of the KV pool makes a plan "tight" (``--tight-threshold``)
DEFAULT_TIGHT_FRACTION = 0.10
#: the largest count (tokens, sequences, GPUs, block size) accepted, about 1.1 × 10^12: past it
#: the arithmetic would only describe nonsense, and float conversions would overflow
MAX_COUNT = 1 << 40
_COUNTS = ("num_gpus", "tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "max_num_seqs",
           "batch", "block_size", "max_num_batched_tokens", "prompt_len", "output_len", "shared_prefix",
           "data_parallel_size", "decode_context_parallel_size", "prefill_context_parallel_size",
           "num_redundant_experts", "cp_kv_cache_interleave_size", "max_loras", "max_lora_rank",
           "max_cpu_loras")  # fmt: skip
_BYTES = (
    "gpu_memory_bytes",
    "weights_memory_bytes",
    "kv_cache_memory_bytes",
    "kv_offloading_bytes",
    "cpu_offload_bytes",
)


@frozen
class PlanInputs:
    """One deployment to plan. Sizes in bytes; ``None`` = engine default or derived."""

    #: any accepted spelling in, the canonical :class:`EngineName` kept (``llama-cpp`` → ``llamacpp``)
    engine: EngineName = EngineName.VLLM
    engine_version: str | None = None
    gpu: str | None = None
    gpu_memory_bytes: int | None = None
    num_gpus: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    #: vLLM ``--data-parallel-size``: engine cores, each with its own KV pool; SGLang ``--dp``
    data_parallel_size: int = 1
    #: vLLM ``--enable-expert-parallel``: whole experts per rank (the expert split is over TP × DP
    #: × PCP either way)
    enable_expert_parallel: bool = False
    #: vLLM ``--enable-eplb`` and ``--eplb-config.num_redundant_experts``
    enable_eplb: bool = False
    num_redundant_experts: int = 0
    #: vLLM ``--decode-context-parallel-size``: KV tokens sharded over this many TP ranks
    decode_context_parallel_size: int = 1
    #: vLLM ``--cp-kv-cache-interleave-size`` (None: 1)
    cp_kv_cache_interleave_size: int | None = None
    #: vLLM ``--prefill-context-parallel-size``: GPUs per engine × PCP, KV unchanged
    prefill_context_parallel_size: int = 1
    #: vLLM ``--all2all-backend`` (None: its default, ``allgather_reducescatter``)
    all2all_backend: str | None = None
    #: SGLang ``--enable-dp-attention`` (with ``data_parallel_size`` as ``--dp``)
    enable_dp_attention: bool = False
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    batch: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str | None = None
    quantization: str | None = None
    weights_memory_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    #: vLLM's ``--disable-sliding-window``
    disable_sliding_window: bool = False
    #: ``--enable-prefix-caching`` / ``--no-enable-prefix-caching`` (None: the engine's default, on)
    enable_prefix_caching: bool | None = None
    #: vLLM's ``--async-scheduling`` / ``--no-async-scheduling`` (None: its default, on)
    async_scheduling: bool | None = None
    #: vLLM's ``--cudagraph-capture-sizes`` (None: its default, from ``max_num_seqs``)
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    #: vLLM's ``--max-cudagraph-capture-size`` (None: its default)
    max_cudagraph_capture_size: int | None = None
    #: vLLM's ``-cc.cudagraph_mode``, upper case as vLLM names it (None: its default)
    cudagraph_mode: str | None = None
    kv_cache_memory_bytes: int | None = None
    prompt_len: int | None = None
    output_len: int | None = None
    shared_prefix: int = 0
    tight_fraction: float = DEFAULT_TIGHT_FRACTION
    #: a ``kvcalc verify --record`` file whose overhead correction applies to this GPU
    calibration: str | None = None
    #: engine-specific knobs (``--engine-option KEY=VALUE``): llama.cpp ``n_seq_max``/``n_ubatch``,
    #: transformers ``cache_implementation``, SGLang ``page_size``... (``EngineRequest.extra``)
    engine_options: tuple[tuple[str, Any], ...] = ()
    #: plan a config the registry does not verify anyway, as plain attention (``--trust-layout``)
    trust_layout: bool = False
    #: vLLM's ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``: a max_model_len above the derived one starts
    allow_long_max_model_len: bool = False
    #: speculative decoding as given (vLLM's ``--speculative-config``, the ``--spec-*`` shorthands
    #: merged in; SGLang's ``--speculative-algorithm`` and its settings: ``algorithm``,
    #: ``eagle_topk``, ``num_draft_tokens`` too): ``method``, ``model``, ``num_speculative_tokens``...
    #: as given; null without
    speculative_config: Any = None
    #: vLLM's ``--spec-method`` / ``--spec-model`` / ``--spec-tokens`` (SGLang's
    #: ``--speculative-algorithm`` / ``--speculative-draft-model-path`` /
    #: ``--speculative-num-steps``): merged into ``speculative_config``, then null
    spec_method: str | None = None
    spec_model: str | None = None
    spec_tokens: int | None = None
    #: flags of a serving command kvcalc does not model, left out under ``ignore_unmodelled``
    #: (named, never their values): the plan is then not fully modelled
    unmodelled_flags: tuple[str, ...] = ()
    #: ``--enable-lora`` and the slots' settings (None: the engine's default; see :attr:`lora`)
    enable_lora: bool = False
    max_loras: int | None = None
    max_lora_rank: int | None = None
    max_cpu_loras: int | None = None
    fully_sharded_loras: bool = False
    lora_dtype: str | None = None
    #: SGLang's ``--lora-target-modules``: module names separated by spaces or commas (``all``)
    lora_target_modules: str | None = None
    #: host tiers (vLLM): ``--kv-offloading-size`` (bytes, all TP ranks), its backend,
    #: ``--kv-transfer-config`` (JSON text), ``--cpu-offload-gb`` (bytes per GPU)
    kv_offloading_bytes: int | None = None
    kv_offloading_backend: str | None = None
    kv_transfer_config: str | None = None
    cpu_offload_bytes: int | None = None
    #: vLLM's multimodal settings: ``--limit-mm-per-prompt`` (as given), ``--mm-encoder-tp-mode``,
    #: ``--mm-ipc-gpu-memory-gb`` (bytes)
    limit_mm_per_prompt: str | None = None
    mm_encoder_tp_mode: str | None = None
    mm_ipc_gpu_memory_bytes: int | None = None
    #: vLLM's ``--mamba-cache-dtype`` / ``--mamba-ssm-cache-dtype`` (None: auto)
    mamba_cache_dtype: str | None = None
    mamba_ssm_cache_dtype: str | None = None

    def __post_init__(self) -> None:
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(
                    f"{name} must be a finite number, got {value}", code="invalid-input"
                )
        positive = ("num_gpus", "tensor_parallel_size", "pipeline_parallel_size", "max_model_len",
                    "max_num_seqs", "batch", "block_size", "max_num_batched_tokens", "gpu_memory_bytes",
                    "prompt_len", "data_parallel_size", "decode_context_parallel_size",
                    "prefill_context_parallel_size", "cp_kv_cache_interleave_size", "max_loras",
                    "max_lora_rank", "max_cpu_loras")  # fmt: skip
        for name in positive:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InputError(
                    f"{name} must be a positive integer, got {value!r}", code="invalid-input"
                )
        for name in (
            "weights_memory_bytes",
            "kv_cache_memory_bytes",
            "kv_offloading_bytes",
            "cpu_offload_bytes",
            "mm_ipc_gpu_memory_bytes",
            "output_len",
            "shared_prefix",
            "num_redundant_experts",
        ):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise InputError(
                    f"{name} must be a non-negative integer, got {value!r}", code="invalid-input"
                )
        for name in _COUNTS + _BYTES:
            value = getattr(self, name)
            limit = MAX_COUNT if name in _COUNTS else MAX_SIZE_BYTES
            if value is not None and value > limit:
                raise InputError(
                    f"{name} must be at most {limit:,}, got {short_int(value)}",
                    code="invalid-input",
                )
        util = self.gpu_memory_utilization
        if util is not None and not (0 < util <= 1):
            raise InputError(
                f"gpu_memory_utilization must be in (0, 1], got {util}",
                hint="it is a fraction of the GPU's total memory, e.g. 0.9",
                code="invalid-input",
            )
        if not (0 <= self.tight_fraction < 1):
            raise InputError(
                f"tight threshold must be in [0, 1), got {self.tight_fraction}",
                code="invalid-input",
            )
        for name in (
            "gpu",
            "engine",
            "engine_version",
            "kv_cache_dtype",
            "dtype",
            "quantization",
            "calibration",
            "all2all_backend",
            "lora_dtype",
            "lora_target_modules",
            "kv_offloading_backend",
            "kv_transfer_config",
            "limit_mm_per_prompt",
            "mm_encoder_tp_mode",
            "mamba_cache_dtype",
            "mamba_ssm_cache_dtype",
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(f"{name} must not be empty", code="invalid-input")
        object.__setattr__(self, "engine", engine_name(self.engine))  # resolved once, here
        self._check_workload()
        self._fold_fraction_option()
        self._zero_kv_memory()
        self._check_block_size()
        self._check_cudagraph_settings()
        self._read_speculative()
        self.lora  # noqa: B018  (LoraOptions checks its values)
        self.offload  # noqa: B018
        if self.mm_encoder_tp_mode is not None and self.mm_encoder_tp_mode not in (
            "weights",
            "data",
        ):
            raise InputError(f"mm_encoder_tp_mode must be weights or data, got {self.mm_encoder_tp_mode!r}",
                             hint="vLLM's MMEncoderTPMode: weights or data", code="invalid-input")  # fmt: skip
        if (
            self.gpu is None
            and self.gpu_memory_bytes is None
            and self.kv_cache_memory_bytes is None
        ):
            raise InputError(
                "no GPU given",
                hint="pass --gpu NAME (see `kvcalc gpus`), --gpu-memory GiB, or --kv-cache-memory",
                code="missing-gpu",
            )
        check_parallelism(self)

    def _check_workload(self) -> None:
        """A workload is its prompt: an output length or a shared prefix without one would be
        planned as no workload at all, so it is refused; so is a prefix longer than the prompt."""
        if self.prompt_len is None:
            given = [f"--{n.replace('_', '-')}" for n in ("output_len", "shared_prefix")
                     if getattr(self, n)]  # fmt: skip
            if given:
                raise InputError(
                    f"{' and '.join(given)} needs --prompt-len: a workload is planned from "
                    "its prompt",
                    hint="give --prompt-len TOKENS (workload.prompt_len in a deployment file): "
                    "a request holds prompt + output tokens",
                    code="invalid-input",
                )
        elif self.shared_prefix > self.prompt_len:
            raise InputError(
                f"shared_prefix {self.shared_prefix:,} is longer than the prompt "
                f"(prompt_len {self.prompt_len:,})",
                hint="the shared prefix is the part of the prompt every request starts with",
                code="invalid-input",
            )

    def _check_block_size(self) -> None:
        from kvcalc.engines.names import traits

        can = traits(self.engine)
        if self.block_size is not None and not can.takes_block_size:
            raise InputError(
                f"{can.name.display} has no --block-size setting: {can.block_size_hint}",
                hint="leave --block-size out for this engine",
                code="invalid-input",
            )

    def _zero_kv_memory(self) -> None:
        """``kv_cache_memory`` 0: vLLM's "unset" (it profiles); no KV cache for anyone else."""
        from kvcalc.engines.names import traits

        if self.kv_cache_memory_bytes != 0:
            return
        if traits(self.engine).kv_memory_zero_unset:
            object.__setattr__(self, "kv_cache_memory_bytes", None)
            return
        raise InputError(
            f"kv_cache_memory 0 leaves {self.engine.value} no KV cache",
            hint="give the KV-cache bytes per GPU, or leave the setting out to have kvcalc "
            "estimate them",
            code="invalid-input",
        )

    def _fold_fraction_option(self) -> None:
        """SGLang's ``-E mem_fraction_static=F`` is its ``--mem-fraction-static``: the budget
        follows it as it follows ``--gpu-memory-utilization`` (the two disagreeing is refused)."""
        from kvcalc.engines.extra import extra_fraction
        from kvcalc.engines.names import traits

        key = traits(self.engine).fraction_option
        options = dict(self.engine_options)
        if key is None or key not in options:
            return
        value = extra_fraction(options, key, None)
        util = self.gpu_memory_utilization
        if util is not None and util != value:
            raise InputError(
                f"--gpu-memory-utilization {util} and --engine-option {key}={value} disagree: "
                f"both set {self.engine.value}'s memory fraction",
                hint="give it once (--gpu-memory-utilization is the engine's --mem-fraction-static)",
                code="conflicting-options",
            )
        object.__setattr__(self, "gpu_memory_utilization", value)

    def _check_cudagraph_settings(self) -> None:
        from kvcalc.engines.vllm.cudagraphs import check_graph_settings, parse_graph_mode

        self._check_unread_settings()
        sizes = check_graph_settings(
            self.cudagraph_capture_sizes, self.max_cudagraph_capture_size, limit=MAX_COUNT
        )
        object.__setattr__(self, "cudagraph_capture_sizes", sizes)
        if self.cudagraph_mode is not None:
            mode = parse_graph_mode(str(self.cudagraph_mode), what="cudagraph_mode")
            object.__setattr__(self, "cudagraph_mode", mode.value)

    def _check_unread_settings(self) -> None:
        """A setting the engine does not read is refused, not dropped (``EngineTraits.unread_settings``)."""
        from kvcalc.engines.names import traits

        can = traits(self.engine)
        given = [(name, why) for name, why in can.unread_settings
                 if getattr(self, name) != _DEFAULTS[name]]  # fmt: skip
        if given:
            flags = ", ".join(f"--{'no-' if getattr(self, name) is False else ''}{name.replace('_', '-')}"
                              for name, _ in given)  # fmt: skip
            raise InputError(f"{flags}: not read by {can.name.display} ({'; '.join(w for _, w in given)})",
                             hint="plan without it", code="unmodelled-option")  # fmt: skip

    def _read_speculative(self) -> None:
        from kvcalc.engines.names import traits

        if traits(self.engine).sglang_speculative:
            spec = self._read_sglang_speculative()
        elif all(v is None for v in (self.speculative_config, self.spec_method, self.spec_model,
                                     self.spec_tokens)):  # fmt: skip
            return  # no speculation asked: nothing to read (its modules stay unloaded)
        else:
            from kvcalc.engines.vllm.speculative import read_speculative_config

            spec = read_speculative_config(self.speculative_config, spec_method=self.spec_method,
                                           spec_model=self.spec_model, spec_tokens=self.spec_tokens)  # fmt: skip
        object.__setattr__(self, "speculative_config", spec)
        for name in ("spec_method", "spec_model", "spec_tokens"):
            object.__setattr__(self, name, None)

    def _read_sglang_speculative(self) -> Any:
        """SGLang's ``--speculative-algorithm`` (``spec_method``), ``--speculative-draft-model-path``
        (``spec_model``), ``--speculative-num-steps`` (``spec_tokens``) and the topk and draft
        tokens (``-E speculative_eagle_topk``, ``-E speculative_num_draft_tokens``)."""
        from kvcalc.engines.sglang.speculative import read_speculative
        from kvcalc.engines.speculative import SpeculativeConfig

        if isinstance(self.speculative_config, SpeculativeConfig):
            return self.speculative_config
        if self.speculative_config is not None:
            raise InputError("--speculative-config is vLLM's; SGLang takes --speculative-algorithm "
                             "(--spec-method), --speculative-draft-model-path (--spec-model) and "
                             "--speculative-num-steps (--spec-tokens)",
                             hint="e.g. --engine sglang --spec-method NEXTN", code="invalid-input")  # fmt: skip
        options = dict(self.engine_options)
        return read_speculative(self.spec_method, self.spec_model, self.spec_tokens,
                                options.get("speculative_eagle_topk"),
                                options.get("speculative_num_draft_tokens"))  # fmt: skip

    @property
    def lora(self) -> LoraOptions | None:
        """The LoRA slots asked for (None without ``--enable-lora``: the other LoRA settings are
        then ignored, as vLLM ignores them)."""
        if not self.enable_lora:
            return None
        from kvcalc.engines.lora_options import LoraOptions

        return LoraOptions(
            max_loras=self.max_loras or 1,
            max_lora_rank=self.max_lora_rank or 16,
            max_cpu_loras=self.max_cpu_loras,
            fully_sharded_loras=self.fully_sharded_loras,
            lora_dtype=self.lora_dtype or "auto",
            asked_max_loras=self.max_loras,
            asked_max_lora_rank=self.max_lora_rank,
            target_modules=(
                tuple(self.lora_target_modules.replace(",", " ").split())
                if self.lora_target_modules is not None
                else None
            ),
        )

    @property
    def offload(self) -> OffloadOptions | None:
        """The host tiers asked for (None: none)."""
        if not (self.kv_offloading_bytes or self.kv_transfer_config or self.cpu_offload_bytes
                or self.kv_offloading_backend is not None):  # fmt: skip
            return None  # nothing asked (nor a backend to check): no OffloadOptions built
        from kvcalc.engines.host_options import OffloadOptions

        options = OffloadOptions(
            kv_offloading_bytes=self.kv_offloading_bytes,
            kv_offloading_backend=self.kv_offloading_backend or "native",
            kv_transfer_config=self.kv_transfer_config,
            cpu_offload_bytes=self.cpu_offload_bytes or 0,
        )
        return options if options.active else None

    @property
    def world_size(self) -> int:
        """GPUs of one engine core: TP × PP × PCP (vLLM ``ParallelConfig.world_size``)."""
        return (
            self.tensor_parallel_size
            * self.pipeline_parallel_size
            * self.prefill_context_parallel_size
        )

    @property
    def deployment_gpus(self) -> int:
        """GPUs one deployment uses: DP × PP × TP × PCP (vLLM ``world_size_across_dp``; SGLang's
        DP attention ranks live inside TP)."""
        if self.enable_dp_attention:
            return self.world_size
        return self.world_size * self.data_parallel_size

    @property
    def target_concurrency(self) -> int | None:
        """The concurrency asked for: ``--batch`` (a deployment file's ``batch``). An explicit
        ``--max-num-seqs`` is the engine's cap on what runs at once, not a target: vLLM's own
        default, 1,024 on an H100, asks for nothing (``SchedulerConfig.max_num_seqs``)."""
        return self.batch

    @property
    def sequences(self) -> int | None:
        """The sequences an engine that allocates per sequence up front sizes its cache for
        (llama.cpp's slots, ``n_seq_max``; transformers' batch): its cap, ``--max-num-seqs``, where
        given (the cache holds no more), else the target ``--batch``."""
        return self.max_num_seqs if self.max_num_seqs is not None else self.batch

    def to_dict(self) -> dict[str, Any]:
        """The ``inputs`` object of the JSON: the request as given, keys as the flags spell them."""
        # every field is a plain value or a tuple of them but the speculative config (asdict
        # would deep-copy them all, once per plan)
        data = dict(zip(_JSON_KEYS, _FIELDS_OF(self), strict=True))
        data["engine_options"] = dict(self.engine_options)
        spec = self.speculative_config
        data["speculative_config"] = None if spec is None else {
            k: (v.value if hasattr(v, "value") else v) for k, v in asdict(spec).items()
            if k not in ("keys", "text") and v is not None
        }  # fmt: skip
        return data


#: the fields of :class:`PlanInputs`, in order, and their defaults
_FIELD_NAMES = tuple(f.name for f in fields(PlanInputs))
_DEFAULTS = {f.name: f.default for f in fields(PlanInputs)}

#: field → JSON key where the Python name differs from the flag (``--tight-threshold``)
JSON_NAMES = {"tight_fraction": "tight_threshold"}
#: the JSON keys of :data:`_FIELD_NAMES`, in order, and a getter of those fields' values
_JSON_KEYS = tuple(JSON_NAMES.get(name, name) for name in _FIELD_NAMES)
_FIELDS_OF = operator.attrgetter(*_FIELD_NAMES)
