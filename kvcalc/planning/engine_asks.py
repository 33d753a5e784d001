"""What the planner asks an engine beyond the protocol: optional methods, asked for by name where
an engine has them (``Engine`` in :mod:`kvcalc.engines.base` lists them), with the fallback each
one has for engines without it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvcalc.engines.base import Engine, EngineRequest
from kvcalc.engines.names import traits
from kvcalc.errors import InputError
from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.model.shape import ModelShape

if TYPE_CHECKING:  # a draft's types: its module loads only when a deployment speculates
    from kvcalc.engines.speculative import SpeculativeConfig, SpeculativeDraft


def speculative_draft(
    engine: Engine, model: ModelShape, config: SpeculativeConfig | None, *, tp: int, pp: int
) -> SpeculativeDraft | None:
    """The draft ``engine`` builds for ``config``, from its optional ``speculative_draft`` method;
    an engine without one refuses speculative decoding (``speculative-not-modelled``)."""
    if config is None:
        return None
    ask = getattr(engine, "speculative_draft", None)
    if ask is None:
        raise InputError(
            f"speculative decoding is not modelled for {traits(engine.name).name.display}",
            hint="plan it without --speculative-config, or with --engine vllm",
            code="speculative-not-modelled",
        )
    return ask(model, config, tensor_parallel_size=tp, pipeline_parallel_size=pp)


def scheduler_defaults(engine: Engine, request: EngineRequest) -> tuple[int | None, int | None]:
    """The engine's batch-size defaults: asked directly where the engine can say, else read off a
    plan at zero KV memory."""
    ask = getattr(engine, "scheduler_defaults", None)
    if ask is not None:
        return ask(request)
    probe = engine.plan_kv_cache(request)
    return probe.max_num_batched_tokens, probe.max_num_seqs


def flashinfer_sampler(engine: Engine, request: EngineRequest) -> bool | None:
    """FlashInfer's top-k/top-p sampler in use or not, from the engine's optional
    ``flashinfer_sampler`` method (vLLM's engine option); None: the estimate's own rule."""
    ask = getattr(engine, "flashinfer_sampler", None)
    return ask(request) if ask is not None else None


def mm_limits(engine: Engine, request: EngineRequest) -> tuple[int, int]:
    """Images and videos per prompt the profile run uses, from the engine's optional
    ``mm_limits`` method (vLLM's ``limit_mm_image``/``limit_mm_video`` options); else one each."""
    ask = getattr(engine, "mm_limits", None)
    return ask(request) if ask is not None else (1, 1)


def cudagraph_captures(engine: Engine, request: EngineRequest) -> CudaGraphCaptures | None:
    """The graphs the engine captures, from its optional ``cudagraph_captures`` method (vLLM's
    capture sizes); None: the estimate's default capture set."""
    ask = getattr(engine, "cudagraph_captures", None)
    return ask(request) if ask is not None else None


def subtracts_cudagraph(engine: Engine, version: str | None) -> bool:
    ask = getattr(engine, "subtracts_cudagraph", None)
    return bool(ask(version)) if ask is not None else False


def weight_dtype(engine: Engine, request: EngineRequest) -> str | None:
    """The weight dtype the engine runs the model in where ``--dtype auto`` changes its bytes (vLLM:
    fp32 for a Gemma-2 on a T4), from its optional ``weight_dtype`` method; None: the config's."""
    ask = getattr(engine, "weight_dtype", None)
    return ask(request) if ask is not None else None


def lora_slots(engine: Engine, request: EngineRequest) -> Any:
    """The LoRA slots the engine allocates per GPU (its optional ``lora_slots`` method), None
    without ``--enable-lora``; an engine without the method refuses LoRA rather than drop it."""
    if request.lora is None:
        return None
    ask = getattr(engine, "lora_slots", None)
    if ask is None:
        raise InputError(f"LoRA slots are not modelled for {traits(engine.name).name.display}",
                         hint="kvcalc sizes LoRA slots for vLLM 0.33 and SGLang 0.5.23; plan without "
                         "--enable-lora", code="lora-not-modelled")  # fmt: skip
    return ask(request)


def _no_offload(engine: Engine) -> InputError:
    return InputError(f"host offloading is not modelled for {traits(engine.name).name.display}",
                      hint="kvcalc sizes vLLM's --kv-offloading-size, --kv-transfer-config and "
                      "--cpu-offload-gb; plan without them", code="offload-not-modelled")  # fmt: skip


def weight_offload(
    engine: Engine, request: EngineRequest, layer_bytes: int
) -> tuple[int, str] | None:
    """(bytes per GPU moved to host memory, note) for ``--cpu-offload-gb``; None without it."""
    if request.offload is None or not request.offload.cpu_offload_bytes:
        return None
    ask = getattr(engine, "weight_offload", None)
    if ask is None:
        raise _no_offload(engine)
    return ask(request, layer_bytes)


def host_tier(engine: Engine, request: EngineRequest, plan: Any, offloaded_bytes: int) -> Any:
    """The engine's host tiers for ``plan`` (its optional ``host_tier`` method); None without any.
    Without the host options an engine may still keep a host tier its own options ask for (its
    optional ``engine_host_tier`` method: SGLang's HiCache)."""
    if request.offload is None:
        own = getattr(engine, "engine_host_tier", None)
        return own(request, plan) if own is not None else None
    ask = getattr(engine, "host_tier", None)
    if ask is None:
        raise _no_offload(engine)
    return ask(request, plan, offloaded_bytes)


def mm_terms(engine: Engine, request: EngineRequest) -> Any:
    """What the multimodal settings change (the engine's optional ``mm_terms``); None where the
    engine has none and none was given; refused where given to an engine without it."""
    ask = getattr(engine, "mm_terms", None)
    if ask is not None:
        return ask(request)
    if request.mm_encoder_tp_mode or request.mm_ipc_gpu_memory_bytes:
        raise InputError(f"--mm-encoder-tp-mode and --mm-ipc-gpu-memory-gb are vLLM's; not modelled "
                         f"for {traits(engine.name).name.display}", hint="plan without them",
                         code="unmodelled-option")  # fmt: skip
    return None


def sliding_window_off(engine: Engine, model: Any, disable: bool) -> tuple[Any, tuple[str, ...]]:
    """``model`` as the engine serves it under vLLM's ``--disable-sliding-window`` (its optional
    ``without_sliding_window``; the setting is refused for other engines before this)."""
    if not disable:
        return model, ()
    ask = getattr(engine, "without_sliding_window", None)
    if ask is None:
        raise InputError(f"--disable-sliding-window is vLLM's; not modelled for "
                         f"{traits(engine.name).name.display}", hint="plan without it",
                         code="unmodelled-option")  # fmt: skip
    return ask(model)


def recurrent_dtypes(
    engine: Engine, model: Any, conv: str | None, ssm: str | None
) -> tuple[Any, tuple[str, ...]]:
    """``model`` with the recurrent-state dtypes the engine's flags give (vLLM's
    ``--mamba-cache-dtype``/``--mamba-ssm-cache-dtype``; its optional ``with_mamba_dtypes``)."""
    if conv is None and ssm is None:
        return model, ()
    ask = getattr(engine, "with_mamba_dtypes", None)
    if ask is None:
        raise InputError(f"--mamba-cache-dtype/--mamba-ssm-cache-dtype are vLLM's; not modelled for "
                         f"{traits(engine.name).name.display}", hint="plan without them",
                         code="unmodelled-option")  # fmt: skip
    return ask(model, conv, ssm)
