"""Every ``--kv-cache-dtype`` name each engine takes, asked of the engine modules themselves.

Kept apart from :mod:`kvcalc.engines.formats` (which the engine modules import) so that asking every
engine does not make an import cycle.
"""

from __future__ import annotations

from functools import cache

from kvcalc.engines.formats import GENERIC_BITS


def engine_dtypes(engine: str) -> tuple[str, ...]:
    """Every ``--kv-cache-dtype`` name ``engine`` takes (its own spellings), generic names aside."""
    if engine == "vllm":
        from kvcalc.engines.vllm.defaults import VLLM_DTYPES

        return VLLM_DTYPES
    if engine == "sglang":
        from kvcalc.engines.sglang import KV_CACHE_DTYPES as sglang

        return sglang
    if engine == "llamacpp":
        from kvcalc.engines.llamacpp.engine import GGML_TYPES

        return ("auto", *GGML_TYPES)
    if engine == "hf":
        from kvcalc.engines.hf.setup import KV_CACHE_DTYPES as hf

        return hf
    if engine == "trtllm":
        from kvcalc.engines.trtllm import KV_CACHE_DTYPES as trtllm

        return trtllm
    if engine == "lmdeploy":
        from kvcalc.engines.lmdeploy import KV_CACHE_DTYPES as lmdeploy

        return lmdeploy
    return ()


@cache
def known_names() -> tuple[str, ...]:
    """Every name some engine takes (for validating a deployment file before the engine is known)."""
    from kvcalc.engines import ENGINE_NAMES
    from kvcalc.model.dtypes import ALIASES, CACHE_DTYPES

    names = ["auto", *CACHE_DTYPES, *ALIASES, *GENERIC_BITS]
    for engine in ENGINE_NAMES:
        names += [n for n in engine_dtypes(engine) if n not in names]
    return tuple(dict.fromkeys(names))


def engine_spelling(engine: str, name: str) -> str:
    """The resolved cache dtype ``name`` (kvcalc's canonical, as the JSON's ``kv_cache_dtype``
    gives it) as ``engine`` spells it: vLLM's ``bfloat16`` and ``float16`` for ``bf16`` and
    ``fp16``; unchanged for the engines that take kvcalc's names."""
    if engine == "vllm":
        from kvcalc.engines.vllm.defaults import vllm_spelling

        return vllm_spelling(name)
    return name
