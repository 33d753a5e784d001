"""``verify --engine llamacpp --run``: a GGUF file in the model's KV layout, run under llama.cpp.

:mod:`~kvcalc.verify.llamacpp.gguf` writes the file (:mod:`~kvcalc.verify.llamacpp.spec` its
widths and keys, :mod:`~kvcalc.verify.llamacpp.mla_gguf` and
:mod:`~kvcalc.verify.llamacpp.hybrid_gguf` the MLA and hybrid tensors);
:mod:`~kvcalc.verify.llamacpp.run` loads it through llama-cpp-python and compares what llama.cpp
prints and allocates (:mod:`~kvcalc.verify.llamacpp.readback`, :mod:`~kvcalc.verify.llamacpp.state`).
"""
