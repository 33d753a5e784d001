"""Run the vLLM reference harness with three constants computed on the CPU instead of the meta device.

    VLLM_REFERENCE=HARNESS_DIR python scripts/vllm_meta_readback.py ARGS...   (vLLM 0.33.0 venv)

The harness builds the model on the meta device, where a tensor has a shape and no data. Three
vLLM 0.33 model files read a constant back from such a tensor while they build, and fail there
(``NotImplementedError: Cannot copy out of meta tensor; no data!``) before any cache is sized:

* ``models/bloom.py``: ``_get_alibi_slopes`` builds the ALiBi slopes with ``torch.tensor`` /
  ``torch.arange`` and ``BloomAttention`` turns them into a list (``.tolist()``);
* ``models/falcon.py``: the same function and ``.tolist()`` for Falcon with ``alibi`` (Falcon-RW);
* ``layers/activation.py``: ``XIELU.__init__`` (Apertus's activation) reads its ``beta`` and
  ``eps`` buffers back with ``.item()``.

Here each of those three runs under ``torch.device("cpu")``; XIELU's parameters and buffers are moved
back to the meta device afterwards. The slopes and the two scalars are numbers handed to the
attention layer and the activation: no shape, no cache spec and no parameter count depends on them.
Everything else (engine config, model build, specs, groups, sizing) is the harness and vLLM's code,
unchanged. ``ARGS`` are ``vllm_reference.py``'s own (``--batch``, ``--config-dir``, ...).
"""

import functools
import os
import sys

# the vLLM reference harness's folder (vllm_reference.py)
sys.path.insert(0, os.environ["VLLM_REFERENCE"])
import vllm_reference as vr  # noqa: E402


def _on_cpu(fn):
    import torch

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with torch.device("cpu"):
            return fn(*args, **kwargs)

    return wrapped


def patch() -> None:
    import torch
    from vllm.model_executor.layers import activation
    from vllm.model_executor.models import bloom, falcon

    bloom._get_alibi_slopes = _on_cpu(bloom._get_alibi_slopes)
    falcon._get_alibi_slopes = _on_cpu(falcon._get_alibi_slopes)
    init = activation.XIELU.__init__

    def xielu_init(self, *args, **kwargs):
        with torch.device("cpu"):
            init(self, *args, **kwargs)
        self.to("meta")

    activation.XIELU.__init__ = xielu_init


def _patched_first(run_scenario):
    """``run_scenario`` with the patches applied on its first call: after the harness's bootstrap
    (its emulated GPU and stand-ins), which must come before vLLM's model modules are imported."""
    done = []

    @functools.wraps(run_scenario)
    def wrapped(*args, **kwargs):
        if not done:
            patch()
            done.append(True)
        return run_scenario(*args, **kwargs)

    return wrapped


if __name__ == "__main__":
    vr.run_scenario = _patched_first(vr.run_scenario)
    # the batch mode runs each config in a child process of ``vr.__file__``: this script, so the
    # children patch too
    vr.__file__ = os.path.abspath(__file__)
    vr.main()
