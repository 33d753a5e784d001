"""Engine-independent estimates from a model's shape: weights, runtime overhead, the roofline.

This layer owns the weight-tensor inventory and parameter counts (:mod:`~kvcalc.estimate.tensors`,
:mod:`~kvcalc.estimate.weights`), the memory an engine spends besides weights and cache
(activation peak, non-torch, CUDA graphs: :mod:`~kvcalc.estimate.overhead`, with the shapes in
:mod:`~kvcalc.estimate.activation` and the per-release constants in :mod:`~kvcalc.estimate.eras`)
and the bandwidth
roofline of a decode step (:mod:`~kvcalc.estimate.roofline`). Pure arithmetic on a
:class:`~kvcalc.model.shape.ModelShape`; no I/O, no cache accounting (that is
:mod:`kvcalc.engines`).
"""
