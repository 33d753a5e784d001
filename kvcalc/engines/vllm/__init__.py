"""vLLM's KV-cache accounting, split the way vLLM splits it.

:mod:`~kvcalc.engines.vllm.defaults` holds the version profiles and the defaults vLLM picks
(dtype, block size, batch size); :mod:`~kvcalc.engines.vllm.setup` everything it resolves before
sizing; :mod:`~kvcalc.engines.vllm.groups` the per-layer KV specs and their grouping;
:mod:`~kvcalc.engines.vllm.engine` the engine's entry points, :mod:`~kvcalc.engines.vllm.v1` the V1
engine (blocks, capacity line, fit check), with vLLM's own log and error lines in
:mod:`~kvcalc.engines.vllm.messages`, and
:mod:`~kvcalc.engines.vllm.v0` the V0 engine of old releases.
"""
