"""Hugging Face transformers: its cache classes, split by what they resolve.

:mod:`~kvcalc.engines.hf.engine` the engine (``DynamicCache``/``StaticCache`` sizes);
:mod:`~kvcalc.engines.hf.setup` the version, the cache dtype and a quantized cache's setup;
:mod:`~kvcalc.engines.hf.quantized` the ``QuantizedCache`` backends' tensors.

Nothing is imported here: ``kvcalc.engines.get_engine`` imports the engine module alone.
"""
