"""Every engine's version profiles and ``-E`` options, read from the tables each engine checks
requests against, for the help pages that list them.

It imports every engine module, so it is called only when a help page is shown (start-up of a
command that runs imports one engine).
"""

from __future__ import annotations

from kvcalc.engines import get_engine
from kvcalc.engines.names import EngineName


def engine_versions() -> dict[EngineName, tuple[str, ...]]:
    """``engine -> its version profiles`` (``Engine.versions``, newest first), every engine."""
    return {name: tuple(get_engine(name).versions) for name in EngineName}


def engine_options() -> dict[EngineName, tuple[str, ...]]:
    """``engine -> the -E keys it reads`` (the ``EXTRA_KEYS`` its ``check_extra`` allows)."""
    from kvcalc.engines import lmdeploy, trtllm
    from kvcalc.engines.hf import engine as hf
    from kvcalc.engines.llamacpp import engine as llamacpp
    from kvcalc.engines.sglang import engine as sglang
    from kvcalc.engines.vllm import engine as vllm

    return {
        EngineName.VLLM: tuple(vllm.EXTRA_KEYS),
        EngineName.SGLANG: tuple(sglang.EXTRA_KEYS),
        EngineName.LLAMACPP: tuple(llamacpp.EXTRA_KEYS),
        EngineName.HF: tuple(hf.EXTRA_KEYS),
        EngineName.TRTLLM: tuple(trtllm.EXTRA_KEYS),
        EngineName.LMDEPLOY: tuple(lmdeploy.EXTRA_KEYS),
    }
