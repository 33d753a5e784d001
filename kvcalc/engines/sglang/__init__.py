"""SGLang: a token pool sized from ``rest_memory``, split the way SGLang splits it.

:mod:`~kvcalc.engines.sglang.defaults` holds the version profiles and the defaults SGLang picks
(``mem_fraction_static``, KV dtype, ``max_running_requests``); :mod:`~kvcalc.engines.sglang.pools`
the per-token cell of the MHA and MLA pools, the token count and the line SGLang prints;
:mod:`~kvcalc.engines.sglang.swa` which architectures get the full/sliding split;
:mod:`~kvcalc.engines.sglang.mamba` the Mamba/linear-attention state slots reserved first;
:mod:`~kvcalc.engines.sglang.layers` the DSA and KV-shared layer rules;
:mod:`~kvcalc.engines.sglang.multimodal` the multimodal reservation;
:mod:`~kvcalc.engines.sglang.refused` what kvcalc refuses under SGLang and why;
:mod:`~kvcalc.engines.sglang.engine` the engine that puts them together.
"""

from __future__ import annotations

from kvcalc.engines.sglang.defaults import KV_CACHE_DTYPES
from kvcalc.engines.sglang.engine import SglangEngine

__all__ = ["KV_CACHE_DTYPES", "SglangEngine"]
