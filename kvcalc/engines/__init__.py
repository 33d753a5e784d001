"""Serving-engine KV-cache accounting behind one interface (:class:`~kvcalc.engines.base.Engine`).

This layer owns everything an engine does differently: how it picks its cache dtype and block
size, how it groups layers, how much memory it hands the cache and how many blocks or tokens that
makes. One module per engine (``sglang``, ``llamacpp``, ``hf``, ``trtllm``, ``lmdeploy``) and the
:mod:`~kvcalc.engines.vllm` subpackage, each a pure model of the engine's own code on a
:class:`~kvcalc.model.shape.ModelShape` and an :class:`~kvcalc.engines.base.EngineRequest`.

>>> get_engine("vllm").versions[0]
'0.33'
"""

from __future__ import annotations

from kvcalc.engines.base import Engine, EngineRequest, KvCacheGroup, KvCachePlan
from kvcalc.errors import InputError

__all__ = ["ENGINE_NAMES", "Engine", "EngineRequest", "KvCacheGroup", "KvCachePlan", "get_engine"]

#: every engine kvcalc models; the first is the default
ENGINE_NAMES = ("vllm", "sglang", "llamacpp", "hf", "trtllm", "lmdeploy")


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (case-insensitive; ``llama.cpp`` and ``transformers`` accepted)."""
    key = str(name).strip().lower().replace(".", "").replace("-", "")
    key = {"transformers": "hf", "tensorrtllm": "trtllm", "llamacpp": "llamacpp",
           "turbomind": "lmdeploy"}.get(key, key)  # fmt: skip
    if key == "vllm":
        from kvcalc.engines.vllm.engine import VllmEngine

        return VllmEngine()
    if key == "sglang":
        from kvcalc.engines.sglang import SglangEngine

        return SglangEngine()
    if key == "llamacpp":
        from kvcalc.engines.llamacpp import LlamaCppEngine

        return LlamaCppEngine()
    if key == "hf":
        from kvcalc.engines.hf import HfEngine

        return HfEngine()
    if key == "trtllm":
        from kvcalc.engines.trtllm import TrtllmEngine

        return TrtllmEngine()
    if key == "lmdeploy":
        from kvcalc.engines.lmdeploy import LmdeployEngine

        return LmdeployEngine()
    raise InputError(
        f"unknown engine {name!r}",
        hint="choose one of: " + ", ".join(ENGINE_NAMES),
        code="unknown-engine",
    )
