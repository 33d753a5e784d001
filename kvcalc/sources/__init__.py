"""Where models come from: local files, the bundled configs, the Hugging Face Hub, weight headers.

This layer owns every read of a model's files: resolving a reference (path, bundled alias or Hub
id) to a parsed model (:mod:`~kvcalc.sources.resolve`), the bundled configs and their listing
(:mod:`~kvcalc.sources.bundled`, :mod:`~kvcalc.sources.catalog`), Hub I/O and its errors
(:mod:`~kvcalc.sources.hub`, :mod:`~kvcalc.sources.hub_errors`), safetensors headers
(:mod:`~kvcalc.sources.safetensors_meta`; local files :mod:`~kvcalc.sources.safetensors_files`)
and calibration records (:mod:`~kvcalc.sources.calibration`). It turns bytes into a ``config.json`` mapping and hands that
to :mod:`kvcalc.hfconfig`; it knows no config keys and no engine.
"""
