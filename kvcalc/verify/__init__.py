"""``kvcalc verify``: prove the KV-cache prediction by allocating the engine's real tensors with torch.

Only this package imports torch, and only inside functions (:mod:`kvcalc.verify.torchenv`). The
layout of every engine (:mod:`~kvcalc.verify.layout`, :mod:`~kvcalc.verify.layout_vllm`) and the
results (:mod:`~kvcalc.verify.result`) are pure; the smaller configs it builds come from
:mod:`kvcalc.hfconfig.reduce`. Entry point: :func:`kvcalc.verify.check.verify`.
"""

from __future__ import annotations

__all__ = ["verify", "verify_layout"]


def __getattr__(name: str):  # lazy: importing kvcalc.verify must stay cheap and torch-free
    if name in __all__:
        from kvcalc.verify import check

        return getattr(check, name)
    raise AttributeError(name)
