"""llama.cpp: its context, KV cells and compute buffer, split the way llama.cpp splits them.

:mod:`~kvcalc.engines.llamacpp.engine` the engine (versions, the cache types, the capacity and fit
rules); :mod:`~kvcalc.engines.llamacpp.context` the context, its caches and where they live;
:mod:`~kvcalc.engines.llamacpp.recurrent` the recurrent state of Mamba-2 models and hybrids;
:mod:`~kvcalc.engines.llamacpp.log` the lines llama.cpp prints; the compute buffer is
:mod:`~kvcalc.engines.llamacpp.compute`'s, built from the graphs of
:mod:`~kvcalc.engines.llamacpp.graph` (and its ``graph_mla``, ``graph_moe``, ``graph_ssm``,
``graph_swa`` blocks) sized with :mod:`~kvcalc.engines.llamacpp.ggml`.

Nothing is imported here: ``kvcalc.engines.get_engine`` imports the engine module alone.
"""
