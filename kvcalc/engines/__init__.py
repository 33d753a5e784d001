"""Serving-engine KV-cache accounting behind one interface (:class:`~kvcalc.engines.base.Engine`).

This layer owns everything an engine does differently: how it picks its cache dtype and block
size, how it groups layers, how much memory it hands the cache and how many blocks or tokens that
makes. One package per engine (:mod:`~kvcalc.engines.vllm`, :mod:`~kvcalc.engines.sglang`,
:mod:`~kvcalc.engines.llamacpp`, :mod:`~kvcalc.engines.hf`; ``trtllm`` and ``lmdeploy`` are one
module each), each a pure model of the engine's own code on a
:class:`~kvcalc.model.shape.ModelShape` and an :class:`~kvcalc.engines.base.EngineRequest`; beside
them only the protocol (``base``), the names (``names``) and the shared helpers.

>>> get_engine("vllm").versions[0]
'0.33'
"""

from __future__ import annotations

from kvcalc.engines.base import Engine, EngineRequest, KvCacheGroup, KvCachePlan
from kvcalc.engines.names import EngineName, engine_name, traits

__all__ = [
    "ENGINE_NAMES", "Engine", "EngineName", "EngineRequest", "KvCacheGroup", "KvCachePlan",
    "engine_name", "get_engine", "traits",
]  # fmt: skip

#: every engine kvcalc models; the first is the default
ENGINE_NAMES = tuple(name.value for name in EngineName)


def get_engine(name: str | EngineName) -> Engine:
    """The engine called ``name`` (any spelling :func:`~kvcalc.engines.names.engine_name` accepts)."""
    key = engine_name(name)
    if key is EngineName.VLLM:
        from kvcalc.engines.vllm.engine import VllmEngine

        return VllmEngine()
    if key is EngineName.SGLANG:
        from kvcalc.engines.sglang import SglangEngine

        return SglangEngine()
    if key is EngineName.LLAMACPP:
        from kvcalc.engines.llamacpp.engine import LlamaCppEngine

        return LlamaCppEngine()
    if key is EngineName.HF:
        from kvcalc.engines.hf.engine import HfEngine

        return HfEngine()
    if key is EngineName.TRTLLM:
        from kvcalc.engines.trtllm import TrtllmEngine

        return TrtllmEngine()
    from kvcalc.engines.lmdeploy import LmdeployEngine

    return LmdeployEngine()
