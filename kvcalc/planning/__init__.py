"""Planning: what a person asks, answered by combining the model, the estimates and one engine.

This layer owns the validated inputs (:mod:`~kvcalc.planning.inputs`), the result objects whose
fields are the ``--json`` keys (:mod:`~kvcalc.planning.result`), the pure planning core
(:mod:`~kvcalc.planning.core`), the verdict and workload judgement
(:mod:`~kvcalc.planning.verdict`), suggestions, throughput, capacity curves, model comparison and
``inspect``, and the reading of serving commands (:mod:`~kvcalc.planning.servecmd`). The functions
that take a model *reference* resolve it through :mod:`kvcalc.sources`; everything else here is
pure.
"""
