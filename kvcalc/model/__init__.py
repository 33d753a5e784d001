"""The model as plain data: what each layer caches and what its bytes cost, and the GPUs it runs on.

This layer owns cache storage formats (:mod:`~kvcalc.model.dtypes`), the per-layer cache layouts
that do their own byte arithmetic (:mod:`~kvcalc.model.layouts`), the frozen
:class:`~kvcalc.model.shape.ModelShape` every other layer reads, and the GPU catalog
(:mod:`~kvcalc.model.gpus`). Pure data and arithmetic: it reads no ``config.json``, does no I/O
beyond the packaged GPU table, and imports only :mod:`kvcalc.errors` and :mod:`kvcalc.units`.
"""
