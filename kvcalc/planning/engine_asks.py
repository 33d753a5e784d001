"""What the planner asks an engine beyond the protocol: optional methods, asked for by name where
an engine has them (``Engine`` in :mod:`kvcalc.engines.base` lists them), with the fallback each
one has for engines without it."""

from __future__ import annotations

from kvcalc.engines.base import Engine, EngineRequest
from kvcalc.engines.names import traits
from kvcalc.engines.speculative import SpeculativeConfig, SpeculativeDraft
from kvcalc.errors import InputError
from kvcalc.estimate.captures import CudaGraphCaptures
from kvcalc.model.shape import ModelShape


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
